"""The report cache (issue 15 §3): built once per data state, stale pages labelled, one refresh, exact downloads."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from annotation.adjudication.services import adjudicate, set_adjudication_settings, verdict_for
from annotation.members.services import add_members, ensure_annotator_identities
from annotation.models import Participant, StudyMember
from annotation.studies.services import create_study, update_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from metaeval import selectors
from metaeval.models import ReportRefresh, ReportSnapshot, ReportSnapshotPart
from metaeval.reporting import ReportOptions, build_report, cache, page_options
from metaeval.reporting.csv_format import report_csv
from metaeval.reporting.latex_format import report_tex
from metaeval.tasks import refresh_report
from metaeval.verifiers.services import create_verifier
from tests.conftest import jsonl, verification_item
from tests.support.streamed import streamed_body, streamed_json

TASK = "metaeval.tasks.refresh_report"
CURRENT = "from the study's data as it is now"
STALE = "Not the latest data."
PAGE_OPTIONS = page_options()


@pytest.fixture
def builds(monkeypatch):
    """Counts the report builds the cache makes."""
    calls: list[str] = []
    real = cache.build_report

    def counting(study, options=None, **kwargs):
        calls.append(study.slug)
        return real(study, options, **kwargs)

    monkeypatch.setattr(cache, "build_report", counting)
    return calls


@pytest.fixture
def owner(client, researcher, loaded_verification_study):
    client.force_login(researcher)
    return client


def page(client, slug: str = "verif", query: str = "") -> str:
    response = client.get(reverse("metaeval:report", args=[slug]) + query)
    assert response.status_code == 200
    return response.content.decode()


def change_label(study, item: str = "c-1", label: str = "contradicted") -> None:
    """w1 changes their label on an item (c-1 then has two different labels: one more disagreement)."""
    import_annotations(
        study=study, stream=jsonl({"item": item, "annotator": "w1", "label": label}), fmt="jsonl", update=True
    )


def run_queued_refresh() -> None:
    task = DBTaskResult.objects.get(task_path=TASK)
    refresh_report.call(*task.args_kwargs["args"])
    task.delete()


def test_second_view_serves_the_cached_report_without_rebuilding(owner, builds):
    first = page(owner)
    second = page(owner)
    assert builds == ["verif"]
    assert CURRENT in first and CURRENT in second
    assert "Disagreements (1 items)" in second
    assert ReportSnapshot.objects.filter(study__slug="verif").count() == 1
    assert not DBTaskResult.objects.filter(task_path=TASK).exists()


def test_new_label_shows_the_older_report_labelled_and_queues_one_refresh(owner, builds, loaded_verification_study):
    page(owner)
    change_label(loaded_verification_study)
    views = [page(owner) for _ in range(5)]
    for html in views:
        assert STALE in html and CURRENT not in html
        assert "Disagreements (1 items)" in html  # the older report, as it was computed
        assert 'src="/static/js/report_refresh.js"' in html
    assert builds == ["verif"]  # no view rebuilt it
    assert DBTaskResult.objects.filter(task_path=TASK).count() == 1

    run_queued_refresh()
    assert builds == ["verif", "verif"]
    html = page(owner)
    assert CURRENT in html and STALE not in html
    assert "Disagreements (2 items)" in html
    assert builds == ["verif", "verif"]
    assert not DBTaskResult.objects.filter(task_path=TASK).exists()


def test_refresh_is_queued_again_for_newer_data_or_after_the_retry_time(owner, loaded_verification_study, settings):
    page(owner)
    change_label(loaded_verification_study)
    page(owner)
    change_label(loaded_verification_study, item="c-3")
    page(owner)  # a newer state than the queued task was asked for: queue it
    assert DBTaskResult.objects.filter(task_path=TASK).count() == 2
    settings.REPORT_REFRESH_RETRY_SECONDS = 0  # the queued task counts as lost
    page(owner)
    assert DBTaskResult.objects.filter(task_path=TASK).count() == 3
    assert ReportRefresh.objects.count() == 1


def test_status_says_when_the_new_report_is_ready(owner, loaded_verification_study):
    status = reverse("metaeval:report_status", args=["verif"])
    page(owner)
    assert owner.get(status).json()["current"] is True
    change_label(loaded_verification_study)
    page(owner)
    answer = owner.get(status).json()
    assert answer == {"current": False, "computed_at": None, "whole": True, "first_sections": False}
    run_queued_refresh()
    assert owner.get(status).json()["current"] is True


def test_downloads_are_always_made_from_the_current_data(owner, builds, loaded_verification_study):
    page(owner)
    change_label(loaded_verification_study)
    assert STALE in page(owner)
    query = "?by_domain=true&binary=true"  # the page's own options: its links carry them
    body = streamed_body(owner.get(reverse("metaeval:report_download", args=["verif", "json"]) + query))
    report = json.loads(body)
    assert report["n_disagreements"] == 2
    fresh = build_report(loaded_verification_study, PAGE_OPTIONS)
    assert json.dumps(report) == json.dumps(fresh)  # the same report, key order included
    csv_body = owner.get(reverse("metaeval:report_download", args=["verif", "csv"]) + query).content.decode()
    assert csv_body == report_csv(json.loads(json.dumps(fresh)))
    # the download stored the current report: the page is current again without the task
    assert CURRENT in page(owner)
    assert len(builds) == 2


def test_a_cached_report_is_the_fresh_report(loaded_verification_study, builds):
    options = ReportOptions(binary=True)
    built = cache.current_report(loaded_verification_study, options)
    again = cache.current_report(loaded_verification_study, options)
    assert built.built_now and not again.built_now and len(builds) == 1
    fresh = json.loads(json.dumps(build_report(loaded_verification_study, options)))
    assert again.report == fresh and built.report == fresh
    assert list(again.report) == list(fresh)  # same key order: the JSON download is byte for byte the same


def test_page_links_carry_the_page_options(owner):
    html = page(owner, query="?reference=majority&page=1")
    link = reverse("metaeval:report_download", args=["verif", "json"])
    found = re.search(rf'href="{re.escape(link)}\?([^"]*)"', html)
    assert found is not None
    query = found.group(1).replace("&amp;", "&")
    assert "reference=majority" in query and "by_domain=true" in query and "binary=true" in query
    assert "page=" not in query


@pytest.fixture
def many_disagreements(researcher):
    """A study whose 230 items each have two different labels."""
    study = create_study(slug="many", name="Many", kind="verification", annotators_per_item=2)
    add_members(study=study, usernames=[researcher.username], role="researcher")
    import_items(study=study, stream=jsonl(*(verification_item(f"c-{n:03d}") for n in range(230))), fmt="jsonl")
    labels = [
        {"item": f"c-{n:03d}", "annotator": who, "label": label}
        for n in range(230)
        for who, label in (("w1", "supported"), ("w2", "contradicted"))
    ]
    import_annotations(study=study, stream=jsonl(*labels), fmt="jsonl")
    return study


def test_disagreements_paginate_keep_the_options_and_show_every_row(client, researcher, many_disagreements):
    client.force_login(researcher)
    seen: list[str] = []
    query = "?reference=majority"
    for number in (1, 2, 3):
        html = page(client, "many", f"{query}&page={number}")
        section = html[html.index('id="disagreements"') :]
        seen += re.findall(r'<a href="/studies/many/items/([^/"]+)/">', section)
        assert f"page {number} of 3" in section
        # one pager, in the disagreement list (it was once repeated in three other sections)
        assert html.count('aria-label="Pages of disagreements"') == 1 == section.count("Pages of disagreements")
        if number < 3:
            assert f'href="?reference=majority&amp;page={number + 1}#disagreements"' in section
        if number > 1:
            assert f'href="?reference=majority&amp;page={number - 1}#disagreements"' in section
    assert len(seen) == 230 and set(seen) == {f"c-{n:03d}" for n in range(230)}
    assert "items 201 to 230 are shown" in html
    assert "page 3 of 3" in page(client, "many", "?page=99")  # past the end: the last page
    assert "page 1 of 3" in page(client, "many", "?page=x")


def test_downloads_keep_every_row(client, researcher, many_disagreements):
    client.force_login(researcher)
    report = streamed_json(client.get(reverse("metaeval:report_download", args=["many", "json"])))
    assert len(report["disagreements"]) == 230
    document = client.get(reverse("metaeval:report_download", args=["many", "html"])).content.decode()
    assert all(f"<td>c-{n:03d}</td>" in document for n in range(230))


def test_long_lists_are_stored_in_chunks_and_pages_read_only_theirs(many_disagreements, monkeypatch):
    monkeypatch.setattr(cache, "CHUNK_ROWS", 100)
    built = cache.current_report(many_disagreements, PAGE_OPTIONS)
    stored = ReportSnapshot.objects.get(pk=built.snapshot_id)
    assert json.loads(stored.report)["disagreements"] == {cache.PARTS: "disagreements", "n": 230}
    assert sorted(stored.parts.filter(section="disagreements").values_list("chunk", flat=True)) == [0, 1, 2]
    served = cache.page_report(many_disagreements, PAGE_OPTIONS)
    assert served.current and served.rows["disagreements"][150:160] == built.report["disagreements"][150:160]
    assert cache.current_report(many_disagreements, PAGE_OPTIONS).report == built.report


@pytest.mark.parametrize("cached", [False, True])
def test_the_json_download_joins_the_stored_chunks_into_the_whole_report(
    client, researcher, many_disagreements, monkeypatch, cached
):
    """The rows are sent as stored (never decoded), across chunks and empty lists, with or without a snapshot,
    a few chunks per read (here 2 of the 3 chunks, then 1)."""
    monkeypatch.setattr(cache, "CHUNK_ROWS", 100)
    monkeypatch.setattr(cache, "STREAM_CHUNKS_PER_READ", 2)
    client.force_login(researcher)
    options = PAGE_OPTIONS
    if cached:
        cache.current_report(many_disagreements, options)
    query = "?by_domain=true&binary=true"
    body = streamed_body(client.get(reverse("metaeval:report_download", args=["many", "json"]) + query)).decode()
    fresh = json.loads(json.dumps(build_report(many_disagreements, options)))
    assert json.dumps(json.loads(body)) == json.dumps(fresh)
    assert len(fresh["disagreements"]) == 230 and len(fresh["scores"]["human"]["per_response"]) == 230
    assert body.startswith('{\n  "')  # indented, as before, around the long lists
    stored = ReportSnapshot.objects.get(study=many_disagreements)
    assert stored.parts.filter(section="disagreements").count() == 3


def test_a_download_whose_snapshot_is_replaced_mid_way_fails_instead_of_ending_short(many_disagreements, monkeypatch):
    """A snapshot pruned while its rows are sent (a newer one replaced it) must not give a short file that parses."""
    monkeypatch.setattr(cache, "CHUNK_ROWS", 100)
    monkeypatch.setattr(cache, "STREAM_CHUNKS_PER_READ", 1)
    pieces = cache.report_json_pieces(many_disagreements, PAGE_OPTIONS)
    sent = [next(pieces), next(pieces), next(pieces)]  # up to the disagreements' first chunk
    assert sent[1] == "[" and sent[2].startswith("{")
    ReportSnapshot.objects.filter(study=many_disagreements).delete()
    with pytest.raises(cache.ReportReplaced, match="download it again"):
        list(pieces)


def test_the_cli_writes_no_file_when_the_download_fails_mid_way(many_disagreements, monkeypatch, tmp_path):
    def failing(study, options):
        yield '{"n_items": '
        raise cache.ReportReplaced("the report of disagreements was replaced while it was sent; download it again")

    monkeypatch.setattr(cache, "report_json_pieces", failing)
    target = tmp_path / "report.json"
    with pytest.raises(CommandError, match="replaced while it was sent; download it again"):
        call_command("report", "many", "--output", str(target))
    assert list(tmp_path.iterdir()) == []  # neither the file nor its .partial


def test_another_researchers_study_is_refused(client, make_user, loaded_verification_study):
    make_user("olga")
    other = create_study(slug="other", name="Other", kind="verification")
    add_members(study=other, usernames=["olga"], role="researcher")
    client.force_login(StudyMember.objects.get(study=other).user)
    for name, kwargs in (
        ("metaeval:report", {}),
        ("metaeval:report_status", {}),
        ("metaeval:report_download", {"fmt": "json"}),
        ("metaeval:report_table_tex", {"table": "agreement"}),
    ):
        assert client.get(reverse(name, kwargs={"slug": "verif", **kwargs})).status_code == 404
    assert not ReportSnapshot.objects.filter(study=loaded_verification_study).exists()


def test_report_that_moved_while_built_is_never_current(owner, loaded_verification_study, monkeypatch):
    """Data changed during the build: the report is kept, but only ever shown as an older report."""
    real = cache.build_report

    def racing(study, options=None, **kwargs):
        report = real(study, options, **kwargs)
        change_label(loaded_verification_study)
        return report

    monkeypatch.setattr(cache, "build_report", racing)
    page(owner)
    monkeypatch.setattr(cache, "build_report", real)
    assert ReportSnapshot.objects.get().fingerprint.startswith(cache.MOVED)
    assert STALE in page(owner)
    assert DBTaskResult.objects.filter(task_path=TASK).count() == 1


def test_cache_keeps_only_the_latest_few(loaded_verification_study):
    for n in range(4):
        change_label(loaded_verification_study, label=("supported", "contradicted")[n % 2])
        cache.current_report(loaded_verification_study, PAGE_OPTIONS)
        cache.current_report(loaded_verification_study, ReportOptions(reference="majority"))
    snapshots = ReportSnapshot.objects.filter(study=loaded_verification_study)
    assert snapshots.count() == 2 * cache.KEEP_PER_OPTIONS
    for n in range(cache.KEEP_PER_STUDY + 2):
        cache.current_report(loaded_verification_study, ReportOptions(k=n + 1))
    assert snapshots.count() == cache.KEEP_PER_STUDY


def _adjudicate(study, researcher) -> None:
    adjudicate(
        item=study.items.get(external_id="c-2"), adjudicator=researcher, verdict=verdict_for(study, label="supported")
    )


def _rename(study, researcher) -> None:
    member = StudyMember.objects.get(study=study, user=researcher)
    member.pseudonym = "renamed"
    member.save()


def _gold(study, researcher) -> None:
    import_items(study=study, stream=jsonl(verification_item("c-2", gold="supported")), fmt="jsonl", update=True)


CHANGES = {
    "a label": lambda study, researcher: change_label(study),
    "a gold label": _gold,
    "an item": lambda study, researcher: import_items(study=study, stream=jsonl(verification_item("c-9")), fmt="jsonl"),
    "an adjudication": _adjudicate,
    "a pseudonym": _rename,
    "the reference rule": lambda study, researcher: set_adjudication_settings(
        study=study, user=researcher, reference_rule="majority"
    ),
    "a study setting": lambda study, researcher: update_study(study=study, changes={"gold_in_agreement": False}),
    "a verifier": lambda study, researcher: create_verifier(study=study, name="maj", kind="baseline_majority"),
}


@pytest.mark.parametrize("what", list(CHANGES))
def test_every_change_a_report_reads_makes_the_cached_report_stale(owner, researcher, loaded_verification_study, what):
    page(owner)
    before = selectors.report_fingerprint(loaded_verification_study)
    CHANGES[what](loaded_verification_study, researcher)
    study = type(loaded_verification_study).objects.get(pk=loaded_verification_study.pk)
    assert selectors.report_fingerprint(study) != before
    assert STALE in page(owner)


def test_a_participant_screened_out_makes_the_cached_report_stale(owner, loaded_verification_study):
    """The participant services change a status by UPDATE, touching no ``updated_at``; the report counts them."""
    ids = ensure_annotator_identities(study=loaded_verification_study, names=["crowd-1"])
    member = StudyMember.objects.get(study=loaded_verification_study, user_id=ids["crowd-1"])
    participant = Participant.objects.create(
        study=loaded_verification_study, member=member, panel_id="P1", status="working"
    )
    page(owner)
    before = selectors.report_fingerprint(loaded_verification_study)
    Participant.objects.filter(pk=participant.pk).update(status="screened_out")
    assert selectors.report_fingerprint(loaded_verification_study) != before
    assert STALE in page(owner)


def test_annotator_chart_is_drawn_from_the_pages_cached_report(owner, loaded_verification_study, monkeypatch):
    from metaeval.reporting import charts as report_charts

    page(owner, query="?reference=majority")
    chart = reverse("metaeval:report_chart", args=["verif", "annotators", "svg"]) + "?reference=majority"

    def recompute(*args, **kwargs):
        raise AssertionError("the chart recomputed what the cached report holds")

    monkeypatch.setattr(report_charts, "_annotators", recompute)
    response = owner.get(chart)
    assert response.status_code == 200 and b"<svg" in response.content
    change_label(loaded_verification_study)  # no current report of the new data: drawn from the data
    with pytest.raises(AssertionError, match="recomputed"):
        owner.get(chart)


def test_the_fingerprint_reads_no_more_rows_for_a_bigger_study(loaded_verification_study):
    """Counters and one index step per table: the same queries, whatever the study's size (issue 15 §3)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as small:
        selectors.report_fingerprint(loaded_verification_study)
    import_items(
        study=loaded_verification_study,
        stream=jsonl(*(verification_item(f"more-{n}") for n in range(200))),
        fmt="jsonl",
    )
    import_annotations(
        study=loaded_verification_study,
        stream=jsonl(*({"item": f"more-{n}", "annotator": "w3", "label": "supported"} for n in range(200))),
        fmt="jsonl",
    )
    with CaptureQueriesContext(connection) as big:
        selectors.report_fingerprint(loaded_verification_study)
    assert len(big) == len(small)
    # the answers' and items' counts come from the counters, not from counting their rows
    big_tables = ('"annotation_annotation"', '"annotation_item"', '"annotation_assignment"')
    counted = [q["sql"] for q in big if "COUNT(" in q["sql"].upper() and any(t in q["sql"] for t in big_tables)]
    assert not counted


def test_a_big_studys_first_report_is_built_in_the_background_while_the_page_says_so(owner, builds, settings):
    """Past REPORT_INLINE_MAX_LABELS (the fixture's study has 6 labels) no request builds: the page says
    the report is being computed and queues one build; once the task has run, the page shows the report."""
    settings.REPORT_INLINE_MAX_LABELS = 5
    first = page(owner)
    assert "The report is being computed." in first and 'data-reload="pending"' in first
    assert 'id="agreement"' not in first and builds == []
    assert "The report is being computed." in page(owner)  # a second view queues nothing more
    assert DBTaskResult.objects.filter(task_path=TASK).count() == 1
    status = reverse("metaeval:report_status", args=["verif"])
    assert owner.get(status).json()["current"] is False
    run_queued_refresh()
    assert builds == ["verif"]
    assert owner.get(status).json()["current"] is True
    shown = page(owner)
    assert CURRENT in shown and 'id="agreement"' in shown and "being computed" not in shown and len(builds) == 1


def test_a_small_studys_first_report_is_built_in_the_request(owner, builds, settings):
    settings.REPORT_INLINE_MAX_LABELS = 6  # exactly the study's labels: still built at once
    assert CURRENT in page(owner) and builds == ["verif"]
    assert not DBTaskResult.objects.filter(task_path=TASK).exists()


@pytest.fixture
def first_sections_seen(owner, monkeypatch):
    """What the page and the status showed while a report's first sections were stored and the rest not yet."""
    seen: dict[str, object] = {}
    real = cache.build_report
    status = reverse("metaeval:report_status", args=["verif"])

    def staged(study, options=None, *, on_first_sections=None):
        def first(report):
            on_first_sections(report)
            seen["page"] = page(owner)
            seen["status"] = owner.get(status).json()
            seen["cached_current"] = cache.cached_current(study, PAGE_OPTIONS, selectors.report_fingerprint(study))

        return real(study, options, on_first_sections=first if on_first_sections else None)

    monkeypatch.setattr(cache, "build_report", staged)
    return seen


def test_a_big_studys_first_report_shows_its_counts_and_agreement_before_the_rest(
    owner, settings, first_sections_seen, loaded_verification_study
):
    """The background build stores the first sections; the page shows them and says the rest is coming."""
    settings.REPORT_INLINE_MAX_LABELS = 5
    assert "The report is being computed." in page(owner)
    run_queued_refresh()
    shown = first_sections_seen["page"]
    assert "The rest of the report is being computed." in shown and 'data-reload="partial"' in shown
    assert 'id="agreement"' in shown and 'id="ceiling"' in shown and "Fleiss" in shown
    assert "report_refresh.js" in shown and "Binary collapse" not in shown and 'id="domains"' not in shown
    # what comes later is not shown as empty: no charts, scores or quality yet, the list "being computed"
    assert 'id="charts"' not in shown and 'id="scores"' not in shown and 'id="annotator-quality"' not in shown
    assert "Being computed: the list comes with the rest" in shown and "No item with differing labels" not in shown
    assert first_sections_seen["status"] == {
        "current": False,
        "computed_at": None,
        "whole": False,
        "first_sections": True,
    }
    assert first_sections_seen["cached_current"] is None  # charts never draw from first sections
    # the whole report took their place
    assert list(ReportSnapshot.objects.values_list("complete", flat=True)) == [True]
    whole = page(owner)
    assert CURRENT in whole and 'id="scores"' in whole and "being computed" not in whole.lower()


def test_first_sections_are_the_whole_reports_own(owner, settings, first_sections_seen, loaded_verification_study):
    """Same numbers as the whole report, same key order; the later sections are empty placeholders."""
    settings.REPORT_INLINE_MAX_LABELS = 5
    captured: list[dict] = []
    real = cache._store

    def keeping(study, options, encoded, fingerprint, seconds, *, complete=True):
        captured.append({"complete": complete, "report": json.loads(encoded.main)})
        return real(study, options, encoded, fingerprint, seconds, complete=complete)

    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(cache, "_store", keeping)
    try:
        page(owner)
        run_queued_refresh()
    finally:
        monkeypatch.undo()
    first, whole = captured
    assert (first["complete"], whole["complete"]) == (False, True)
    assert list(first["report"]) == list(whole["report"])
    later = set(cache.FIRST_SECTIONS_PENDING)
    for key, value in first["report"].items():
        if key in later or key in ("binary", "by_domain"):  # binary and per-domain agreement come later too
            assert value in (None, {cache.PARTS: "disagreements", "n": 0})
        else:
            assert value == whole["report"][key], key
    assert whole["report"]["scores"] and whole["report"]["n_disagreements"] == 1


def test_a_build_that_died_after_its_first_sections(owner, settings, loaded_verification_study, monkeypatch):
    """The page keeps showing the first sections and queues the build again after the retry time;
    downloads never serve them: they build the whole report."""
    settings.REPORT_INLINE_MAX_LABELS = 5
    real = cache.build_report

    def dying(study, options=None, *, on_first_sections=None):
        def first(report):
            on_first_sections(report)
            raise RuntimeError("worker killed")

        return real(study, options, on_first_sections=first)

    page(owner)
    monkeypatch.setattr(cache, "build_report", dying)
    with pytest.raises(RuntimeError, match="worker killed"):
        run_queued_refresh()
    monkeypatch.setattr(cache, "build_report", real)
    assert "The rest of the report is being computed." in page(owner)
    DBTaskResult.objects.filter(task_path=TASK).delete()
    settings.REPORT_REFRESH_RETRY_SECONDS = 0  # the lost task counts as lost
    assert "The rest of the report is being computed." in page(owner)
    assert DBTaskResult.objects.filter(task_path=TASK).count() == 1  # queued again
    download = owner.get(reverse("metaeval:report_download", args=["verif", "json"]) + "?by_domain=true&binary=true")
    downloaded = streamed_json(download)
    assert downloaded["scores"] and downloaded["n_disagreements"] == 1
    assert list(ReportSnapshot.objects.values_list("complete", flat=True)) == [True]  # in their place
    assert CURRENT in page(owner)


def test_later_refreshes_show_the_older_whole_report_not_first_sections(owner, builds, loaded_verification_study):
    """Only a study's first report is stored in two steps: after that the older whole report is shown."""
    page(owner)
    change_label(loaded_verification_study)
    assert STALE in page(owner)
    run_queued_refresh()
    assert not ReportSnapshot.objects.filter(complete=False).exists()
    assert CURRENT in page(owner)


def _seen_from_another_connection() -> list[bool]:
    """The stored snapshots' ``complete`` flags as another request would see them (a connection of its own)."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    def read() -> list[bool]:
        try:
            return list(ReportSnapshot.objects.values_list("complete", flat=True))
        finally:
            connection.close()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(read).result()


@pytest.mark.django_db(transaction=True)
def test_first_sections_are_committed_while_the_rest_is_built(loaded_verification_study, monkeypatch):
    """On PostgreSQL the build is one REPEATABLE READ transaction, whose writes nobody sees before it ends:
    the first sections are stored on a connection of their own, so other requests see them at once
    (elsewhere they are stored in line). Then the whole report takes their place."""
    seen: list[list[bool]] = []
    real = cache.build_report

    def staged(study, options=None, *, on_first_sections=None):
        def first(report):
            on_first_sections(report)
            on_first_sections.wait()
            seen.append(_seen_from_another_connection())

        return real(study, options, on_first_sections=first)

    monkeypatch.setattr(cache, "build_report", staged)
    assert cache.refresh_report(loaded_verification_study.pk, PAGE_OPTIONS.as_dict())["status"] == "built"
    assert seen == [[False]]
    assert _seen_from_another_connection() == [True]


@pytest.mark.django_db
def test_a_list_in_two_places_is_encoded_once_and_kept_in_both(verification_study, monkeypatch):
    """A reference scored as the human majority shares its rows with the human block: written once, its
    chunks copied in the database for the second place; a list equal but apart is written on its own."""
    rows = [{"response_id": f"r-{n}", "score": n / 7} for n in range(2 * cache.CHUNK_ROWS + 3)]
    report = {
        "scores": {"human": {"per_response": rows}, "reference": {"per_response": rows}},
        "disagreements": [{"item": "c-1"}],
    }
    encoded = cache._Encoded.of(report)
    assert encoded.same_as == {"scores/reference/per_response": "scores/human/per_response"}
    written: list[str] = []
    real_texts = cache._Encoded.texts
    monkeypatch.setattr(
        cache._Encoded, "texts", lambda self, section: written.append(section) or real_texts(self, section)
    )
    snapshot = ReportSnapshot.objects.create(
        study=verification_study, options_key="k", fingerprint="f", report="{}", computed_at=timezone.now()
    )
    cache._insert_parts(snapshot.pk, encoded)
    assert written == ["scores/human/per_response", "disagreements"]
    stored = {
        section: [text for _, text in sorted(chunks)]
        for section, chunks in _grouped(ReportSnapshotPart.objects.filter(snapshot=snapshot))
    }
    assert stored["scores/human/per_response"] == stored["scores/reference/per_response"]
    assert len(stored["scores/human/per_response"]) == 3
    assert [row for text in stored["scores/reference/per_response"] for row in json.loads(text)] == rows
    monkeypatch.setattr(cache._Encoded, "texts", real_texts)
    assert encoded.whole() == report
    apart = cache._Encoded.of({**report, "scores": {**report["scores"], "reference": {"per_response": list(rows)}}})
    assert apart.same_as == {}
    assert list(apart.texts("scores/reference/per_response")) == stored["scores/human/per_response"]


def _grouped(parts) -> Iterable[tuple[str, list[tuple[int, str]]]]:
    grouped: dict[str, list[tuple[int, str]]] = {}
    for part in parts:
        grouped.setdefault(part.section, []).append((part.chunk, part.rows))
    return grouped.items()


def test_a_big_import_starts_the_report_build_and_the_first_view_finds_it(
    owner, builds, settings, loaded_verification_study, django_capture_on_commit_callbacks
):
    """Past REPORT_INLINE_MAX_LABELS an import of labels queues the page's report once it is committed:
    the researcher's first view shows the report instead of 'being computed'."""
    settings.REPORT_INLINE_MAX_LABELS = 5
    with django_capture_on_commit_callbacks(execute=True):
        change_label(loaded_verification_study)
    queued = DBTaskResult.objects.get(task_path=TASK)
    assert queued.args_kwargs["args"] == [loaded_verification_study.pk, PAGE_OPTIONS.as_dict()]
    assert builds == []  # queued, not built in the import
    run_queued_refresh()
    shown = page(owner)
    assert CURRENT in shown and "being computed" not in shown and builds == ["verif"]


def test_a_small_import_leaves_the_report_to_its_first_view(
    builds, settings, loaded_verification_study, django_capture_on_commit_callbacks
):
    settings.REPORT_INLINE_MAX_LABELS = 6  # the study's labels: a view builds it in the request
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        change_label(loaded_verification_study)
    assert len(callbacks) == 1  # the import told the metaeval app, which let it be
    assert not DBTaskResult.objects.filter(task_path=TASK).exists() and builds == []


@pytest.mark.django_db
def test_stored_report_text_is_compressed_with_lz4_on_postgresql():
    """pglz took 0.38 s of storing a 100,000-item report, lz4 0.15 s (migration metaeval 0006)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        assert connection.vendor == "sqlite"  # no column compression to choose there
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, a.attcompression FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "WHERE (c.relname, a.attname) IN (('metaeval_reportsnapshot', 'report'), ('metaeval_reportsnapshotpart', 'rows'))"
        )
        methods = dict(cursor.fetchall())
        cursor.execute("SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'")
        lz4 = cursor.fetchone()[0]
    assert methods == dict.fromkeys(("metaeval_reportsnapshot", "metaeval_reportsnapshotpart"), "l" if lz4 else "")


def _without_per_response(node):
    return {
        name: _without_per_response(value) if isinstance(value, dict) else value
        for name, value in node.items()
        if name != "per_response"
    }


@pytest.mark.parametrize("stored", [False, True])
def test_the_files_read_the_report_without_its_per_response_rows_and_show_the_same(many_disagreements, stored):
    """CSV, HTML and LaTeX never show the per-response rows: they read the report without them (absent keys),
    built now or from a snapshot, and their files are those of the whole report."""
    whole = json.loads(json.dumps(build_report(many_disagreements, PAGE_OPTIONS)))
    assert len(whole["scores"]["human"]["per_response"]) == 230
    if stored:
        cache.current_report(many_disagreements, PAGE_OPTIONS)
    lean = cache.current_report(many_disagreements, PAGE_OPTIONS, per_response=False).report
    expected = _without_per_response(whole)
    assert lean == expected and "per_response" not in lean["scores"]["human"]
    assert len(lean["disagreements"]) == 230  # the other long list is whole
    assert report_csv(lean) == report_csv(whole) and report_tex(lean) == report_tex(whole)
