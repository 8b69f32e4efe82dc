"""What a study's labels look like now, in constant time: the key of anything computed from every label.

Why: aggregates over every label (the report, the overview's precision card, the progress
page's annotator table) cost seconds at 100,000 items, while whether anything they read has
changed can be told from a few index reads. `metaeval.selectors.report_fingerprint` adds
what only the reports read (participants, adjudications, verifiers) to `label_state`.
"""

from __future__ import annotations

from django.db.models import QuerySet

from annotation.models import Annotation, Assignment, Item, Study
from annotation.progress.selectors import annotation_count, item_totals


def latest_change(rows: QuerySet) -> object:
    """The newest `updated_at` of the rows: ORDER BY ... LIMIT 1 walks the (study, updated_at) index
    from its end on both databases, where MAX() with a second condition would scan the study."""
    return rows.order_by("-updated_at").values_list("updated_at", flat=True).first()


def label_state(study: Study) -> tuple[object, object, object]:
    """(annotations, answered assignments, items) of the study, each as a value that changes with them.

    Five queries whatever the study's size. How many answers and items come from the maintained
    counters (progress/counters.py, exact after every write, in its transaction); the latest
    change from one step down a (study, updated_at) index. Counts catch deletions; any insert or
    edit moves the latest `updated_at` (every write path sets it). Answered assignments are
    never active (an answer ends the assignment; nothing makes one active again), so a claim
    or a lease renewal does not move it, while a submit, a skip and a lease taken over do.
    """
    annotations = (annotation_count(study), latest_change(Annotation.objects.filter(study=study)))
    answered = latest_change(Assignment.objects.filter(study=study).exclude(status=Assignment.Status.ACTIVE))
    items = (item_totals(study), latest_change(Item.objects.filter(study=study)))
    return annotations, answered, items
