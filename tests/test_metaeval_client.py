"""The notebook client against the live test server: a token, the labels as a DataFrame, and
``metaeval.stats`` on that frame giving the report's Fleiss kappa (and statsmodels' own).

Outside tests/metaeval: these are `transaction=True` tests (the live server reads what they
commit), and the flush at their end would also empty the demo studies that package loads
once for all its tests."""

from __future__ import annotations

import pytest
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from accounts.services import issue_token
from annotation.models import ExportJob
from annotation.transfer.services.export_runner import run_export_job
from metaeval import client as client_module
from metaeval import stats
from metaeval.client import Claimlab, ClaimlabError
from tests.support.factscore_pref import SCALE, SLUG, demo_items, human_records, make_study, record_label

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def lab(live_server, researcher):
    make_study(researcher=researcher)
    return Claimlab(live_server.url, issue_token(user=researcher, name="notebook").key)


def test_the_frame_gives_the_reports_fleiss_kappa(lab):
    labels = lab.labels(SLUG)
    records = human_records(demo_items())
    assert len(labels) == len(records) == 360
    assert sorted(zip(labels["item"], labels["annotator"], labels["label"], strict=True)) == sorted(
        (r["item"], r["annotator"], record_label(r)) for r in records
    )
    table = stats.build_table(labels, lab.study(SLUG)["labels"])
    kappa = stats.fleiss_kappa(table, n_raters=3)
    report = lab.report(SLUG)
    assert kappa.value == pytest.approx(report["agreement"]["fleiss_kappa"]["value"], abs=1e-12)
    by_item: dict[str, list[int]] = {}
    for record in records:
        by_item.setdefault(record["item"], []).append(SCALE.index(record_label(record)))
    counts, _ = aggregate_raters(list(by_item.values()), 5)
    assert kappa.value == pytest.approx(fleiss_kappa(counts), abs=1e-12)
    one = labels.drop_duplicates("item").set_index("item")["reference_label"]
    for item_id, codes in by_item.items():
        top = max(set(codes), key=codes.count)
        expected = SCALE[top] if 2 * codes.count(top) > len(codes) else None
        assert one[item_id] == expected, item_id


def test_a_big_study_comes_through_the_background_export(lab, settings, monkeypatch, tmp_path):
    settings.EXPORT_INLINE_MAX_ROWS = 10
    settings.VAR_DIR = tmp_path / "var"

    def worker_turn(seconds: float) -> None:  # the client waits: let "the worker" run what is queued
        for job in ExportJob.objects.filter(status=ExportJob.Status.QUEUED):
            run_export_job(job_id=job.pk)

    monkeypatch.setattr(client_module.time, "sleep", worker_turn)
    frame = lab.annotations(SLUG)
    assert len(frame) == 360 and {"item", "annotator", "label", "left_system"} <= set(frame.columns)
    assert ExportJob.objects.get().status == ExportJob.Status.SUCCEEDED


def test_errors_name_the_problem(lab, live_server):
    with pytest.raises(ClaimlabError) as missing:
        lab.labels("no-such-study")
    assert missing.value.status == 404
    with pytest.raises(ClaimlabError) as refused:
        Claimlab(live_server.url, "not-a-token").study(SLUG)
    assert refused.value.status == 401 and refused.value.detail
    with pytest.raises(ValueError, match="a token is needed"):
        Claimlab(live_server.url, "")
