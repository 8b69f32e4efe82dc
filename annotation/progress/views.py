"""HTML pages: parse input, call access + service/selector, render."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from annotation.access import Researcher, access_study
from annotation.http import AuthenticatedHttpRequest
from annotation.lib.analysis_rules import left_out_of_analysis
from annotation.models import Study
from annotation.progress import cache as progress_cache
from annotation.progress import selectors as progress_selectors

# --- researcher: progress and quality control ------------------------------------


def _progress_live_context(study: Study, *, compute: bool) -> dict:
    """The parts of the progress page that change while a study runs (refreshed by static/js/progress.js).

    The annotator table and throughput come from the cache (progress/cache.py): read from the
    counters only when `compute` (the live fragment, or the page asked with ?quality=now) and the
    kept table is missing or too old; the page alone never reads them.
    """
    counts = progress_selectors.study_counts(study)
    flags, flag_total = progress_selectors.flagged(study)
    quality = (progress_cache.current_quality if compute else progress_cache.peek_quality)(study, counts=counts)
    left_out = left_out_of_analysis(study)
    return {
        "study": study,
        "counts": counts,
        "left_out": left_out,
        "in_report": counts["annotations"] - left_out["total"],
        "labels_left": max(0, counts["expected"] - counts["annotations"]),
        "quality": quality,
        "flags": flags,
        "flag_total": flag_total,
        "speeder_rule": progress_selectors.SPEEDER_RULE,
        "low_gold_rule": progress_selectors.LOW_GOLD_RULE,
        "median_error": progress_selectors.SKETCH_ERROR_TEXT,
        "abstain_label": "both bad" if study.is_preference else "inconclusive",
        "refreshed_at": timezone.now(),
    }


class CountedPaginator(Paginator):
    """A paginator told how many rows there are (the counter rows, or `progress.items_in_state` for a
    filter) instead of counting its rows: COUNT(*) over a study's items grows with the study (issue 15)."""

    def __init__(self, object_list: Any, per_page: int, *, count: int) -> None:
        super().__init__(object_list, per_page)
        self.known_count = count

    @cached_property
    def count(self) -> int:
        return self.known_count


@login_required
@require_GET
def study_progress(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """The progress page: live counts, the annotator table as last computed (loaded by progress.js
    when there is none or it is outdated; without JavaScript, ?quality=now computes it), and a page of items."""
    study = access_study(request.user, slug, role=Researcher)
    state = request.GET.get("state", "")
    state = state if state in progress_selectors.ITEM_STATES else ""
    live = _progress_live_context(study, compute=request.GET.get("quality") == "now")
    counts = live["counts"]
    count = (
        progress_selectors.items_in_state(study, state, complete=counts["items_complete"]) if state else counts["items"]
    )
    items = progress_selectors.items_with_slots(study, state, matching=count)
    paginator = CountedPaginator(items if count else items.none(), 50, count=count)
    page = paginator.get_page(request.GET.get("page"))
    context = {
        **live,
        "page": page,
        "slots": progress_selectors.item_slot_status(study, page.object_list),
        "state": state,
        "state_label": progress_selectors.ITEM_STATES[state],
        "states": progress_selectors.ITEM_STATES,
        "refresh_seconds": PROGRESS_REFRESH_SECONDS,
    }
    return render(request, "annotation/study_progress.html", context)


#: How often the open progress page asks for fresh numbers (only while its tab is visible).
PROGRESS_REFRESH_SECONDS = 10


@login_required
@require_GET
def study_progress_live(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """The changing part of the progress page as an HTML fragment, for static/js/progress.js to swap in."""
    study = access_study(request.user, slug, role=Researcher)
    response = render(request, "annotation/_progress_live.html", _progress_live_context(study, compute=True))
    response["Cache-Control"] = "no-store"
    return response
