"""/invite/<token>/: join a study through an invite link, creating an account first if needed.

Open to people who are not logged in (the link is their credential). Sign-ups are
throttled per client address and count against the invite's uses atomically
(members/invites.py). A bad, withdrawn, expired or used-up link gets a page that says so.
"""

from __future__ import annotations

from axes.helpers import get_client_ip_address
from django.contrib.auth import login
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache

from annotation.errors import ServiceError
from annotation.http import AuthenticatedHttpRequest
from annotation.members.forms import InviteSignupForm
from annotation.members.invites import (
    InviteUnusable,
    SignupThrottled,
    check_signup_allowed,
    find_invite,
    invite_refusal,
    join_through_invite,
    sign_up_through_invite,
)
from annotation.models import Invite, StudyMember

#: Django's model backend: an account just made here is logged in without asking for the password again.
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


def _unusable(request: HttpRequest, reason: str, *, status: int, invite: Invite | None = None) -> HttpResponse:
    context = {"reason": reason, "study": invite.study if invite is not None else None}
    return render(request, "annotation/invite_unusable.html", context, status=status)


def _throttled(request: HttpRequest, exc: SignupThrottled) -> HttpResponse:
    response = _unusable(request, f"Not now: {exc}.", status=429)
    response["Retry-After"] = str(exc.retry_after)
    return response


def _landing(member: StudyMember) -> HttpResponse:
    """Annotators go straight to their first item; researchers to the study's page."""
    if member.role == StudyMember.Role.ANNOTATOR:
        return redirect("annotation:annotate", slug=member.study.slug)
    return redirect("annotation:study_detail", slug=member.study.slug)


@never_cache
def invite(request: HttpRequest, token: str) -> HttpResponse:
    """GET: what the invite is for, with a sign-up form (or a Join button when logged in). POST: do it."""
    if request.method not in ("GET", "POST"):
        return HttpResponseNotAllowed(["GET", "POST"])
    found = find_invite(token)
    if found is None:
        reason = "This invite link is not valid. Check that you copied the whole link, or ask for a new one."
        return _unusable(request, reason, status=404)
    refusal = invite_refusal(found)
    if refusal is not None:
        return _unusable(request, refusal, status=410, invite=found)
    if request.user.is_authenticated:
        return _join(request, found)  # type: ignore[arg-type]  # authenticated: a User
    return _sign_up(request, found)


def _join(request: AuthenticatedHttpRequest, found: Invite) -> HttpResponse:
    member = StudyMember.objects.filter(study=found.study, user=request.user, is_active=True).first()
    if member is not None:
        return _landing(member)
    if request.method == "POST":
        try:
            member, _ = join_through_invite(invite=found, user=request.user)
        except InviteUnusable as exc:
            return _unusable(request, str(exc), status=410, invite=found)
        except ServiceError as exc:
            return _unusable(request, f"You cannot join: {exc}.", status=403, invite=found)
        return _landing(member)
    return render(request, "annotation/invite.html", {"invite": found, "study": found.study, "form": None})


def _sign_up(request: HttpRequest, found: Invite) -> HttpResponse:
    form = InviteSignupForm(request.POST or None)
    if request.method == "POST":
        address = get_client_ip_address(request)
        try:
            check_signup_allowed(address)
        except SignupThrottled as exc:
            return _throttled(request, exc)
        if form.is_valid():
            try:
                user, member = sign_up_through_invite(
                    invite=found,
                    username=form.cleaned_data["username"],
                    password=form.cleaned_data["password1"],
                    ip_address=address,
                )
            except InviteUnusable as exc:
                return _unusable(request, str(exc), status=410, invite=found)
            except SignupThrottled as exc:
                return _throttled(request, exc)
            except ServiceError as exc:
                form.add_error(None, str(exc))
            else:
                login(request, user, backend=MODEL_BACKEND)
                return _landing(member)
    status = 400 if request.method == "POST" else 200
    context = {"invite": found, "study": found.study, "form": form}
    return render(request, "annotation/invite.html", context, status=status)
