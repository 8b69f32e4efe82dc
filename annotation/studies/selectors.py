"""Every read of the annotation app that is more than `obj.field`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db.models import F, OuterRef, Q, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce

from annotation.access import Researcher, studies_for
from annotation.lib.counted import Counted
from annotation.lib.pseudonyms import pseudonyms
from annotation.models import Annotation, AnnotatorCount, DomainCount, Item, Study, StudyMember
from annotation.progress.selectors import labels_not_needed


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

    Every count comes from the counter rows (progress/counters.py), never from the items
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
                expected=study.n_items * study.slots_per_item - labels_not_needed(study),
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


def study_items(
    study: Study,
    *,
    domain: str | None = None,
    query: str | None = None,
    annotator_id: int | None = None,
    has_gold: bool | None = None,
) -> QuerySet[Item]:
    """A study's items in import order, optionally by domain, text, annotator, or whether they have gold
    (`has_gold`: the items a participant link can use as checks, or those without).

    With `annotator_id`, only the items that annotator labelled, each with
    `their_label` (the researcher checking a flagged annotator's answers).
    """
    # The item's answers as its counter keeps them (progress/counters.py): no join over the labels.
    items = Item.objects.filter(study=study).annotate(n_annotations=F("n_answers")).order_by("position", "pk")
    if domain is not None:
        items = items.filter(domain=domain)
    if query:
        items = items.filter(Q(external_id__icontains=query) | Q(summary__icontains=query))
    if has_gold is not None:
        items = items.exclude(gold_label="") if has_gold else items.filter(gold_label="")
    if annotator_id is not None:
        theirs = Annotation.objects.filter(assignment__item=OuterRef("pk"), assignment__annotator_id=annotator_id)
        items = items.annotate(their_label=Subquery(theirs.values("label")[:1])).filter(their_label__isnull=False)
    return items


def paged_study_items(
    study: Study,
    *,
    domain: str | None = None,
    query: str | None = None,
    annotator_id: int | None = None,
    has_gold: bool | None = None,
) -> QuerySet[Item] | Counted:
    """`study_items` to page: filtered by domain and gold only, its count comes from the counter rows.

    (A text or annotator filter is counted from the items: it reads them by nature.)
    """
    items = study_items(study, domain=domain, query=query, annotator_id=annotator_id, has_gold=has_gold)
    if query or annotator_id is not None:
        return items
    return Counted(items, study_item_count(study, domain=domain, has_gold=has_gold))


def study_item_count(study: Study, *, domain: str | None = None, has_gold: bool | None = None) -> int:
    """How many items the study has (in `domain`; with or without gold), from its DomainCount rows."""
    rows = DomainCount.objects.filter(study=study)
    if domain is not None:
        rows = rows.filter(domain=domain)
    totals = rows.aggregate(items=Coalesce(Sum("items"), 0), gold=Coalesce(Sum("gold"), 0))
    if has_gold is None:
        return totals["items"]
    return totals["gold"] if has_gold else totals["items"] - totals["gold"]


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
