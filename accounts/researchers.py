"""The first researcher of a fresh install (issue 34), without ``createsuperuser``: an account that may
create studies (the Django permission ``annotation.add_study``, which ``annotation.access.may_create_studies``
reads) and a one-time link to set its password.

The link is Django's password-reset link (``default_token_generator``): it is valid for
``PASSWORD_RESET_TIMEOUT`` seconds and only once, since its token is a hash of the password and the
last login, which setting the password (and the login that follows) change. Nothing of it is stored.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import Permission, User
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode


class ResearcherInviteError(ValueError):
    """The e-mail address cannot be invited; the message says why."""


@dataclass(frozen=True)
class ResearcherInvite:
    user: User
    created: bool  # False: an account with this address existed and was reused
    path: str  # the one-time link's path, e.g. /accounts/set-password/<uid>/<token>/


def invite_researcher(*, email: str) -> ResearcherInvite:
    """Create (or reuse) the account of ``email``, let it create studies, and give its set-password link."""
    email = (email or "").strip()
    try:
        validate_email(email)
    except ValidationError:
        raise ResearcherInviteError(f"{email!r} is not an e-mail address (e.g. ada@example.org)") from None
    username_length = User._meta.get_field("username").max_length
    with transaction.atomic():
        users = list(User.objects.select_for_update().filter(email__iexact=email)[:2])
        if len(users) > 1:
            raise ResearcherInviteError(f"more than one account has the address {email}; give each its own first")
        user = users[0] if users else User.objects.filter(username__iexact=email).first()
        created = user is None
        if user is None:
            if len(email) > username_length:  # type: ignore[operator]
                raise ResearcherInviteError(f"the address is longer than {username_length} characters")
            user = User(username=email, email=email)
            user.set_unusable_password()
            user.save()
        elif not user.is_active:
            raise ResearcherInviteError(
                f"the account {user.get_username()} is deactivated; an administrator reactivates it first"
            )
        elif not user.email:
            user.email = email
            user.save(update_fields=["email"])
        user.user_permissions.add(Permission.objects.get(content_type__app_label="annotation", codename="add_study"))
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    path = reverse("accounts:set_password", args=[uid, default_token_generator.make_token(user)])
    return ResearcherInvite(user=user, created=created, path=path)
