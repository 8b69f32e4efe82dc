"""The progress page's kept annotator table (progress/cache.py): the same numbers as computed
directly, computed once per state of the labels and at most once per interval while they change, never by
the page itself, and only for the study's researchers."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from annotation.models import Item, Study, StudyMember
from annotation.progress import cache as progress_cache
from annotation.progress import selectors as progress
from annotation.progress.selectors import study_counts
from tests.annotation.progress.test_progress_watch import _label, watched  # noqa: F401  (watched: the fixture)


@pytest.fixture(autouse=True)
def no_kept_tables():
    """Each test starts without kept tables (the cache is the process's memory)."""
    cache.clear()


@pytest.fixture
def computations(monkeypatch) -> list[Study]:
    """The studies whose table was computed from every label, one entry a computation."""
    seen: list[Study] = []
    real = progress_cache.label_quality

    def counting(study: Study) -> progress.LabelQuality:
        seen.append(study)
        return real(study)

    monkeypatch.setattr(progress_cache, "label_quality", counting)
    return seen


def _served(study: Study, now, *, compute: bool = True) -> progress_cache.Quality | None:
    read = progress_cache.current_quality if compute else progress_cache.peek_quality
    return read(study, counts=study_counts(study), now=now)


def _direct(study: Study, now) -> tuple[list[progress.AnnotatorRow], progress.Throughput]:
    counts = study_counts(study)
    rate = progress.throughput(study, expected=counts["expected"], collected_total=counts["annotations"], now=now)
    return progress.annotator_quality(study), rate


def _add_label(study: Study, who: str, item: str, *, ago: timedelta) -> None:
    user = StudyMember.objects.get(study=study, user__username=who).user
    _label(study, Item.objects.get(study=study, external_id=item), user, "supported", active_ms=100, ago=ago)


@pytest.mark.django_db
def test_kept_table_holds_the_numbers_computed_directly(watched, computations):  # noqa: F811
    now = timezone.now()
    first = _served(watched, now)
    again = _served(watched, now + timedelta(seconds=5))
    assert first is not None and again is not None
    rows, rate = _direct(watched, now)
    assert first.annotators == rows and again.annotators == rows  # every column, alerts included
    assert first.throughput == rate and again.throughput == rate
    names = dict(StudyMember.objects.filter(study=watched).values_list("pseudonym", "user__username"))
    alerted = {names[row.pseudonym] for row in rows if row.alerts}
    assert alerted == {"fast", "wrong"}  # a speeder and a gold miss: the study median and gold columns are in
    assert len(computations) == 1 and again.current and again.computed_at == now


@pytest.mark.django_db
def test_new_labels_are_counted_in_once_the_interval_has_passed(watched, computations):  # noqa: F811
    start = timezone.now()
    _served(watched, start)
    _add_label(watched, "slow", "c-19", ago=timedelta(seconds=1))
    soon = _served(watched, start + timedelta(seconds=progress_cache.QUALITY_REFRESH_SECONDS - 1))
    assert soon is not None and soon.state == progress_cache.RECENT and soon.computed_at == start
    slow = StudyMember.objects.get(study=watched, user__username="slow").pseudonym
    row = next(row for row in soon.annotators if row.pseudonym == slow)
    assert row.done == 13 and row.labelled == 12  # done is live (counters); the label-read columns wait
    assert soon.throughput.last_hour == 6 and len(computations) == 1

    later = start + timedelta(seconds=progress_cache.QUALITY_REFRESH_SECONDS + 1)
    assert _served(watched, later, compute=False).outdated  # what the page shows meanwhile, dated
    fresh = _served(watched, later)
    assert fresh is not None and fresh.current and fresh.computed_at == later and len(computations) == 2
    rows, rate = _direct(watched, later)
    assert fresh.annotators == rows and fresh.throughput == rate
    row = next(row for row in fresh.annotators if row.pseudonym == slow)
    assert row.done == row.labelled == 13 and fresh.throughput.last_hour == 7


@pytest.mark.django_db
def test_an_unchanged_table_stays_current_while_its_last_hour_is_known(watched, computations):  # noqa: F811
    """Without new labels the table is not computed again, and its last hour follows the clock exactly:
    its labels all still in the hour, or all gone from it; when only some have left, it is computed again."""
    now = timezone.now()
    _add_label(watched, "fast", "c-19", ago=timedelta(minutes=50))
    first = _served(watched, now)
    assert first is not None and first.throughput.last_hour == 7  # six 10 min ago, one 50 min ago
    calm = _served(watched, now + timedelta(minutes=5))
    assert calm is not None and calm.current and calm.throughput.last_hour == 7 and len(computations) == 1
    partly = now + timedelta(minutes=20)  # the 50-minute label has left the hour, the six have not
    recomputed = _served(watched, partly)
    assert recomputed is not None and recomputed.throughput.last_hour == 6 and len(computations) == 2
    assert recomputed.throughput == _direct(watched, partly)[1]
    gone = now + timedelta(hours=2)  # every label has left the hour: 0, known without reading them
    idle = _served(watched, gone)
    assert idle is not None and idle.current and idle.throughput.last_hour == 0 and len(computations) == 2
    assert idle.throughput == _direct(watched, gone)[1]


@pytest.mark.django_db
def test_a_slow_table_is_computed_again_less_often():
    assert progress_cache.refresh_after({"took": 0.2}) == progress_cache.QUALITY_REFRESH_SECONDS
    assert progress_cache.refresh_after({"took": 6.0}) == 6.0 * progress_cache.QUALITY_REFRESH_COST_RATIO


@pytest.mark.django_db
def test_the_page_shows_the_kept_table_and_never_computes_it(client, researcher, watched, computations):  # noqa: F811
    client.force_login(researcher)
    page = reverse("annotation:study_progress", args=[watched.slug])
    html = client.get(page).content.decode()
    assert "data-quality-pending" in html and f'href="{page}?quality=now"' in html  # JS asks at once; no JS: a link
    assert 'id="annotator-table"' not in html and re.search(r'data-field="annotations">36<', html)
    assert computations == []
    html = client.get(reverse("annotation:study_progress_live", args=[watched.slug])).content.decode()
    assert 'data-state="current"' in html and len(computations) == 1
    html = client.get(page).content.decode()
    assert 'id="annotator-table"' in html and "data-quality-pending" not in html and len(computations) == 1
    _add_label(watched, "slow", "c-19", ago=timedelta(seconds=1))
    html = client.get(page, {"quality": "now"}).content.decode()  # recent: served as it is, with its time
    assert 'data-state="recent"' in html and re.search(r'data-field="annotations">37<', html)
    assert len(computations) == 1


@pytest.mark.django_db
def test_only_the_studys_researchers_get_the_table(client, watched, make_user, computations):  # noqa: F811
    page = reverse("annotation:study_progress", args=[watched.slug])
    live = reverse("annotation:study_progress_live", args=[watched.slug])
    for url in (page, f"{page}?quality=now", live):
        assert client.get(url).status_code == 302  # to the login page
    client.force_login(StudyMember.objects.get(study=watched, user__username="fast").user)
    assert [client.get(url).status_code for url in (page, f"{page}?quality=now", live)] == [403, 403, 403]
    client.force_login(make_user("outsider"))
    assert [client.get(url).status_code for url in (page, f"{page}?quality=now", live)] == [404, 404, 404]
    assert computations == []
    other = Study.objects.create(slug="other", name="Other", kind="verification", annotators_per_item=1)
    assert other.pk != watched.pk
    progress_cache.current_quality(watched, counts=study_counts(watched))
    assert progress_cache.peek_quality(other, counts=study_counts(other)) is None  # kept per study


@pytest.mark.django_db
def test_while_one_request_computes_the_table_the_others_serve_the_kept_one(watched, computations):  # noqa: F811
    """One computation at a time: the others get the kept table, outdated, or nothing yet, without computing."""
    start = timezone.now()
    claim = progress_cache._key(watched) + ":computing"
    cache.add(claim, True)  # another request is computing the first table
    assert _served(watched, start) is None and computations == []
    cache.delete(claim)
    assert _served(watched, start).current and len(computations) == 1

    _add_label(watched, "slow", "c-19", ago=timedelta(seconds=1))
    later = start + timedelta(seconds=progress_cache.QUALITY_REFRESH_SECONDS + 1)
    cache.add(claim, True)
    meanwhile = _served(watched, later)
    assert meanwhile is not None and meanwhile.outdated and meanwhile.computed_at == start
    assert len(computations) == 1
    cache.delete(claim)
    fresh = _served(watched, later)
    assert fresh is not None and fresh.current and fresh.computed_at == later and len(computations) == 2
    assert cache.get(claim) is None  # let go once computed


@pytest.mark.django_db
def test_a_failed_computation_lets_the_next_request_compute(watched, monkeypatch):  # noqa: F811
    def broken(study):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(progress_cache, "label_quality", broken)
    with pytest.raises(RuntimeError):
        _served(watched, timezone.now())
    monkeypatch.undo()
    assert _served(watched, timezone.now()).current
