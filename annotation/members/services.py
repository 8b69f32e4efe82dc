"""Study membership: people who log in, and identities of imported labels."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import models, transaction

from annotation.errors import ServiceError
from annotation.models import AccountOrigin, Study, StudyMember

PSEUDONYM_PREFIX: dict[str, str] = {StudyMember.Role.ANNOTATOR: "ann", StudyMember.Role.RESEARCHER: "res"}


@dataclass
class MemberOutcome:
    username: str
    role: str
    pseudonym: str
    created_user: bool
    password: str | None = None  # only for users created now; shown once, never stored
    already_member: bool = False
    reactivated: bool = False  # a deactivated member added again


def generate_password() -> str:
    """A password for a new account: 16 URL-safe characters (~96 bits)."""
    return secrets.token_urlsafe(12)


def _next_pseudonym(study: Study, role: str, taken: set[str]) -> str:
    prefix = PSEUDONYM_PREFIX[role]
    number = 1
    while f"{prefix}-{number:02d}" in taken:
        number += 1
    name = f"{prefix}-{number:02d}"
    taken.add(name)
    return name


def next_free_pseudonym(study: Study, role: str) -> str:
    """The role's first free pseudonym in the study (ann-01, ann-02, ...), for one new member."""
    return _next_pseudonym(study, role, set(study.members.values_list("pseudonym", flat=True)))


@transaction.atomic
def add_members(*, study: Study, usernames: Iterable[str], role: str) -> list[MemberOutcome]:
    """Add users to a study, creating missing accounts with generated passwords.

    An account created here is recorded as made by this study (AccountOrigin), the only
    kind besides invite sign-ups whose password the study's researchers may reset; an
    existing account added here never is.

    A user already in the study keeps their membership (and role); that is
    reported, not changed, so a rerun never demotes anyone. A deactivated
    member is reactivated, with their old pseudonym and role.
    """
    if role not in StudyMember.Role.values:
        raise ServiceError(f"role must be one of {', '.join(StudyMember.Role.values)}, got {role!r}")
    names = [name.strip() for name in usernames if name.strip()]
    if not names:
        raise ServiceError("give at least one username")
    User = get_user_model()
    username_field = User._meta.get_field(User.USERNAME_FIELD)
    assert isinstance(
        username_field, models.Field
    )  # a column, not a relation: `username`, a CharField, on Django's User
    invalid = []
    for name in names:
        try:
            username_field.run_validators(name)
        except Exception:
            invalid.append(name)
    if invalid:
        raise ServiceError(f"invalid username(s): {', '.join(invalid)} (letters, digits and @/./+/-/_ only)")
    taken = set(study.members.values_list("pseudonym", flat=True))
    outcomes: list[MemberOutcome] = []
    for name in dict.fromkeys(names):
        user = User.objects.filter(**{User.USERNAME_FIELD: name}).first()
        password = None
        created = user is None
        if user is None:
            password = generate_password()
            user = User.objects.create_user(**{User.USERNAME_FIELD: name}, password=password)
            # Made for this study: its researchers may reset this password (members/membership.py).
            AccountOrigin.objects.create(user=user, study=study, how=AccountOrigin.How.ADDED)
        member = StudyMember.objects.filter(study=study, user=user).first()
        if member is not None and not member.is_active:
            # Added again after being removed: back in, with the same pseudonym and role.
            StudyMember.objects.filter(pk=member.pk).update(is_active=True, deactivated_at=None)
            outcomes.append(MemberOutcome(name, member.role, member.pseudonym, created, password, reactivated=True))
            continue
        if member is not None:
            outcomes.append(MemberOutcome(name, member.role, member.pseudonym, created, password, True))
            continue
        member = StudyMember.objects.create(
            study=study, user=user, role=role, pseudonym=_next_pseudonym(study, role, taken)
        )
        outcomes.append(MemberOutcome(name, role, member.pseudonym, created, password))
    return outcomes


def _external_username(study: Study, annotator: str) -> str:
    digest = hashlib.sha256(f"{study.pk}\x1f{annotator}".encode()).hexdigest()[:16]
    return f"ext-{study.slug[:40]}-{digest}"


def ensure_annotator_identities(*, study: Study, names: Iterable[str]) -> dict[str, int]:
    """Map annotator names of an imported file to user ids of this study.

    A name that is a member's pseudonym is that member; any other name becomes
    an external identity (an inactive user that cannot log in) of this study
    only. Call inside the import's transaction.
    """
    wanted = set(names)
    members = dict(StudyMember.objects.filter(study=study, pseudonym__in=wanted).values_list("pseudonym", "user_id"))
    missing = sorted(wanted - set(members))
    if missing:
        User = get_user_model()
        users = []
        for name in missing:
            user = User(username=_external_username(study, name), is_active=False)
            user.set_unusable_password()
            users.append(user)
        User.objects.bulk_create(users, batch_size=500)
        ids = dict(User.objects.filter(username__in=[user.username for user in users]).values_list("username", "id"))
        StudyMember.objects.bulk_create(
            [
                StudyMember(
                    study=study,
                    user_id=ids[_external_username(study, name)],
                    role=StudyMember.Role.ANNOTATOR,
                    pseudonym=name,
                    is_external=True,
                )
                for name in missing
            ],
            batch_size=500,
        )
        members.update({name: ids[_external_username(study, name)] for name in missing})
    return members
