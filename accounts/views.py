"""The account's "API tokens" page: list, create (the key shown once), revoke; and the one-time
set-password page of a researcher invited by ``manage.py invite_researcher``."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import PasswordResetConfirmView
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.views.decorators.http import require_POST

from annotation.http import AuthenticatedHttpRequest

from .access import access_token
from .forms import TokenForm
from .selectors import tokens_of
from .services import TokenError, issue_token, revoke_token


@login_required
def api_tokens(request: AuthenticatedHttpRequest) -> HttpResponse:
    new_key = None
    form = TokenForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            issued = issue_token(
                user=request.user, name=form.cleaned_data["name"], expires_in_days=form.cleaned_data["expires_in_days"]
            )
        except TokenError as exc:
            form.add_error(None, str(exc))
        else:
            # Rendered, not redirected: the key must not travel through a URL or the session.
            new_key = issued.key
            form = TokenForm()
    status = 400 if request.method == "POST" and form.errors else 200
    context = {"form": form, "tokens": tokens_of(request.user), "new_key": new_key}
    return render(request, "accounts/api_tokens.html", context, status=status)


@login_required
@require_POST
def revoke(request: AuthenticatedHttpRequest, token_id: int) -> HttpResponse:
    token = revoke_token(token=access_token(request.user, token_id))
    messages.success(request, f"Token {token.prefix}… revoked.")
    return redirect("accounts:api_tokens")


class SetPasswordView(PasswordResetConfirmView):
    """The link ``invite_researcher`` prints: set a password once, then be logged in (accounts/researchers.py)."""

    template_name = "accounts/set_password.html"
    post_reset_login = True
    post_reset_login_backend = "django.contrib.auth.backends.ModelBackend"
    success_url = reverse_lazy("annotation:my_studies")
