"""Every read of the annotation app that is more than `obj.field`."""

from __future__ import annotations

from collections.abc import Generator
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import CharField, Count, Func, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce

from annotation.adjudication.selectors import adjudicated_labels
from annotation.lib.pseudonyms import pseudonyms
from annotation.models import Annotation, AnnotationRevision, ExportJob, ImportJob, Participant, Study, StudyMember
from annotation.progress.selectors import annotation_count

EXPORT_COLUMNS = [
    "study",
    "item",
    "domain",
    "annotator",
    "label",
    "raw_label",
    "left_system",
    "right_system",
    "preferred_system",
    "strength",
    "choice",
    "justification",
    "evidence_judgements",
    "active_ms",
    "status",
    "created_at",
    "submitted_at",
    "revision_count",
    "source",
    "adjudicated_label",
]


#: The prefix of an extra question's column: q_<key> holds the answer (per system for list and claim
#: questions, as JSON in CSV), after EXPORT_COLUMNS.
QUESTION_COLUMN = "q_"


def export_columns(study: Study) -> list[str]:
    """EXPORT_COLUMNS, then the annotator's condition (a study with conditions), then one column per extra
    question of the study, in the study's order."""
    condition = ["condition"] if study.conditions else []
    return [*EXPORT_COLUMNS, *condition, *(QUESTION_COLUMN + question["key"] for question in study.questions)]


def recent_imports(study: Study, limit: int = 10) -> QuerySet[ImportJob]:
    return ImportJob.objects.filter(study=study).select_related("created_by")[:limit]


def recent_exports(study: Study, limit: int = 5) -> QuerySet[ExportJob]:
    return ExportJob.objects.filter(study=study).select_related("created_by")[:limit]


def latest_export(study: Study, file_format: str) -> ExportJob | None:
    """The study's newest export job of this format (the report page links its Hugging Face one)."""
    return ExportJob.objects.filter(study=study, file_format=file_format).first()


def export_inline_limit() -> int:
    """Annotations up to which an export streams from the request; more go to a background task."""
    return settings.EXPORT_INLINE_MAX_ROWS


def export_runs_in_background(study: Study) -> bool:
    """True when the study has too many annotations to export inside a request (docs/architecture.md, Mechanisms)."""
    return annotation_count(study) > export_inline_limit()


class IsoFormatUTC(Func):
    """PostgreSQL: a timestamp as the text Python's `datetime.isoformat()` gives for it in UTC
    (microseconds only when not zero). Why: loading 600,000 timestamps into datetimes and
    formatting them again was half of a 300,000-row export on PostgreSQL."""

    output_field = CharField()
    template = (
        "CASE WHEN %(expressions)s IS NULL THEN NULL ELSE "
        "to_char(%(expressions)s AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS') || "
        "CASE WHEN to_char(%(expressions)s, 'US') = '000000' THEN '' ELSE '.' || to_char(%(expressions)s, 'US') END "
        "|| '+00:00' END"
    )


def _iso(value: datetime | str | None) -> str | None:
    """Export text of a timestamp: already text when the database formatted it (IsoFormatUTC)."""
    if value is None or isinstance(value, str):
        return value
    return value.isoformat()


def export_rows(study: Study) -> Generator[dict[str, Any], None, None]:
    """One row per annotation (long format), streamed from the database.

    Columns are `export_columns`; annotators appear by pseudonym only. `adjudicated_label`
    repeats the item's adjudicated label on each of its rows: empty when nobody adjudicated
    it, and empty too when its adjudicators disagree (selectors.adjudication.adjudicated_labels).
    Crowd participants who withdrew are left out (their consent is gone); screened-out ones
    stay, for the researcher to judge.
    """
    names = pseudonyms(study)
    systems = list(study.systems)
    question_keys = [question["key"] for question in study.questions]
    conditions = (
        dict(StudyMember.objects.filter(study=study).values_list("user_id", "condition")) if study.conditions else None
    )
    adjudicated = adjudicated_labels(study).labels
    revisions = (
        AnnotationRevision.objects.filter(annotation=OuterRef("pk"))
        .order_by()
        .values("annotation")
        .annotate(n=Count("pk"))
        .values("n")
    )
    fields: tuple[str, ...] = (
        "assignment__item__external_id",
        "assignment__item__domain",
        "assignment__annotator_id",
        "label",
        "raw_label",
        "assignment__left_system",
        "preferred_system",
        "strength",
        "choice",
        "justification",
        "evidence_judgements",
        "active_ms",
        "assignment__status",
        "created_at",
        "assignment__submitted_at",
        "n_revisions",
        "source",
        "question_answers",
    )
    rows = Annotation.objects.filter(assignment__study=study).annotate(n_revisions=Coalesce(Subquery(revisions), 0))
    withdrawn = Participant.objects.filter(study=study, status=Participant.Status.WITHDRAWN)
    rows = rows.exclude(assignment__annotator_id__in=withdrawn.values("member__user_id"))
    if connection.vendor == "postgresql":
        rows = rows.annotate(
            created_iso=IsoFormatUTC("created_at"), submitted_iso=IsoFormatUTC("assignment__submitted_at")
        )
        fields = tuple(
            {"created_at": "created_iso", "assignment__submitted_at": "submitted_iso"}.get(f, f) for f in fields
        )
    values = rows.order_by("assignment__item__position", "assignment__item_id", "assignment__slot", "pk").values_list(
        *fields
    )
    for (
        item,
        domain,
        annotator_id,
        label,
        raw_label,
        left,
        preferred,
        strength,
        choice,
        justification,
        evidence,
        active_ms,
        status,
        created_at,
        submitted_at,
        n_revisions,
        source,
        answers,
    ) in values.iterator(chunk_size=5000):
        right = next((system for system in systems if system != left), "") if left else ""
        yield {
            "study": study.slug,
            "item": item,
            "domain": domain,
            "annotator": names[annotator_id],
            "label": label,
            "raw_label": raw_label,
            "left_system": left,
            "right_system": right,
            "preferred_system": preferred,
            "strength": strength,
            "choice": choice,
            "justification": justification,
            "evidence_judgements": evidence or None,
            "active_ms": active_ms,
            "status": status,
            "created_at": _iso(created_at),
            "submitted_at": _iso(submitted_at),
            "revision_count": n_revisions,
            "source": source,
            "adjudicated_label": adjudicated.get(item, ""),
            **({"condition": conditions.get(annotator_id, "")} if conditions is not None else {}),
            **{QUESTION_COLUMN + key: (answers or {}).get(key) for key in question_keys},
        }
