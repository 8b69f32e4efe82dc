"""Creating and configuring studies."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from django.contrib.auth.models import User
from django.db import transaction
from django.utils.text import slugify

from ..models import Study
from ..vocab import BINARY_SIDES, PREFERENCE_BOTH_BAD, PREFERENCE_TIE, default_binary_map, default_labels
from .errors import ServiceError


def _validated_labels(kind: str, labels: Sequence[str] | None, both_bad_allowed: bool) -> list[str]:
    chosen = [label.strip() for label in (labels or default_labels(kind)) if label.strip()]
    if len(chosen) < 2:
        raise ServiceError("a study needs at least two labels")
    if len(set(chosen)) != len(chosen):
        raise ServiceError(f"labels must be distinct, got {', '.join(chosen)}")
    if kind == "preference":
        expected = default_labels("preference")
        if any(label not in [*expected, PREFERENCE_BOTH_BAD] for label in chosen):
            raise ServiceError(
                f"preference labels are the ordinal scale {', '.join(expected)} (tie optional); got {', '.join(chosen)}"
            )
        if both_bad_allowed and PREFERENCE_BOTH_BAD not in chosen:
            chosen.append(PREFERENCE_BOTH_BAD)
    return chosen


@transaction.atomic
def create_study(
    *,
    slug: str,
    name: str,
    kind: str,
    annotators_per_item: int = 3,
    labels: Sequence[str] | None = None,
    label_aliases: Mapping[str, str] | None = None,
    binary_map: Mapping[str, str] | None = None,
    systems: Sequence[str] | None = None,
    seed: int | None = None,
    instructions: str = "",
    evidence_judgements: bool = False,
    justification_required: bool = False,
    tie_allowed: bool = True,
    both_bad_allowed: bool = False,
    irrelevant_in_credibility: bool = False,
    gold_in_agreement: bool = True,
    status: str = Study.Status.OPEN,
    created_by: User | None = None,
) -> Study:
    """Create a study, with the kind's default vocabulary unless labels are given."""
    if kind not in Study.Kind.values:
        raise ServiceError(f"kind must be one of {', '.join(Study.Kind.values)}, got {kind!r}")
    if slugify(slug) != slug or not slug:
        raise ServiceError(f"{slug!r} is not a valid slug (lowercase letters, digits and hyphens)")
    if Study.objects.filter(slug=slug).exists():
        raise ServiceError(f"a study with slug {slug!r} already exists")
    if not name.strip():
        raise ServiceError("a study needs a name")
    if not 1 <= annotators_per_item <= 100:
        raise ServiceError("annotators per item must be between 1 and 100")
    chosen = _validated_labels(kind, labels, both_bad_allowed)
    if kind == "preference" and not tie_allowed and PREFERENCE_TIE in chosen:
        chosen.remove(PREFERENCE_TIE)
    aliases = dict(label_aliases or {})
    bad_aliases = sorted(target for target in aliases.values() if target not in chosen)
    if bad_aliases:
        raise ServiceError(f"label aliases point at unknown label(s): {', '.join(bad_aliases)}")
    collapse = dict(binary_map) if binary_map else default_binary_map(kind, chosen)
    unknown = sorted(set(collapse) - set(chosen))
    sides = sorted(set(collapse.values()) - set(BINARY_SIDES))
    if unknown or sides:
        raise ServiceError(
            "binary map must send study labels to 'positive' or 'negative'"
            + (f"; unknown label(s): {', '.join(unknown)}" if unknown else "")
            + (f"; unknown side(s): {', '.join(sides)}" if sides else "")
        )
    declared_systems = [system.strip() for system in (systems or []) if system.strip()]
    if declared_systems and (kind != "preference" or len(set(declared_systems)) != 2 or len(declared_systems) != 2):
        raise ServiceError("systems are declared for preference studies only, exactly two distinct names")
    study = Study(
        slug=slug,
        name=name.strip(),
        kind=kind,
        annotators_per_item=annotators_per_item,
        labels=chosen,
        label_aliases=aliases,
        binary_map=collapse,
        systems=declared_systems,
        instructions=instructions,
        evidence_judgements=evidence_judgements,
        justification_required=justification_required,
        tie_allowed=tie_allowed,
        both_bad_allowed=both_bad_allowed,
        irrelevant_in_credibility=irrelevant_in_credibility,
        gold_in_agreement=gold_in_agreement,
        status=status,
        created_by=created_by,
    )
    if seed is not None:
        study.seed = seed
    study.save()
    return study


@transaction.atomic
def set_study_status(*, study: Study, status: str) -> Study:
    """Open, close or reopen a study."""
    if status not in Study.Status.values:
        raise ServiceError(f"status must be one of {', '.join(Study.Status.values)}")
    study.status = status
    study.save(update_fields=["status", "updated_at"])
    return study
