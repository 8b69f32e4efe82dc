"""The annotator's pages (form POSTs, no JavaScript) and the researcher's progress page."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotation.members.services import add_members
from annotation.models import Annotation, AnnotationRevision, Assignment, Item, Study, StudyMember
from annotation.progress.counters import recount_study
from annotation.studies.services import create_study
from annotation.transfer.services.item_import import import_items
from annotation.workbench.services import claim_next
from tests.annotation.test_pages import assert_offline
from tests.conftest import jsonl, preference_item, verification_item

SYSTEMS = ["sysalpha", "sysbeta"]


def annotate_url(study: Study) -> str:
    return reverse("annotation:annotate", args=[study.slug])


def submit_url(study: Study, assignment: Assignment) -> str:
    return reverse("annotation:annotate_submit", args=[study.slug, assignment.pk])


def current(user, study: Study) -> Assignment:
    return Assignment.objects.select_related("item").get(study=study, annotator=user, status=Assignment.Status.ACTIVE)


def assert_csp_clean(html: str) -> None:
    """No inline script, handler or style: only <script src> and json_script data blocks."""
    for tag in re.findall(r"<script\b[^>]*>", html):
        assert "src=" in tag or 'type="application/json"' in tag, tag
    assert not re.search(r"<[^>]+\son[a-z]+\s*=", html), "inline event handler"
    assert not re.search(r"<[^>]+\sstyle\s*=", html), "inline style"
    assert_offline(html)


def text(html: str) -> str:
    """The page's visible text, tags dropped and blanks collapsed."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def cells(html: str, attribute: str, value: str) -> list[str]:
    """The text of each cell of the table row marked data-<attribute>="<value>"."""
    row = re.search(rf'<tr data-{attribute}="{re.escape(value)}"[^>]*>(.*?)</tr>', html, re.S)
    assert row, f"no row {attribute}={value}"
    return [
        " ".join(unescape(re.sub(r"<[^>]+>", " ", cell)).split())
        for cell in re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)
    ]


@pytest.fixture
def bob(make_user):
    return make_user("bob")


@pytest.fixture
def pref(db, researcher, annotator, bob) -> Study:
    study = create_study(
        slug="pw",
        name="Pairwise",
        kind="preference",
        annotators_per_item=2,
        systems=SYSTEMS,
        justification_required=True,
        instructions="# Compare\n\nPick the **better** list.",
    )
    add_members(study=study, usernames=[researcher.username], role="researcher")
    add_members(study=study, usernames=[annotator.username, bob.username], role="annotator")
    import_items(
        study=study,
        stream=jsonl(
            *(
                preference_item(
                    f"p-{n}",
                    source=f"Source text {n}.",
                    lists={SYSTEMS[0]: [f"alpha claim {n}"], SYSTEMS[1]: [f"beta claim {n}"]},
                )
                for n in range(1, 4)
            )
        ),
        fmt="jsonl",
    )
    return study


@pytest.fixture
def verif(db, researcher, annotator) -> Study:
    study = create_study(slug="vw", name="Verify", kind="verification", annotators_per_item=1, evidence_judgements=True)
    add_members(study=study, usernames=[researcher.username], role="researcher")
    add_members(study=study, usernames=[annotator.username], role="annotator")
    passages = [
        {"text": "First passage.", "title": "One", "url": "https://example.org/1", "source_type": "news"},
        {"text": "Second passage.", "title": "Two", "url": "https://example.org/2", "source_type": "wiki"},
    ]
    import_items(
        study=study, stream=jsonl(*(verification_item(f"c-{n}", evidence=passages) for n in (1, 2))), fmt="jsonl"
    )
    return study


def pref_answer(**overrides) -> dict:
    return {"choice": "left_strong", "justification": "List 1 is more atomic.", "active_ms": "1234", **overrides}


# --- the annotate page -----------------------------------------------------------


@pytest.mark.django_db
def test_preference_page_is_blinded_and_csp_clean(client, annotator, pref):
    client.force_login(annotator)
    response = client.get(annotate_url(pref))
    html = response.content.decode()
    assert response.status_code == 200
    assignment = current(annotator, pref)
    left = assignment.left_system
    n = assignment.item.external_id.split("-")[1]
    shown_first = f"alpha claim {n}" if left == SYSTEMS[0] else f"beta claim {n}"
    list_1 = re.search(r'id="wb-list-1">(.*?)</ol>', html, re.S).group(1)
    assert shown_first in list_1
    assert "List 1" in html and "List 2" in html
    for name in SYSTEMS:
        assert name not in html, f"system name {name} leaked"
    for label in (
        "List 1 much better",
        "List 1 slightly better",
        "About the same",
        "List 2 slightly better",
        "List 2 much better",
    ):
        assert label in html
    assert "Both bad" not in html  # not offered by this study
    assert "0 of 3 done" in text(html) and "<progress" in html
    assert 'name="csrfmiddlewaretoken"' in html and submit_url(pref, assignment) in html
    assert "<h3>Compare</h3>" in html  # instructions panel, rendered Markdown, below the page's headings
    assert html.count("<h1") == 1, "the annotate page has exactly one h1"
    # the workbench's settings ride in the item's own markup (a JSON script, never executed), so an
    # item fetched ahead carries its own
    assert '<script type="application/json">{"study": "' in html
    assert_csp_clean(html)


@pytest.mark.django_db
def test_submit_stores_system_space_and_shows_next_item(client, annotator, pref):
    client.force_login(annotator)
    client.get(annotate_url(pref))
    first = current(annotator, pref)
    response = client.post(submit_url(pref, first), pref_answer(choice="right_slight"))
    assert response.status_code == 302 and response["Location"] == annotate_url(pref)
    annotation = Annotation.objects.get(assignment=first)
    right = next(system for system in SYSTEMS if system != first.left_system)
    assert annotation.preferred_system == right and annotation.strength == "slight"
    assert annotation.choice == "right_slight" and annotation.raw_label == "right_slight"
    assert annotation.label == ("a_slight" if right == SYSTEMS[0] else "b_slight")
    assert annotation.active_ms == 1234 and annotation.source == "web"
    html = client.get(annotate_url(pref)).content.decode()
    second = current(annotator, pref)
    assert second.pk != first.pk
    assert "1 of 3 done" in text(html) and "Saved." in html
    assert reverse("annotation:annotate_revise", args=[pref.slug, first.pk]) in html  # "back"


@pytest.mark.django_db
def test_double_submit_stores_one_annotation(client, annotator, pref):
    client.force_login(annotator)
    client.get(annotate_url(pref))
    assignment = current(annotator, pref)
    first = client.post(submit_url(pref, assignment), pref_answer())
    again = client.post(submit_url(pref, assignment), pref_answer(active_ms="1300"))
    assert first.status_code == again.status_code == 302
    assert Annotation.objects.filter(assignment__annotator=annotator).count() == 1
    assert not AnnotationRevision.objects.exists()


@pytest.mark.django_db
def test_missing_justification_is_refused_with_a_message(client, annotator, pref):
    client.force_login(annotator)
    client.get(annotate_url(pref))
    assignment = current(annotator, pref)
    response = client.post(submit_url(pref, assignment), pref_answer(choice="tie", justification="   "))
    html = response.content.decode()
    assert response.status_code == 400
    assert "Not saved yet" in html and "asks for a justification" in html
    assert re.search(r'value="tie"[^>]*checked', html), "the choice made is kept"
    assert not Annotation.objects.exists()
    assignment.refresh_from_db()
    assert assignment.status == Assignment.Status.ACTIVE


@pytest.mark.django_db
def test_choice_the_study_does_not_offer_is_refused(client, annotator, researcher):
    study = create_study(
        slug="nt",
        name="No tie",
        kind="preference",
        annotators_per_item=1,
        systems=SYSTEMS,
        tie_allowed=False,
        both_bad_allowed=True,
    )
    add_members(study=study, usernames=[annotator.username], role="annotator")
    import_items(
        study=study, stream=jsonl(preference_item("p-1", lists={SYSTEMS[0]: ["a"], SYSTEMS[1]: ["b"]})), fmt="jsonl"
    )
    client.force_login(annotator)
    html = client.get(annotate_url(study)).content.decode()
    assert "About the same" not in html and "Both bad" in html
    assignment = current(annotator, study)
    response = client.post(submit_url(study, assignment), {"choice": "tie"})
    assert response.status_code == 400 and not Annotation.objects.exists()
    response = client.post(submit_url(study, assignment), {"choice": "both_bad"})
    assert response.status_code == 302
    assert Annotation.objects.get().label == "both_bad"


@pytest.mark.django_db
def test_skip_gives_the_item_back(client, annotator, pref):
    client.force_login(annotator)
    client.get(annotate_url(pref))
    assignment = current(annotator, pref)
    response = client.post(reverse("annotation:annotate_skip", args=[pref.slug, assignment.pk]))
    assert response.status_code == 302
    assignment.refresh_from_db()
    assert assignment.status == Assignment.Status.SKIPPED and assignment.slot is None
    assert Item.objects.get(pk=assignment.item_id).slots_taken == 0
    html = client.get(annotate_url(pref)).content.decode()
    assert "will not be shown to you again" in html
    assert current(annotator, pref).item_id != assignment.item_id


@pytest.mark.django_db
def test_flag_with_reason_and_flag_and_skip(client, annotator, pref):
    client.force_login(annotator)
    client.get(annotate_url(pref))
    assignment = current(annotator, pref)
    flag_url = reverse("annotation:annotate_flag", args=[pref.slug, assignment.pk])
    response = client.post(flag_url, {"reason": "  "}, follow=True)
    assert "say why" in response.content.decode()
    assignment.refresh_from_db()
    assert not assignment.flagged
    client.post(flag_url, {"reason": "the source is cut off", "then": "stay"})
    assignment.refresh_from_db()
    assert assignment.flagged and assignment.flag_reason == "the source is cut off"
    assert assignment.status == Assignment.Status.ACTIVE
    client.post(flag_url, {"reason": "really broken", "then": "skip"})
    assignment.refresh_from_db()
    assert assignment.flagged and assignment.status == Assignment.Status.SKIPPED


@pytest.mark.django_db
def test_finish_page_when_nothing_is_left(client, annotator, verif):
    client.force_login(annotator)
    for _ in range(2):
        client.get(annotate_url(verif))
        assignment = current(annotator, verif)
        response = client.post(
            submit_url(verif, assignment),
            {
                "label": "supported",
                "evidence_0": "support",
                "evidence_1": "irrelevant",
                "useful_0": "on",
            },
        )
        assert response.status_code == 302
    response = client.get(annotate_url(verif))
    html = response.content.decode()
    assert response.status_code == 200 and 'id="wb-done"' in html
    assert "All done" in html and "you answered 2 items" in text(html)
    assert 'id="answer-form"' not in html


@pytest.mark.django_db
def test_verification_answer_with_evidence_judgements(client, annotator, verif):
    client.force_login(annotator)
    html = client.get(annotate_url(verif)).content.decode()
    assert 'rel="noopener noreferrer nofollow" target="_blank"' in html
    assert "#1" in html and "#2" in html and ">news<" in html
    assert "Supports" in html and "Does not support" in html and "Irrelevant" in html
    assignment = current(annotator, verif)
    incomplete = client.post(submit_url(verif, assignment), {"label": "supported", "evidence_0": "support"})
    assert incomplete.status_code == 400 and "Judge passage 2" in incomplete.content.decode()
    assert not Annotation.objects.exists()
    client.post(
        submit_url(verif, assignment),
        {
            "label": "contradicted",
            "evidence_0": "not_support",
            "evidence_1": "irrelevant",
            "useful_0": "on",
            "justification": "Passage 1 says otherwise.",
            "active_ms": "5000",
        },
    )
    annotation = Annotation.objects.get(assignment=assignment)
    assert annotation.label == "contradicted" and annotation.justification == "Passage 1 says otherwise."
    assert annotation.evidence_judgements == [
        {"index": 0, "judgement": "not_support", "useful": True},
        {"index": 1, "judgement": "irrelevant", "useful": False},
    ]


@pytest.mark.django_db
def test_broken_timer_value_does_not_cost_the_answer(client, annotator, verif):
    client.force_login(annotator)
    client.get(annotate_url(verif))
    assignment = current(annotator, verif)
    client.post(
        submit_url(verif, assignment),
        {
            "label": "supported",
            "evidence_0": "support",
            "evidence_1": "support",
            "active_ms": "-5e9",
        },
    )
    assert Annotation.objects.get(assignment=assignment).active_ms is None


@pytest.mark.django_db
def test_revise_shows_the_stored_answer_and_keeps_a_revision(client, annotator, pref):
    client.force_login(annotator)
    client.get(annotate_url(pref))
    first = current(annotator, pref)
    client.post(submit_url(pref, first), pref_answer(choice="left_slight", justification="Slightly better."))
    client.get(annotate_url(pref))
    second = current(annotator, pref)
    revise_url = reverse("annotation:annotate_revise", args=[pref.slug, first.pk])
    html = client.get(revise_url).content.decode()
    assert "changing your answer to an earlier item" in html
    assert re.search(r'value="left_slight"[^>]*checked', html)
    assert "Slightly better." in html
    assert 'id="wb-skip"' not in html  # an answered item cannot be skipped
    response = client.post(revise_url, pref_answer(choice="right_strong", justification="On reflection, list 2."))
    assert response.status_code == 302 and response["Location"] == annotate_url(pref)
    annotation = Annotation.objects.get(assignment=first)
    assert annotation.choice == "right_strong"
    revision = AnnotationRevision.objects.get(annotation=annotation)
    assert revision.old_value["choice"] == "left_slight" and revision.new_value["choice"] == "right_strong"
    assert current(annotator, pref).pk == second.pk  # back on the item they were at


@pytest.mark.django_db
def test_someone_elses_assignment_is_not_reachable(client, annotator, bob, pref):
    client.force_login(bob)
    client.get(annotate_url(pref))
    bobs = current(bob, pref)
    client.post(submit_url(pref, bobs), pref_answer())
    client.force_login(annotator)
    assert client.get(reverse("annotation:annotate_revise", args=[pref.slug, bobs.pk])).status_code == 404
    response = client.post(submit_url(pref, bobs), pref_answer(choice="tie"), follow=True)
    assert "no longer assigned to you" in response.content.decode()
    assert Annotation.objects.get(assignment=bobs).choice == "left_strong"


@pytest.mark.django_db
def test_lost_lease_is_reported_not_overwritten(client, annotator, bob, researcher):
    study = create_study(slug="one", name="One slot", kind="preference", annotators_per_item=1, systems=SYSTEMS)
    add_members(study=study, usernames=[annotator.username, bob.username], role="annotator")
    import_items(
        study=study, stream=jsonl(preference_item("p-1", lists={SYSTEMS[0]: ["a"], SYSTEMS[1]: ["b"]})), fmt="jsonl"
    )
    client.force_login(annotator)
    client.get(annotate_url(study))
    mine = current(annotator, study)
    Assignment.objects.filter(pk=mine.pk).update(lease_expires_at=timezone.now() - timedelta(minutes=1))
    assert claim_next(user=bob, study=study).item_id == mine.item_id  # bob takes the expired slot over
    response = client.post(submit_url(study, mine), {"choice": "left_strong"}, follow=True)
    html = response.content.decode()
    assert "Your answer was not saved" in html and "ran out" in html
    assert not Annotation.objects.exists()
    assert 'id="wb-done"' in html  # nothing left for anna: the only item is bob's now


@pytest.mark.django_db
def test_non_member_gets_404_everywhere(client, make_user, pref):
    outsider = make_user("olga")
    client.force_login(outsider)
    assert client.get(annotate_url(pref)).status_code == 404
    assert client.post(reverse("annotation:annotate_submit", args=[pref.slug, 1]), pref_answer()).status_code == 404
    assert client.get(reverse("annotation:annotate_revise", args=[pref.slug, 1])).status_code == 404
    assert client.post(reverse("annotation:annotate_skip", args=[pref.slug, 1])).status_code == 404
    assert client.post(reverse("annotation:annotate_flag", args=[pref.slug, 1]), {"reason": "x"}).status_code == 404
    assert client.get(reverse("annotation:study_progress", args=[pref.slug])).status_code == 404
    assert not Assignment.objects.exists()


@pytest.mark.django_db
def test_researcher_who_is_not_an_annotator_is_told_why(client, researcher, pref):
    client.force_login(researcher)
    response = client.get(annotate_url(pref))
    html = response.content.decode()
    assert response.status_code == 403
    assert "You cannot annotate in this study" in html and "researcher" in html
    assert "only the study&#x27;s annotators can annotate" in html
    assert not Assignment.objects.exists()


@pytest.mark.django_db
def test_closed_study_is_refused_on_the_annotate_page(client, annotator, pref):
    pref.status = Study.Status.CLOSED
    pref.save()
    client.force_login(annotator)
    response = client.get(annotate_url(pref))
    assert response.status_code == 403 and "not open for annotation" in response.content.decode()


@pytest.mark.django_db
def test_annotators_study_page_has_start_button_and_progress(client, annotator, pref):
    client.force_login(annotator)
    html = client.get(reverse("annotation:study_detail", args=[pref.slug])).content.decode()
    assert "Start annotating" in html and annotate_url(pref) in html and "0 of 3 done" in text(html)
    client.get(annotate_url(pref))
    client.post(submit_url(pref, current(annotator, pref)), pref_answer())
    html = client.get(reverse("annotation:study_detail", args=[pref.slug])).content.decode()
    assert "Continue annotating" in html and "1 of 3 done" in text(html)


@pytest.mark.django_db
def test_untrusted_item_text_is_escaped_on_the_annotate_page(client, annotator):
    payload = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">'
    study = create_study(slug="xss", name="XSS", kind="verification", annotators_per_item=1, evidence_judgements=True)
    add_members(study=study, usernames=[annotator.username], role="annotator")
    Item.objects.create(  # straight into the table: the importer's URL check is not what is tested here
        study=study,
        external_id="xss",
        payload={
            "claim": payload,
            "context": payload,
            "evidence": [
                {"text": payload, "title": payload, "url": "javascript:window.__pwned=1", "source_type": payload}
            ],
        },
    )
    client.force_login(annotator)
    html = client.get(annotate_url(study)).content.decode()
    assert "<script>window.__pwned" not in html and "<img src=x" not in html
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html
    assert 'href="javascript:' not in html
    assert_csp_clean(html)


# --- query counts stay flat as the study grows --------------------------------------


def _grow(study: Study, n: int, start: int = 100) -> None:
    import_items(
        study=study,
        stream=jsonl(
            *(preference_item(f"g-{i}", lists={SYSTEMS[0]: ["a"], SYSTEMS[1]: ["b"]}) for i in range(start, start + n))
        ),
        fmt="jsonl",
    )


def _count(fn) -> int:
    with CaptureQueriesContext(connection) as queries:
        fn()
    return len(queries)


@pytest.mark.django_db
def test_annotate_and_submit_queries_do_not_grow_with_the_study(client, annotator, pref):
    client.force_login(annotator)

    def round_trip() -> tuple[int, int]:
        page = _count(lambda: client.get(annotate_url(pref)))
        assignment = current(annotator, pref)
        post = _count(lambda: client.post(submit_url(pref, assignment), pref_answer()))
        return page, post

    round_trip()  # warm up (session, content types)
    small = round_trip()
    _grow(pref, 150)
    large = round_trip()
    assert large == small, (small, large)


# --- researcher progress page ---------------------------------------------------------


@pytest.fixture
def qc_study(db, researcher, annotator, bob, make_user) -> Study:
    """Hand-made: anna answered 3 items (1 of 2 gold right), bob 2 (2 of 2 right) and skipped 1."""
    study = create_study(slug="qc", name="QC", kind="verification", annotators_per_item=2)
    add_members(study=study, usernames=[researcher.username], role="researcher")
    add_members(study=study, usernames=[annotator.username, bob.username, make_user("carl").username], role="annotator")
    import_items(
        study=study,
        stream=jsonl(
            verification_item("c-1", gold="supported"),
            verification_item("c-2", gold="contradicted"),
            verification_item("c-3"),
            verification_item("c-4"),
        ),
        fmt="jsonl",
    )
    items = {item.external_id: item for item in Item.objects.filter(study=study)}
    now = timezone.now()

    def slot(item, user, number, status="submitted", label="", active_ms=None, flag=""):
        assignment = Assignment.objects.create(
            study=study,
            item=items[item],
            annotator=user,
            slot=number,
            max_slots=2,
            status=status,
            lease_expires_at=now + timedelta(minutes=20) if status == "active" else None,
            submitted_at=now if status == "submitted" else None,
            flagged=bool(flag),
            flag_reason=flag,
        )
        if label:
            Annotation.objects.create(assignment=assignment, label=label, raw_label=label, active_ms=active_ms)

    slot("c-1", annotator, 0, label="supported", active_ms=1000)
    slot("c-2", annotator, 0, label="supported", active_ms=3000)
    slot("c-3", annotator, 0, label="inconclusive", active_ms=8000, flag="text is cut off")
    slot("c-4", annotator, 0, status="active")
    slot("c-1", bob, 1, label="supported", active_ms=2000)
    slot("c-2", bob, 1, label="contradicted", active_ms=5000)
    slot("c-3", bob, None, status="skipped", flag="<b>offensive</b>")
    carl = StudyMember.objects.get(study=study, user__username="carl").user
    lost = Assignment.objects.create(  # carl's lease on c-4 ran out and anna took the slot over
        study=study,
        item=items["c-4"],
        annotator=carl,
        slot=None,
        max_slots=2,
        status="skipped",
        lease_expires_at=now - timedelta(minutes=5),
    )
    assert lost.pk
    Item.objects.filter(study=study, external_id__in=["c-1", "c-2"]).update(slots_taken=2)
    Item.objects.filter(study=study, external_id__in=["c-3", "c-4"]).update(slots_taken=1)
    recount_study(study)  # the rows above were written directly: set the counters the services would have kept
    return study


@pytest.mark.django_db
def test_progress_page_numbers(client, researcher, annotator, bob, qc_study):
    names = dict(StudyMember.objects.filter(study=qc_study).values_list("user__username", "pseudonym"))
    client.force_login(researcher)
    response = client.get(reverse("annotation:study_progress", args=[qc_study.slug]), {"quality": "now"})
    html = response.content.decode()
    assert response.status_code == 200
    # annotator, done, skipped, timed out, open now, flagged, median active time, gold accuracy,
    # share inconclusive, alerts
    assert cells(html, "annotator", names["anna"]) == [
        names["anna"],
        "3",
        "0",
        "0",
        "1",
        "1",
        "3.0 s",
        "1 / 2 (50%)",
        "1 (33%)",
        "—",
    ]
    assert cells(html, "annotator", names["bob"]) == [
        names["bob"],
        "2",
        "1",
        "0",
        "0",
        "1",
        "3.5 s",
        "2 / 2 (100%)",
        "0 (0%)",
        "—",
    ]
    assert cells(html, "annotator", names["carl"]) == [names["carl"], "0", "0", "1", "0", "0", "—", "—", "—", "—"]
    # item, domain, slots taken, submitted, skipped, timed out, flags, active leases
    assert cells(html, "item", "c-1")[2:7] == ["2 / 2", "2", "", "", ""]
    assert cells(html, "item", "c-3")[2:7] == ["1 / 2", "1", "1", "", "2"]
    lease = cells(html, "item", "c-4")
    assert lease[2:6] == ["1 / 2", "0", "", "1"] and lease[7].startswith(f"{names['anna']} · expires in")
    assert "text is cut off" in html and "&lt;b&gt;offensive&lt;/b&gt;" in html
    assert "<b>offensive" not in html
    assert_csp_clean(html)
    url = reverse("annotation:study_progress", args=[qc_study.slug])
    shown = {
        state: re.findall(r'<tr data-item="([^"]+)"', client.get(f"{url}?state={state}").content.decode())
        for state in ("open", "complete", "untouched", "flagged", "bogus")
    }
    assert shown == {
        "open": ["c-3", "c-4"],
        "complete": ["c-1", "c-2"],
        "untouched": [],
        "flagged": ["c-3"],
        "bogus": ["c-1", "c-2", "c-3", "c-4"],
    }
    overview = client.get(reverse("annotation:study_detail", args=[qc_study.slug])).content.decode()
    assert reverse("annotation:study_progress", args=[qc_study.slug]) in overview


@pytest.mark.django_db
def test_progress_page_is_for_researchers(client, annotator, qc_study):
    client.force_login(annotator)
    assert client.get(reverse("annotation:study_progress", args=[qc_study.slug])).status_code == 403


@pytest.mark.django_db
def test_progress_page_queries_do_not_grow_with_the_study(client, researcher, qc_study, make_user):
    """The page and its live fragment, with the annotator table shown, issue as many queries at 168 labels
    as at 8 (computing the table too); and the page reads no label beyond the fingerprint's one row."""
    client.force_login(researcher)
    page = reverse("annotation:study_progress", args=[qc_study.slug])
    live = reverse("annotation:study_progress_live", args=[qc_study.slug])
    client.get(page)  # warm-up (session, content types)

    def measure() -> tuple[int, int, int]:
        cache.clear()  # as for a study whose table is not kept yet
        computing = _count(lambda: client.get(live))
        return computing, _count(lambda: client.get(live)), _count(lambda: client.get(page))

    small = measure()
    import_items(
        study=qc_study, stream=jsonl(*(verification_item(f"n-{i}", gold="supported") for i in range(80))), fmt="jsonl"
    )
    workers = [make_user(f"worker{i}") for i in range(6)]
    add_members(study=qc_study, usernames=[worker.username for worker in workers], role="annotator")
    for item in Item.objects.filter(study=qc_study, external_id__startswith="n-"):
        for number, worker in enumerate(workers[:2]):
            assignment = Assignment.objects.create(
                study=qc_study,
                item=item,
                annotator=worker,
                slot=number,
                max_slots=2,
                status="submitted",
                submitted_at=timezone.now(),
                flagged=number == 1,
                flag_reason="x" if number else "",
            )
            Annotation.objects.create(assignment=assignment, label="supported", active_ms=100 * number + 50)
    recount_study(qc_study)
    large = measure()
    assert large == small, (small, large)
    with CaptureQueriesContext(connection) as queries:
        html = client.get(page).content.decode()
    worker = StudyMember.objects.get(study=qc_study, user=workers[1]).pseudonym
    assert cells(html, "annotator", worker)[1:6] == ["80", "0", "0", "0", "80"]  # done and flagged: live
    label_reads = [query["sql"] for query in queries.captured_queries if 'FROM "annotation_annotation"' in query["sql"]]
    assert label_reads and all("LIMIT 1" in sql for sql in label_reads), label_reads
    second = client.get(page + "?page=2").content.decode()  # 84 items, counted by the counter rows
    assert len(re.findall(r"<tr data-item=", second)) == 34 and "Page 2 of 2" in second


@pytest.mark.django_db
def test_question_already_labelled_is_not_labelled_twice(client, researcher, annotator, pref):
    """A question stored as "Question: ..." shows once, under the page's own label, on both pages."""
    for item in Item.objects.filter(study=pref):
        item.payload = {**item.payload, "question": "Question: Who was Ada Lovelace?"}
        item.save(update_fields=["payload"])
    client.force_login(annotator)
    page = text(client.get(annotate_url(pref)).content.decode())
    assert "Who was Ada Lovelace?" in page and "Question: Who" not in page
    client.force_login(researcher)
    detail = text(client.get(reverse("annotation:item_detail", args=[pref.slug, "p-1"])).content.decode())
    assert "Question Who was Ada Lovelace?" in detail and "Question: Who" not in detail
