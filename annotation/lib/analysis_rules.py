"""Which labels analysis counts: the rules the report applies (metaeval.study_frame) that the
annotation pages need too, written once here, in the shared foundation every feature may read.

Why here: the report reads every label and applies these rules as selections of its frame; the
progress page cannot afford that read at every refresh (it must not grow with the study), so it
counts what the same rules leave out from the counter rows and the few check items instead
(`left_out_of_analysis`), and a test holds the two to the same number (issue 29: every number on
one rule).
"""

from __future__ import annotations

from django.db.models import Sum

from annotation.models import Annotation, AnnotatorCount, Assignment, Item, Participant, Study

#: Participants whose labels stay out of analysis by default: screened out, or withdrawn.
EXCLUDED_STATUSES = (Participant.Status.SCREENED_OUT, Participant.Status.WITHDRAWN)


def excluded_annotator_ids(study: Study, *, include_screened_out: bool = False) -> list[int]:
    """User ids of the study's participants whose labels analysis leaves out (the withdrawn always)."""
    statuses = (Participant.Status.WITHDRAWN,) if include_screened_out else EXCLUDED_STATUSES
    return list(Participant.objects.filter(study=study, status__in=statuses).values_list("member__user_id", flat=True))


def left_out_of_analysis(study: Study) -> dict[str, int]:
    """How many of the study's labels the report leaves out by its default rules, and why:
    {"participants": by crowd participants who withdrew or were screened out, "checks": on items
    used as checks (unless `Study.checks_in_agreement`) by anyone else, "total"}.

    At most four small queries: the participants, their counter rows, the check items, and the
    answers on those few items; none reads every label.
    """
    excluded = excluded_annotator_ids(study)
    by_participants = 0
    if excluded:
        by_participants = (
            AnnotatorCount.objects.filter(study=study, user_id__in=excluded).aggregate(n=Sum("annotations"))["n"] or 0
        )
    on_checks = 0
    if not study.checks_in_agreement:
        checks = list(Item.objects.filter(study=study, is_check=True).values_list("pk", flat=True))
        if checks:
            on_checks = (
                Annotation.objects.filter(study=study, assignment__item_id__in=checks)
                .exclude(assignment__status=Assignment.Status.SKIPPED)
                .exclude(assignment__annotator_id__in=excluded)
                .count()
            )
    return {"participants": by_participants, "checks": on_checks, "total": by_participants + on_checks}
