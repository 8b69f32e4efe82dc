"""Watching a running study: throughput, ETA, quality alerts, the live fragment, answers per annotator."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from annotation.members.services import add_members
from annotation.models import Annotation, Assignment, Item, Study, StudyMember
from annotation.progress import cache as progress_cache
from annotation.progress import selectors as progress
from annotation.progress.counters import answer_added, recount_study
from annotation.progress.quality_counters import CountedAnswer
from annotation.studies.services import create_study
from annotation.transfer.services.item_import import import_items
from tests.annotation.workbench.test_workbench_pages import assert_csp_clean, cells
from tests.conftest import jsonl, verification_item


def _label(study: Study, item: Item, user, label: str, *, active_ms: int | None, ago: timedelta, source="web") -> None:
    taken = Assignment.objects.filter(item=item).count()
    assignment = Assignment.objects.create(
        study=study,
        item=item,
        annotator=user,
        slot=taken,
        max_slots=study.annotators_per_item,
        status="submitted",
        submitted_at=timezone.now() - ago,
    )
    annotation = Annotation.objects.create(
        assignment=assignment, label=label, raw_label=label, active_ms=active_ms, source=source
    )
    Annotation.objects.filter(pk=annotation.pk).update(created_at=timezone.now() - ago)  # auto_now_add otherwise
    Item.objects.filter(pk=item.pk).update(slots_taken=taken + 1)
    answer_added(
        study_id=study.pk,
        item_id=item.pk,
        user_id=user.pk,
        complete_at=study.slots_per_item,
        answer=CountedAnswer(label, active_ms, source),
    )  # as the submit service counts it


@pytest.fixture
def watched(db, researcher, make_user) -> Study:
    """20 items (the first 10 gold "supported"), 3 per item. Three annotators each label items 0-11:
    fast (0.5 s each, gold right), slow (6 s, gold right), wrong (5 s, gold wrong: says contradicted).
    Labels of the last hour: 6 (2 each); the rest were made 3 hours ago."""
    study = create_study(slug="watch", name="Watch", kind="verification", annotators_per_item=3)
    add_members(study=study, usernames=[researcher.username], role="researcher")
    users = {name: make_user(name) for name in ("fast", "slow", "wrong")}
    add_members(study=study, usernames=list(users), role="annotator")
    import_items(
        study=study,
        stream=jsonl(
            *(verification_item(f"c-{n:02d}", **({"gold": "supported"} if n < 10 else {})) for n in range(20))
        ),
        fmt="jsonl",
    )
    items = list(Item.objects.filter(study=study).order_by("position"))
    for n, item in enumerate(items[:12]):
        ago = timedelta(minutes=10) if n >= 10 else timedelta(hours=3, minutes=n)
        _label(study, item, users["fast"], "supported", active_ms=500, ago=ago)
        _label(study, item, users["slow"], "inconclusive" if n >= 10 else "supported", active_ms=6000, ago=ago)
        _label(study, item, users["wrong"], "contradicted", active_ms=5000, ago=ago)
    return study


def _names(study: Study) -> dict[str, str]:
    return dict(StudyMember.objects.filter(study=study).values_list("user__username", "pseudonym"))


@pytest.mark.django_db
def test_speeder_and_low_gold_alerts_follow_the_stated_rules(client, researcher, watched):
    names = _names(watched)
    client.force_login(researcher)
    html = client.get(reverse("annotation:study_progress", args=[watched.slug]), {"quality": "now"}).content.decode()
    fast, slow, wrong = (cells(html, "annotator", names[who]) for who in ("fast", "slow", "wrong"))
    # study median over 36 timed labels: 5 s; fast's 0.5 s is below a third of it, with 12 labels
    assert fast[-1] == "likely speeder: median 0.5 s per item, study median 5.0 s"
    assert slow[-1] == "—"
    assert wrong[-1] == "low gold accuracy: 0 of 10 (0%)"
    assert slow[-2] == "2 (17%)"  # inconclusive share: 2 of 12
    assert escape(progress.SPEEDER_RULE) in html and escape(progress.LOW_GOLD_RULE) in html
    link = reverse("annotation:item_list", args=[watched.slug]) + f"?annotator={names['wrong']}"
    assert f'href="{link}"' in html
    assert_csp_clean(html)


@pytest.mark.django_db
def test_too_few_labels_raise_no_alert(researcher, make_user):
    """Nine fast labels are not yet a habit, four wrong gold answers not yet a pattern."""
    row = progress.AnnotatorRow(user_id=1, pseudonym="a", timed=9, median_active_ms=100, gold_n=4, gold_correct=0)
    assert progress.quality_alerts(row, 5000) == []
    row.timed, row.gold_n = 10, 5
    assert len(progress.quality_alerts(row, 5000)) == 2
    assert progress.quality_alerts(row, None) == ["low gold accuracy: 0 of 5 (0%)"]


@pytest.mark.django_db
def test_throughput_and_eta(client, researcher, watched):
    now = timezone.now()
    rate = progress.throughput(watched, expected=60, collected_total=36, now=now)
    assert rate.last_hour == 6 and rate.collected == 36 and rate.remaining == 24
    # first label 3 h 09 min ago, the latest 10 min ago: 36 labels in 2 h 59 min
    assert rate.overall_per_hour == pytest.approx(36 / (179 / 60), rel=1e-3)
    assert rate.eta == timedelta(hours=4) and rate.eta_text == "about 4 h"
    client.force_login(researcher)
    html = client.get(reverse("annotation:study_progress", args=[watched.slug]), {"quality": "now"}).content.decode()
    assert re.search(r'data-field="last-hour">6<', html)
    assert re.search(r'data-field="eta">about 4 h<', html)
    assert "24 labels left" in html


@pytest.mark.django_db
def test_throughput_ignores_imported_labels_and_says_when_it_cannot_estimate(watched):
    Annotation.objects.filter(assignment__study=watched).update(source=Annotation.Source.IMPORT)
    recount_study(watched)  # the rows were changed directly: set the counters an import would have kept
    rate = progress.throughput(watched, expected=60, collected_total=36)
    assert rate.last_hour == 0 and rate.collected == 0 and rate.overall_per_hour is None
    assert rate.eta is None and rate.eta_text == "—" and rate.eta_note == "no estimate: no label in the last hour"
    done = progress.throughput(watched, expected=36, collected_total=36)
    assert done.eta_text == "complete" and done.eta_note == ""


@pytest.mark.django_db
def test_live_fragment_shows_new_labels_and_is_for_researchers(client, researcher, make_user, watched, monkeypatch):
    url = reverse("annotation:study_progress_live", args=[watched.slug])
    client.force_login(researcher)
    page = client.get(reverse("annotation:study_progress", args=[watched.slug])).content.decode()
    assert f'data-live-url="{url}"' in page and "js/progress.js" in page
    before = client.get(url)
    assert before.status_code == 200 and before["Cache-Control"] == "no-store"
    assert re.search(r'data-field="annotations">36<', before.content.decode())
    assert "<html" not in before.content.decode()  # a fragment, not a page
    item = Item.objects.get(study=watched, external_id="c-19")
    _label(
        watched,
        item,
        StudyMember.objects.get(study=watched, user__username="slow").user,
        "supported",
        active_ms=4000,
        ago=timedelta(seconds=5),
    )
    after = client.get(url).content.decode()
    # the label count is live; the throughput is the table's, computed again only once it is old enough
    assert re.search(r'data-field="annotations">37<', after) and re.search(r'data-field="last-hour">6<', after)
    assert 'data-state="recent"' in after
    later = timezone.now() + timedelta(seconds=progress_cache.QUALITY_REFRESH_SECONDS + 1)
    monkeypatch.setattr(progress_cache.timezone, "now", lambda: later)
    after = client.get(url).content.decode()
    assert re.search(r'data-field="last-hour">7<', after) and 'data-state="current"' in after
    annotator = StudyMember.objects.get(study=watched, user__username="fast").user
    client.force_login(annotator)
    assert client.get(url).status_code == 403
    client.force_login(make_user("outsider"))
    assert client.get(url).status_code == 404


@pytest.mark.django_db
def test_item_list_filtered_by_annotator_shows_their_labels(client, researcher, watched):
    names = _names(watched)
    client.force_login(researcher)
    url = reverse("annotation:item_list", args=[watched.slug])
    html = client.get(url, {"annotator": names["wrong"]}).content.decode()
    assert html.count('<td><a href="/studies/watch/items/') == 12
    assert f"Items labelled by {names['wrong']}" in html and "c-19" not in html
    assert html.count(">contradicted</td>") == 12
    assert html.count('class="error">contradicted') == 10  # against gold "supported"
    # the filter form, submitted as is (all domains, no text), keeps the annotator
    html = client.get(url, {"annotator": names["wrong"], "domain": "", "q": ""}).content.decode()
    assert html.count('<td><a href="/studies/watch/items/') == 12
    html = client.get(url, {"annotator": "nobody"}, follow=True).content.decode()
    assert "No annotator called &#x27;nobody&#x27; in this study" in html
    assert "c-19" in html  # every item instead


@pytest.mark.django_db
def test_live_fragment_queries_do_not_grow_with_the_study(client, researcher, make_user, watched):
    client.force_login(researcher)
    url = reverse("annotation:study_progress_live", args=[watched.slug])
    client.get(url)
    with CaptureQueriesContext(connection) as small:
        client.get(url)
    extra = make_user("extra")
    add_members(study=watched, usernames=[extra.username], role="annotator")
    for item in Item.objects.filter(study=watched, external_id__gte="c-12"):
        _label(watched, item, extra, "supported", active_ms=3000, ago=timedelta(minutes=5))
    with CaptureQueriesContext(connection) as large:
        client.get(url)
    assert len(large.captured_queries) == len(small.captured_queries)


@pytest.mark.django_db
def test_each_item_filter_counts_exactly_the_items_it_lists(client, researcher, watched, make_user):
    """The filters' counts (progress.items_in_state: through the items' answer and slot counts) against the rows
    they list: complete, in progress (one label, or a slot held), not started, and an item whose
    slot count says not started although it holds all its answers (a count kept elsewhere must not be trusted)."""
    items = list(Item.objects.filter(study=watched).order_by("position"))
    late = make_user("late")
    add_members(study=watched, usernames=["late"], role="annotator")
    _label(watched, items[12], late, "supported", active_ms=900, ago=timedelta(minutes=1))  # in progress
    Assignment.objects.create(
        study=watched,
        item=items[13],
        annotator=late,
        slot=0,
        max_slots=3,
        status="active",
        lease_expires_at=timezone.now() + timedelta(minutes=30),
    )
    Item.objects.filter(pk=items[13].pk).update(slots_taken=1)  # a slot held, nothing answered yet
    Item.objects.filter(pk=items[0].pk).update(slots_taken=0)  # complete, its slot count drifted
    client.force_login(researcher)
    url = reverse("annotation:study_progress", args=[watched.slug])
    expected = {
        "complete": [f"c-{n:02d}" for n in range(12)],
        "open": ["c-12", "c-13"],
        "untouched": [f"c-{n:02d}" for n in range(14, 20)],  # c-00 has its answers, whatever its slot count says
    }
    for state, shown in expected.items():
        assert (
            progress.items_in_state(watched, state) == len(shown) == progress.items_with_slots(watched, state).count()
        )
        listed = re.findall(r'<tr data-item="([^"]+)"', client.get(url, {"state": state}).content.decode())
        assert listed == shown, state


@pytest.mark.django_db
def test_a_filter_of_few_items_lists_them_in_the_same_order_through_its_own_index(watched):
    """Issue 35: few matching items are read through the state index and sorted (`FEW_MATCHING_ITEMS`);
    the order is the import order, ties by id, exactly as walking the (study, position) index gives."""
    items = list(Item.objects.filter(study=watched).order_by("pk"))
    for n, item in enumerate(items):  # import order unlike id order, with ties
        Item.objects.filter(pk=item.pk).update(position=(len(items) - n) // 2)
    for state in ("complete", "untouched"):
        n = progress.items_in_state(watched, state)
        walked = list(progress.items_with_slots(watched, state).values_list("pk", flat=True))
        sorted_few = progress.items_with_slots(watched, state, matching=n)
        assert n <= progress.FEW_MATCHING_ITEMS and "+ 0" in str(sorted_few.query)
        by_position = sorted(walked, key=lambda pk: (Item.objects.get(pk=pk).position, pk))
        assert list(sorted_few.values_list("pk", flat=True)) == walked == by_position, state
