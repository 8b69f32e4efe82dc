"""An open study with items and annotators, for the assignment service's tests."""

from __future__ import annotations

from django.contrib.auth import get_user_model

from annotation.members.services import add_members
from annotation.models import Study
from annotation.studies.services import create_study
from annotation.transfer.services.item_import import import_items
from tests.conftest import jsonl, preference_item, verification_item


def make_study(
    kind: str = "verification",
    *,
    n: int = 3,
    items: int = 5,
    annotators: int = 3,
    slug: str = "s",
    item_overrides=None,
    **options,
) -> tuple[Study, list]:
    """An open study with `items` items and annotators a1..a<annotators>."""
    study = create_study(slug=slug, name=slug, kind=kind, annotators_per_item=n, **options)
    names = [f"{slug}-a{number}" for number in range(1, annotators + 1)]
    if names:
        add_members(study=study, usernames=names, role="annotator")
    make = preference_item if kind == "preference" else verification_item
    records = [make(f"i-{number}", **(item_overrides or {})) for number in range(items)]
    import_items(study=study, stream=jsonl(*records), fmt="jsonl")
    study.refresh_from_db()
    users = [get_user_model().objects.get(username=name) for name in names]
    return study, users
