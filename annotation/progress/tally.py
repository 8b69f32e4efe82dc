"""The study counts two ways: from the counter rows the pages read, and from the rows themselves.

`manage.py recount_study` compares the two to say whether a study's counters had drifted.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Q, Sum

from annotation.models import Annotation, AnnotatorCount, Assignment, DomainCount, Item, Study


@dataclass(frozen=True)
class Tally:
    """What the pages show of one study: per domain (items, gold, annotations), per annotator, items complete,
    and the answers on each item that has any (item id -> answers)."""

    domains: dict[str, tuple[int, int, int]]
    annotators: dict[int, int]
    complete: int
    answers: dict[int, int]


def counted(study: Study) -> Tally:
    """The study's counts as its counter rows hold them."""
    items = {row.domain: (row.items, row.gold) for row in DomainCount.objects.filter(study=study) if row.items}
    labels = dict(
        AnnotatorCount.objects.filter(study=study)
        .values("domain")
        .annotate(n=Sum("annotations"))
        .order_by()
        .values_list("domain", "n")
    )
    annotators = dict(
        AnnotatorCount.objects.filter(study=study)
        .values("user")
        .annotate(n=Sum("annotations"))
        .filter(n__gt=0)
        .order_by()
        .values_list("user", "n")
    )
    complete = AnnotatorCount.objects.filter(study=study).aggregate(n=Sum("complete"))["n"] or 0
    answers = dict(Item.objects.filter(study=study, n_answers__gt=0).values_list("pk", "n_answers"))
    return _tally(items, labels, annotators, complete, answers)


def counted_from_rows(study: Study) -> Tally:
    """The study's counts from its items and annotations (slow on a big study: for checks, not pages)."""
    items = {
        row["domain"]: (row["items"], row["gold"])
        for row in Item.objects.filter(study=study)
        .values("domain")
        .annotate(items=Count("pk"), gold=Count("pk", filter=~Q(gold_label="")))
        .order_by()
    }
    answers = Annotation.objects.filter(assignment__study=study)
    labels = dict(
        answers.values("assignment__item__domain")
        .annotate(n=Count("pk"))
        .order_by()
        .values_list("assignment__item__domain", "n")
    )
    annotators = dict(
        answers.values("assignment__annotator")
        .annotate(n=Count("pk"))
        .order_by()
        .values_list("assignment__annotator", "n")
    )
    complete = (
        Assignment.objects.filter(study=study, annotation__isnull=False)
        .values("item")
        .annotate(n=Count("pk"))
        .filter(n__gte=study.slots_per_item)
        .order_by()
        .count()
    ) + Item.objects.filter(study=study, closed_after__isnull=False).count()  # adaptive overlap: closed below N
    per_item = dict(
        answers.values("assignment__item").annotate(n=Count("pk")).order_by().values_list("assignment__item", "n")
    )
    return _tally(items, labels, annotators, complete, per_item)


def _tally(
    items: dict[str, tuple[int, int]],
    labels: dict[str, int],
    annotators: dict[int, int],
    complete: int,
    answers: dict[int, int],
) -> Tally:
    domains = {domain: (n, gold, labels.get(domain, 0)) for domain, (n, gold) in items.items()}
    for domain, n in labels.items():  # labels on a domain without items: only a drifted counter shows this
        if n and domain not in domains:
            domains[domain] = (0, 0, n)
    return Tally(domains=domains, annotators=annotators, complete=complete, answers=answers)
