"""Invite links: create (the link exists once), revoke, and join a study through one.

A token is 256 random bits (`secrets.token_urlsafe(32)`); only its SHA-256 is stored,
so a copy of the database cannot be turned into working links, and a plain hash is
enough for a key this long (as for accounts.ApiToken). Uses are counted by one
conditional UPDATE (`uses < max_uses`, not revoked, not expired) in the transaction
that creates the account and the membership: of two people signing up at once on a
1-use invite, one gets in and the other is told the link is used up, and a failure
later in the transaction gives the use back. Accounts created through invites are
throttled per client address (INVITE_SIGNUP_LIMIT per INVITE_SIGNUP_WINDOW_MINUTES, the
address found as for logins), so a link with many uses cannot mint accounts at will.
"""

from __future__ import annotations

import hashlib
import ipaddress
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from annotation.errors import ServiceError
from annotation.members.services import next_free_pseudonym
from annotation.models import AccountOrigin, Invite, InviteSignup, Study, StudyMember

#: Characters of the token kept in clear, so researchers can tell their invites apart.
PREFIX_LENGTH = 6
#: Attempts when two people join one study at once and pick the same pseudonym.
JOIN_ATTEMPTS = 3
TAKEN = "that username is taken; choose another"


class InviteUnusable(ServiceError):
    """The invite is revoked, expired or used up; the message says which."""


class AccountRefused(ServiceError):
    """The new account's username or password does not pass; `field` names which."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class SignupThrottled(ServiceError):
    """Too many accounts were created through invites from this address lately."""

    def __init__(self, retry_after: int) -> None:
        self.retry_after = retry_after
        minutes = max(1, -(-retry_after // 60))
        super().__init__(f"too many accounts were created from your address; try again in {minutes} minute(s)")


@dataclass(frozen=True)
class IssuedInvite:
    invite: Invite
    token: str  # the only time the clear token exists


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create_invite(
    *,
    study: Study,
    created_by: User | None,
    role: str = StudyMember.Role.ANNOTATOR,
    expires_in_days: int | None = None,
    max_uses: int = 1,
) -> IssuedInvite:
    """A new invite to the study; the token is returned here and nowhere else."""
    if role not in StudyMember.Role.values:
        raise ServiceError(f"role must be one of {', '.join(StudyMember.Role.values)}, got {role!r}")
    days = settings.INVITE_DEFAULT_DAYS if expires_in_days is None else expires_in_days
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= settings.INVITE_MAX_DAYS:
        raise ServiceError(f"expires_in_days must be a whole number from 1 to {settings.INVITE_MAX_DAYS}")
    if isinstance(max_uses, bool) or not isinstance(max_uses, int) or not 1 <= max_uses <= settings.INVITE_MAX_USES:
        raise ServiceError(f"max_uses must be a whole number from 1 to {settings.INVITE_MAX_USES}")
    token = secrets.token_urlsafe(32)
    now = timezone.now()
    invite = Invite.objects.create(
        study=study,
        token_hash=hash_token(token),
        prefix=token[:PREFIX_LENGTH],
        role=role,
        max_uses=max_uses,
        expires_at=now + timedelta(days=days),
        created_by=created_by,
        created_at=now,
    )
    return IssuedInvite(invite=invite, token=token)


def revoke_invite(*, invite: Invite) -> Invite:
    """Stop the link working (kept in the list, marked revoked); revoking twice keeps the first time."""
    if invite.revoked_at is None:
        Invite.objects.filter(pk=invite.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
        invite.refresh_from_db(fields=["revoked_at"])
    return invite


def find_invite(token: str) -> Invite | None:
    """The invite a link's token names, with its study; None for a token that matches nothing."""
    if not token or len(token) > 200:
        return None
    return Invite.objects.select_related("study").filter(token_hash=hash_token(token)).first()


def invite_refusal(invite: Invite, now: datetime | None = None) -> str | None:
    """Why the invite cannot be used now, in words for the person holding the link; None if it can."""
    state = invite.state(now)
    if state == "revoked":
        return "This invite was withdrawn by the study's researchers."
    if state == "expired":
        return f"This invite expired on {timezone.localtime(invite.expires_at):%Y-%m-%d %H:%M}."
    if state == "used up":
        return f"This invite has been used {invite.max_uses} time(s), as many as it allows."
    return None


def _take_a_use(invite: Invite, now: datetime) -> None:
    """Count one use, if one is left: the conditional UPDATE that makes max_uses hold under races."""
    taken = Invite.objects.filter(
        pk=invite.pk, revoked_at__isnull=True, expires_at__gt=now, uses__lt=F("max_uses")
    ).update(uses=F("uses") + 1)
    if not taken:
        invite.refresh_from_db()
        raise InviteUnusable(invite_refusal(invite, now) or "This invite cannot be used now.")
    invite.uses += 1


def _add_member(invite: Invite, user: User) -> StudyMember:
    return StudyMember.objects.create(
        study=invite.study, user=user, role=invite.role, pseudonym=next_free_pseudonym(invite.study, invite.role)
    )


def join_through_invite(*, invite: Invite, user: User, now: datetime | None = None) -> tuple[StudyMember, bool]:
    """A logged-in user joins the invite's study; returns (membership, whether it is new).

    Already an active member: nothing changes and no use is counted. Deactivated by the
    study's researchers: refused (an invite does not undo their decision).
    """
    now = now or timezone.now()
    for attempt in range(JOIN_ATTEMPTS):
        existing = StudyMember.objects.filter(study=invite.study, user=user).first()
        if existing is not None:
            if not existing.is_active:
                raise ServiceError(
                    "your membership in this study was ended by its researchers; ask them to add you again"
                )
            return existing, False
        try:
            with transaction.atomic():
                _take_a_use(invite, now)
                return _add_member(invite, user), True
        except IntegrityError:
            # Someone joined at the same moment with the same pseudonym (or this user twice): look again.
            invite.refresh_from_db()
            if attempt == JOIN_ATTEMPTS - 1:
                raise ServiceError("too many people are joining at this moment; try again") from None
    raise AssertionError("unreachable")


def signup_window() -> timedelta:
    return timedelta(minutes=settings.INVITE_SIGNUP_WINDOW_MINUTES)


def _address(ip_address: str | None) -> str | None:
    """The client address as stored, or None when it is not one (a misconfigured proxy header):
    unknown addresses share one throttle bucket rather than failing the sign-up."""
    try:
        return str(ipaddress.ip_address((ip_address or "").strip()))
    except ValueError:
        return None


def check_signup_allowed(ip_address: str | None, now: datetime | None = None) -> None:
    """SignupThrottled when this address created INVITE_SIGNUP_LIMIT accounts within the window."""
    ip_address = _address(ip_address)
    now = now or timezone.now()
    since = now - signup_window()
    recent = InviteSignup.objects.filter(ip_address=ip_address, created_at__gt=since).order_by("created_at")
    times = list(recent.values_list("created_at", flat=True)[: settings.INVITE_SIGNUP_LIMIT])
    if len(times) >= settings.INVITE_SIGNUP_LIMIT:
        retry_after = int((times[0] + signup_window() - now).total_seconds()) + 1
        raise SignupThrottled(max(retry_after, 1))


def _check_new_account(username: str, password: str) -> None:
    """The same rules as Django's sign-up form, so a caller that skipped the form is held to them."""
    if not username:
        raise AccountRefused("username", "required")
    field = User._meta.get_field("username")
    try:
        field.run_validators(username)
    except ValidationError as exc:
        raise AccountRefused("username", " ".join(exc.messages)) from None
    if User.objects.filter(username__iexact=username).exists():
        raise AccountRefused("username", TAKEN)
    try:
        validate_password(password, User(username=username))
    except ValidationError as exc:
        raise AccountRefused("password", " ".join(exc.messages)) from None


def sign_up_through_invite(
    *, invite: Invite, username: str, password: str, ip_address: str | None, now: datetime | None = None
) -> tuple[User, StudyMember]:
    """Create an account and its membership of the invite's study, in one transaction.

    Refused, with nothing written, when the address is throttled, the username or
    password does not pass Django's validators, or the invite has no use left.
    """
    now = now or timezone.now()
    ip_address = _address(ip_address)
    check_signup_allowed(ip_address, now)
    username = (username or "").strip()
    _check_new_account(username, password)
    for attempt in range(JOIN_ATTEMPTS):
        try:
            with transaction.atomic():
                _take_a_use(invite, now)
                user = User.objects.create_user(username=username, password=password)
                member = _add_member(invite, user)
                InviteSignup.objects.create(invite=invite, user=user, ip_address=ip_address, created_at=now)
                AccountOrigin.objects.create(
                    user=user, study=invite.study, how=AccountOrigin.How.INVITE, created_at=now
                )
                return user, member
        except IntegrityError:
            invite.refresh_from_db()
            if User.objects.filter(username__iexact=username).exists():
                raise AccountRefused("username", TAKEN) from None
            if attempt == JOIN_ATTEMPTS - 1:
                raise ServiceError("too many people are joining at this moment; try again") from None
    raise AssertionError("unreachable")
