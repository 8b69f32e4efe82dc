"""Every read of the annotation app that is more than `obj.field`."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.db.models import CharField, Count, Func, OuterRef, Q, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce

from ..access import Researcher, studies_for
from ..models import (
    Annotation,
    AnnotationRevision,
    AnnotatorCount,
    Assignment,
    DomainCount,
    ExportJob,
    ImportJob,
    Item,
    Participant,
    Study,
    StudyMember,
)

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


@dataclass
class StudyProgress:
    """A row of the home page: the study, the user's role, and the counts that matter to that role.

    Researchers see how far the study is (labels collected, items with all N
    labels); annotators see their own labels.
    """

    study: Study
    role: str
    items: int
    annotations: int
    expected: int
    mine: int
    items_complete: int = 0

    @property
    def percent(self) -> int:
        return round(100 * self.annotations / self.expected) if self.expected else 0

    @property
    def is_researcher(self) -> bool:
        return self.role == Researcher


def my_studies(user: User) -> list[StudyProgress]:
    """The user's studies with their role and progress, in three queries whatever their number or size.

    Every count comes from the counter rows (services/counters.py), never from the items
    or annotations themselves, so the page does not grow with the studies.
    """
    studies = list(studies_for(user).annotate(n_items=_counted_items()).order_by("-created_at", "slug"))
    ids = [study.pk for study in studies]
    labels: dict[int, dict[str, Any]] = {
        row["study_id"]: dict(row)
        for row in AnnotatorCount.objects.filter(study_id__in=ids)
        .values("study_id")
        .annotate(
            n_annotations=Sum("annotations"),
            n_complete=Sum("complete"),
            n_mine=Sum("annotations", filter=Q(user=user)),
        )
        .order_by()
    }
    roles = dict(
        StudyMember.objects.filter(study_id__in=ids, user=user, is_active=True).values_list("study_id", "role")
    )
    rows = []
    for study in studies:
        counted = labels.get(study.pk, {})
        rows.append(
            StudyProgress(
                study=study,
                role=roles.get(study.pk, Researcher if user.is_staff else ""),
                items=study.n_items,
                annotations=counted.get("n_annotations") or 0,
                expected=study.n_items * study.annotators_per_item,
                mine=counted.get("n_mine") or 0,
                items_complete=counted.get("n_complete") or 0,
            )
        )
    return rows


def _counted_items() -> Coalesce:
    """A study's number of items, from its DomainCount rows (an expression for `.annotate`)."""
    items = (
        DomainCount.objects.filter(study=OuterRef("pk")).order_by().values("study").annotate(n=Sum("items")).values("n")
    )
    return Coalesce(Subquery(items), 0)


def studies_with_role(user: User) -> QuerySet[Study]:
    """The user's studies with `user_role` and `n_items`, for the API list."""
    role = StudyMember.objects.filter(study=OuterRef("pk"), user=user, is_active=True).values("role")[:1]
    user_role = Coalesce(Subquery(role), Value(Researcher)) if user.is_staff else Subquery(role)
    studies = studies_for(user).annotate(n_items=_counted_items(), user_role=user_role)  # type: ignore[no-redef]  # django-stubs takes Study's declared user_role (set by access.py) for a clash; Django refuses only names of fields
    return studies.order_by("slug")


def items_by_domain(study: Study) -> list[dict[str, Any]]:
    """Per domain: items, items with a gold label, and annotations so far (from the counter rows)."""
    annotations = dict(
        AnnotatorCount.objects.filter(study=study)
        .values("domain")
        .annotate(n=Sum("annotations"))
        .order_by()
        .values_list("domain", "n")
    )
    rows = DomainCount.objects.filter(study=study, items__gt=0).order_by("domain").values("domain", "items", "gold")
    return [{**row, "annotations": annotations.get(row["domain"], 0)} for row in rows]


def study_members(study: Study) -> QuerySet[StudyMember]:
    """Members with their number of annotations (from the counter rows), researchers first."""
    done = (
        AnnotatorCount.objects.filter(study=study, user=OuterRef("user_id"))
        .order_by()
        .values("user")
        .annotate(n=Sum("annotations"))
        .values("n")
    )
    return (
        StudyMember.objects.filter(study=study)
        .select_related("user")
        .annotate(annotations=Coalesce(Subquery(done), 0))
        .order_by("-role", "is_external", "pseudonym")
    )


def study_counts(study: Study) -> dict[str, int]:
    """Headline numbers of a study's overview, in four queries whatever the study's size.

    Items and annotations come from the counter rows (services/counters.py);
    `items_complete` is the items holding all N labels. Annotators and active
    assignments are counted from their rows: they grow with the people at work,
    not with the study (active assignments through the `assignment_leases` index).
    """
    labels = AnnotatorCount.objects.filter(study=study).aggregate(
        n_annotations=Coalesce(Sum("annotations"), 0), n_complete=Coalesce(Sum("complete"), 0)
    )
    items, _gold = item_totals(study)
    annotators = StudyMember.objects.filter(study=study, role=StudyMember.Role.ANNOTATOR).count()
    active = Assignment.objects.filter(study=study, status=Assignment.Status.ACTIVE).count()
    return {
        "items": items,
        "items_complete": labels["n_complete"],
        "annotations": labels["n_annotations"],
        "expected": items * study.annotators_per_item,
        "annotators": annotators,
        "active_assignments": active,
    }


def study_items(
    study: Study, *, domain: str | None = None, query: str | None = None, annotator_id: int | None = None
) -> QuerySet[Item]:
    """A study's items in import order, optionally by domain, text, or annotator.

    With `annotator_id`, only the items that annotator labelled, each with
    `their_label` (the researcher checking a flagged annotator's answers).
    """
    items = (
        Item.objects.filter(study=study)
        .annotate(n_annotations=Count("assignments__annotation"))
        .order_by("position", "pk")
    )
    if domain is not None:
        items = items.filter(domain=domain)
    if query:
        items = items.filter(Q(external_id__icontains=query) | Q(summary__icontains=query))
    if annotator_id is not None:
        theirs = Annotation.objects.filter(assignment__item=OuterRef("pk"), assignment__annotator_id=annotator_id)
        items = items.annotate(their_label=Subquery(theirs.values("label")[:1])).filter(their_label__isnull=False)
    return items


def study_annotator(study: Study, pseudonym: str) -> StudyMember | None:
    """The study's member called `pseudonym` (as pages and exports name annotators), or None."""
    return StudyMember.objects.filter(study=study, pseudonym=pseudonym).first()


def item_annotations(item: Item) -> list[Annotation]:
    """An item's annotations, each with `pseudonym`, the name of who made it (for researchers only)."""
    names = pseudonyms(item.study)
    annotations = list(
        Annotation.objects.filter(assignment__item=item).select_related("assignment").order_by("assignment__slot")
    )
    for annotation in annotations:
        annotation.pseudonym = names[annotation.assignment.annotator_id]
    return annotations


def recent_imports(study: Study, limit: int = 10) -> QuerySet[ImportJob]:
    return ImportJob.objects.filter(study=study).select_related("created_by")[:limit]


def recent_exports(study: Study, limit: int = 5) -> QuerySet[ExportJob]:
    return ExportJob.objects.filter(study=study).select_related("created_by")[:limit]


def export_inline_limit() -> int:
    """Annotations up to which an export streams from the request; more go to a background task."""
    return settings.EXPORT_INLINE_MAX_ROWS


def annotation_count(study: Study) -> int:
    """The study's answers, from the counter rows (services/counters.py): constant time whatever its size."""
    return AnnotatorCount.objects.filter(study=study).aggregate(n=Coalesce(Sum("annotations"), 0))["n"]


def item_totals(study: Study) -> tuple[int, int]:
    """(items, items with a gold label) of the study, from the counter rows: constant time whatever its size."""
    totals = DomainCount.objects.filter(study=study).aggregate(
        n=Coalesce(Sum("items"), 0), gold=Coalesce(Sum("gold"), 0)
    )
    return totals["n"], totals["gold"]


def export_runs_in_background(study: Study) -> bool:
    """True when the study has too many annotations to export inside a request (docs/architecture.md, Mechanisms)."""
    return annotation_count(study) > export_inline_limit()


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

    Columns are EXPORT_COLUMNS; annotators appear by pseudonym only. `adjudicated_label`
    repeats the item's adjudicated label on each of its rows: empty when nobody adjudicated
    it, and empty too when its adjudicators disagree (selectors.adjudication.adjudicated_labels).
    Crowd participants who withdrew are left out (their consent is gone); screened-out ones
    stay, for the researcher to judge.
    """
    # Imported here: selectors.adjudication reads this module's pseudonyms().
    from .adjudication import adjudicated_labels

    names = pseudonyms(study)
    systems = list(study.systems)
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
        }
