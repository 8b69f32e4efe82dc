"""Every read of the annotation app that is more than `obj.field`."""

from __future__ import annotations

from annotation.models import Study, StudyMember

#: What a former member's pseudonym starts with, before their user id (`unknown_pseudonym`).
UNKNOWN_PSEUDONYM_PREFIX = "user-"


def unknown_pseudonym(user_id: int) -> str:
    """The name of someone who holds answers but is no longer a member (as exports show them)."""
    return f"{UNKNOWN_PSEUDONYM_PREFIX}{user_id}"


class Pseudonyms(dict[int, str]):
    """user id -> pseudonym, the only name exports, pages and reports show; `names[user_id]`
    of a user who is no longer a member gives `user-<id>` instead of a KeyError."""

    def __missing__(self, user_id: int) -> str:
        return unknown_pseudonym(user_id)


def pseudonyms(study: Study) -> Pseudonyms:
    return Pseudonyms(StudyMember.objects.filter(study=study).values_list("user_id", "pseudonym"))
