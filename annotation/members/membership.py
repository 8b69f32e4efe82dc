"""Changes to existing memberships: role, deactivate / reactivate, remove, password reset.

Labels are never lost here. A member who was ever given an item is *deactivated*, not
deleted, when removed: the row keeps their pseudonym, so exports and reports still
attribute their answers; deactivated, they are an outsider of the study (404 on its pages
and API) and cannot claim or submit (annotation/access.py, workbench/assignment_sql.py).
A study always keeps at least one active researcher, so it can always be managed.

Every change locks the member's row first: the same row `claim_next` locks while it hands
this user an item, so a deactivation waits for a claim in flight and then frees what it took.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from annotation.errors import ServiceError
from annotation.members.services import generate_password
from annotation.models import AccountOrigin, Assignment, PasswordReset, Study, StudyChange, StudyMember
from annotation.progress.quality_counters import close_leases
from annotation.signals import member_password_reset
from annotation.workbench import assignment_sql as sql

Role = StudyMember.Role

#: The change log's field for a password reset (StudyChange.field).
PASSWORD_RESET_FIELD = "password_reset"

#: What `remove_member` did, for the message shown.
REMOVED = "removed"
DEACTIVATED = "deactivated"


class LastResearcher(ServiceError):
    """The change would leave the study without an active researcher."""


@dataclass(frozen=True)
class RemoveOutcome:
    member: StudyMember
    action: str  # REMOVED or DEACTIVATED
    freed_leases: int


def _locked_member(member: StudyMember) -> StudyMember:
    """The member row again, locked for the transaction, so two researchers' changes queue."""
    return StudyMember.objects.select_for_update().select_related("user").get(pk=member.pk)


def _check_keeps_a_researcher(study: Study, member: StudyMember, what: str) -> None:
    """Refuse to remove, deactivate or demote the study's only active researcher.

    The researcher rows are locked first: two researchers demoting each other at once
    run one after the other, and the second is refused.
    """
    if member.role != Role.RESEARCHER or not member.is_active:
        return
    researchers = list(
        StudyMember.objects.select_for_update()
        .filter(study=study, role=Role.RESEARCHER, is_active=True)
        .values_list("pk", flat=True)
    )
    if researchers == [member.pk]:
        raise LastResearcher(
            f"cannot {what} {member.pseudonym}: they are the study's only researcher; add another researcher first"
        )


def free_leases(*, study: Study, user_id: int, now: datetime | None = None) -> int:
    """Give back the user's items in progress in the study (their slots go to other annotators).

    Closed like a skip, so the user is never served those items again, but with the lease kept
    (a skip the user presses clears it): the progress page counts a skip pressed, not this one
    (progress/selectors.py). Call inside a transaction.
    """
    now = now or timezone.now()
    freed = 0
    active = Assignment.objects.filter(study=study, annotator_id=user_id, status=Assignment.Status.ACTIVE)
    for assignment_id, item_id in active.values_list("pk", "item_id"):
        if close_leases([assignment_id], now):  # one that had run out counts as timed out (progress counters)
            sql.give_slot_back(item_id)
            freed += 1
    return freed


@transaction.atomic
def set_member_role(*, study: Study, member: StudyMember, role: str) -> StudyMember:
    """Make a member a researcher or an annotator.

    An imported identity stays an annotator (it is not a login). A new researcher's items
    in progress are given back: researchers do not annotate.
    """
    if role not in Role.values:
        raise ServiceError(f"role must be one of {', '.join(Role.values)}, got {role!r}")
    member = _locked_member(member)
    if member.is_external:
        raise ServiceError(f"{member.pseudonym} is an imported identity, not a login; it stays an annotator")
    if member.role == role:
        return member
    if role == Role.ANNOTATOR:
        _check_keeps_a_researcher(study, member, "make an annotator of")
    else:
        free_leases(study=study, user_id=member.user_id)
    member.role = role
    member.save(update_fields=["role"])
    return member


@transaction.atomic
def set_member_active(*, study: Study, member: StudyMember, active: bool) -> tuple[StudyMember, int]:
    """Deactivate a member (their leases are freed, their labels stay) or reactivate them.

    Returns the member and how many items in progress were given back.
    """
    member = _locked_member(member)
    if member.is_active == active:
        return member, 0
    freed = 0
    if not active:
        _check_keeps_a_researcher(study, member, "deactivate")
        freed = free_leases(study=study, user_id=member.user_id)
    member.is_active = active
    member.deactivated_at = None if active else timezone.now()
    member.save(update_fields=["is_active", "deactivated_at"])
    return member, freed


@transaction.atomic
def remove_member(*, study: Study, member: StudyMember) -> RemoveOutcome:
    """Remove a member: deleted if they were never given an item, deactivated otherwise.

    Why not always delete: the pseudonym row is what attributes a member's answers in
    exports and reports (and keeps skipped and flagged items from being served to them
    again, should they come back). Deleting never touches labels either way.
    """
    member = _locked_member(member)
    _check_keeps_a_researcher(study, member, "remove")
    freed = free_leases(study=study, user_id=member.user_id)
    if member.is_external or Assignment.objects.filter(study=study, annotator_id=member.user_id).exists():
        if member.is_active:
            member.is_active = False
            member.deactivated_at = timezone.now()
            member.save(update_fields=["is_active", "deactivated_at"])
        return RemoveOutcome(member, DEACTIVATED, freed)
    member.delete()
    return RemoveOutcome(member, REMOVED, freed)


def password_reset_refusal(*, actor: User, study: Study, member: StudyMember) -> str | None:
    """Why `actor` may not reset this member's password, or None when they may.

    A password reset hands the account to whoever reads the new password, so it must
    never give the actor more than they already have. The actor may reset only:

    - an active annotator of this study that is a real login (not an imported identity),
      and not the actor themself (a reset would log them out with a password shown on screen);
    - never a staff or superuser account, nor one with any Django permission or group
      (those carry powers beyond studies: the admin, creating studies);
    - never an account that is a researcher anywhere (it could manage studies the actor
      cannot);
    - never an account that is a member (active or not) of a study where the actor is
      not an active researcher: otherwise a researcher of study A could take over an
      annotator of study B and read B's items, instructions and their own progress there;
    - only an account this study created (`AccountOrigin`: a sign-up through one of its
      invites, or an account `add_members` made when a researcher added a new username).
      An account that existed before it joined may be anyone's (a colleague's, an account
      in no study yet, one whose other memberships were removed): adding it as a member
      and resetting its password would hand it over (issue 31). Crowd participants'
      accounts never log in, so they have no origin and are refused above.

    Staff count as researchers of every study, but the rules on the target still hold;
    staff reset any other password in the admin.
    """
    target = member.user
    if member.study_id != study.pk:
        return "that member is not in this study"
    if member.is_external or not target.is_active:
        return f"{member.pseudonym} is not an account that logs in (an imported identity or a disabled account)"
    if not member.is_active:
        return f"{member.pseudonym} is deactivated in this study; reactivate them first"
    if member.role != Role.ANNOTATOR:
        return "only an annotator's password can be reset here"
    if target.pk == actor.pk:
        return "this is your own account; change your password from your account instead"
    if target.is_staff or target.is_superuser:
        return "staff and administrator passwords cannot be reset here"
    if target.groups.exists() or target.user_permissions.exists():
        return "this account has permissions beyond studies; an administrator must reset its password"
    memberships = StudyMember.objects.filter(user=target)
    if memberships.filter(role=Role.RESEARCHER).exists():
        return "this account is a researcher in a study; an administrator must reset its password"
    if not actor.is_staff:
        outside = memberships.exclude(
            study__in=StudyMember.objects.filter(user=actor, role=Role.RESEARCHER, is_active=True).values("study")
        )
        if outside.exists():
            return (
                "this account is also in a study you are not a researcher of; an administrator must reset its password"
            )
    origin = AccountOrigin.objects.filter(user=target).first()
    if origin is None:
        return (
            f"{target.get_username()} had an account before joining this study (it was not created through "
            "this study's invite or by adding a new username here), so it may belong to someone outside the "
            "study; only an administrator can reset its password"
        )
    if origin.study_id != study.pk:
        return "this account was created by another study; only an administrator can reset its password"
    return None


@transaction.atomic
def reset_password(*, actor: User, study: Study, member: StudyMember, ip_address: str | None = None) -> str:
    """Give the member's account a new generated password, returned once and never stored in clear.

    Every session of the account ends (Django ties sessions to the password hash), and
    `member_password_reset` lets the accounts app revoke the account's API tokens.
    See `password_reset_refusal` for who may reset whom, and why. Each reset is recorded
    (`PasswordReset`: who, whose, when, from where; read-only in the admin) and logged in the
    study's change log, and both outlive the membership.
    """
    member = _locked_member(member)
    refusal = password_reset_refusal(actor=actor, study=study, member=member)
    if refusal is not None:
        raise ServiceError(refusal)
    password = generate_password()
    member.user.set_password(password)
    member.user.save(update_fields=["password"])
    _record_reset(actor=actor, study=study, member=member, ip_address=ip_address)
    member_password_reset.send(sender=StudyMember, user=member.user, actor=actor, study=study)
    return password


def _address(ip_address: str | None) -> str | None:
    try:
        return str(ipaddress.ip_address((ip_address or "").strip()))
    except ValueError:
        return None


def _record_reset(*, actor: User, study: Study, member: StudyMember, ip_address: str | None) -> PasswordReset:
    """The audit trail of one reset: a PasswordReset row and a line in the study's change log."""
    now = timezone.now()
    account = member.user
    record = PasswordReset.objects.create(
        study=study,
        researcher=actor,
        researcher_username=actor.get_username(),
        account=account,
        account_username=account.get_username(),
        pseudonym=member.pseudonym,
        ip_address=_address(ip_address),
        created_at=now,
    )
    StudyChange.objects.create(
        study=study,
        changed_by=actor,
        field=PASSWORD_RESET_FIELD,
        old_value=None,
        new_value=f"password of {account.get_username()} ({member.pseudonym}) reset",
    )
    return record
