"""The demo: studies built from real published data (fixtures/), loaded idempotently."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from annotation.members.services import add_members, generate_password
from annotation.models import Annotation, Item, Study, StudyMember
from annotation.studies.services import create_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items

DEMO_RESEARCHER = "researcher"
DEMO_ANNOTATORS = ("annotator1", "annotator2", "annotator3")


@dataclass
class DemoOutcome:
    lines: list[str] = field(default_factory=list)
    passwords: dict[str, str] = field(default_factory=dict)


def fixtures_dir() -> Path:
    return Path(settings.BASE_DIR) / "fixtures"


def load_demo(*, directory: Path | None = None, reset_passwords: bool = False) -> DemoOutcome:
    """Create the demo studies, their data and the demo accounts; a rerun adds only what is missing.

    Passwords are generated for accounts created now (or reset on request) and
    returned once; they are never stored in clear.
    """
    directory = directory or fixtures_dir()
    definitions = json.loads((directory / "studies.json").read_text(encoding="utf-8"))
    outcome = DemoOutcome()
    for definition in definitions:
        outcome.lines.append(_load_study(directory, definition))
    outcome.passwords = _demo_accounts(reset_passwords)
    for definition in definitions:
        study = Study.objects.get(slug=definition["slug"])
        add_members(study=study, usernames=[DEMO_RESEARCHER], role=StudyMember.Role.RESEARCHER)
        add_members(study=study, usernames=list(DEMO_ANNOTATORS), role=StudyMember.Role.ANNOTATOR)
    return outcome


@transaction.atomic
def _load_study(directory: Path, definition: dict) -> str:
    slug = definition["slug"]
    study = Study.objects.filter(slug=slug).first()
    if study is None:
        options = definition.get("options", {})
        study = create_study(
            slug=slug,
            name=definition["name"],
            kind=definition["kind"],
            annotators_per_item=definition["annotators_per_item"],
            labels=definition["labels"],
            label_aliases=definition.get("label_aliases") or {},
            binary_map=definition.get("binary_map") or {},
            systems=definition.get("systems") or None,
            instructions=definition.get("instructions", "") + f"\n\n---\n*Data: {definition.get('source', '')}*",
            evidence_judgements=options.get("evidence_judgements", False),
            justification_required=options.get("justification_required", False),
            tie_allowed=options.get("tie_allowed", True),
            both_bad_allowed=options.get("both_bad_allowed", False),
            seed=definition.get("seed"),
        )
    items = annotations = 0
    if not Item.objects.filter(study=study).exists():
        with (directory / definition["items"]).open("rb") as stream:
            items = import_items(study=study, stream=stream, fmt="jsonl").created
    if definition.get("annotations") and not Annotation.objects.filter(assignment__study=study).exists():
        with (directory / definition["annotations"]).open("rb") as stream:
            annotations = import_annotations(study=study, stream=stream, fmt="jsonl").created
    if items or annotations:
        return f"{slug}: loaded {items} items and {annotations} annotations"
    return f"{slug}: already loaded"


def _demo_accounts(reset_passwords: bool) -> dict[str, str]:
    """Create (or reset) the demo researcher and annotators; returns new passwords."""
    User = get_user_model()
    passwords: dict[str, str] = {}
    for username in (DEMO_RESEARCHER, *DEMO_ANNOTATORS):
        user = User.objects.filter(username=username).first()
        if user is None or reset_passwords:
            password = generate_password()
            if user is None:
                user = User.objects.create_user(username=username, password=password)
            else:
                user.set_password(password)
                user.save(update_fields=["password"])
            passwords[username] = password
    return passwords
