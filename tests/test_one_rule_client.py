"""The notebook client reads the labels the report counts, with each item's reference label by the study's
rule, computed by the server (issue 29, finding 9: it was always the strict majority of the export).

Outside tests/metaeval: `transaction=True` tests (the live server reads what they commit), whose flush
would also empty the demo studies that package loads once."""

from __future__ import annotations

import pytest

from accounts.services import issue_token
from annotation.adjudication.services import adjudicate, verdict_for
from annotation.crowd import services as crowd
from annotation.models import Item, Participant
from annotation.transfer.services.annotation_import import import_annotations
from annotation.workbench.services import SubmittedAnswer, claim_next, submit
from metaeval import stats
from metaeval.client import Claimlab
from metaeval.reporting import ReportOptions, build_report
from tests.annotation.crowd_support import crowd_study
from tests.conftest import jsonl

pytestmark = pytest.mark.django_db(transaction=True)

WORKERS = ("w1", "w2", "w3")
#: item -> the three workers' labels; i-00 is split three ways (no majority) and adjudicated "contradicted".
GIVEN = {
    "i-00": ("supported", "contradicted", "inconclusive"),
    "i-01": ("supported", "supported", "contradicted"),
    "i-02": ("contradicted", "contradicted", "contradicted"),
    "i-03": ("supported", "inconclusive", "inconclusive"),
    "g-0": ("supported", "supported", "supported"),  # a check item: its labels only with checks_in_agreement
    "g-1": ("contradicted", "supported", "contradicted"),  # gold "supported"; gold items count by default
}


def _participant_labels(link, pid: str, label: str) -> Participant:
    participant = crowd.arrive(link=link, ids=crowd.PanelIds(participant=pid, study="S1", session="X1"))
    crowd.accept_consent(participant=participant)
    crowd.start(participant=participant, link=link)
    user = participant.member.user
    assignment = claim_next(user=user, study=participant.study)
    assert assignment is not None
    submit(user=user, study=participant.study, assignment_id=assignment.pk, answer=SubmittedAnswer(label=label))
    crowd.after_item(participant=participant, link=link)
    participant.refresh_from_db()
    return participant


@pytest.fixture
def setup(live_server, researcher):
    study, link = crowd_study(
        "client-rule", items=4, gold=2, n=4, researcher=researcher.username, attention_items=["g-0"], attention_every=2
    )
    Item.objects.filter(study=study, external_id="g-0").update(is_check=True)  # as the link's list makes it
    records = [
        {"item": item, "annotator": worker, "label": label}
        for item, labels in GIVEN.items()
        for worker, label in zip(WORKERS, labels, strict=True)
    ]
    import_annotations(study=study, stream=jsonl(*records), fmt="jsonl")
    kept = _participant_labels(link, "kept", "supported")
    dropped = _participant_labels(link, "dropped", "contradicted")
    crowd.end(participant=dropped, status=Participant.Status.SCREENED_OUT)
    crowd.withdraw(participant=_participant_labels(link, "gone", "inconclusive"))
    adjudicate(
        item=Item.objects.get(study=study, external_id="i-00"),
        adjudicator=researcher,
        verdict=verdict_for(study, label="contradicted"),
    )
    lab = Claimlab(live_server.url, issue_token(user=researcher, name="notebook").key)
    return study, lab, kept, dropped


def test_finding_9_the_clients_reference_label_follows_the_studys_rule(setup):
    study, lab, _, _ = setup
    assert study.reference_rule == "adjudicated_else_majority"
    labels = lab.labels(study.slug)
    reference = labels.drop_duplicates("item").set_index("item")
    assert reference.loc["i-00", "reference_label"] == "contradicted"  # the strict majority has none
    assert reference.loc["i-00", "reference_source"] == "adjudicated"
    assert reference.loc["i-02", "reference_label"] == "contradicted"
    assert reference.loc["i-02", "reference_source"] == "majority"
    assert labels.attrs["reference_rule"] == "adjudicated_else_majority"
    by_majority = lab.labels(study.slug, reference="majority").drop_duplicates("item").set_index("item")
    assert by_majority.loc["i-00", "reference_label"] is None
    by_gold = lab.labels(study.slug, reference="gold").drop_duplicates("item").set_index("item")
    assert by_gold.loc["g-1", "reference_label"] == "supported" and by_gold.loc["i-01", "reference_label"] is None
    report = build_report(study, ReportOptions(n_resamples=0))
    assert report["reference"]["counts"]["adjudicated"] == 1


def test_the_client_counts_the_labels_the_report_counts(setup):
    study, lab, kept, dropped = setup
    labels = lab.labels(study.slug)
    assert "g-0" not in set(labels["item"])  # a check item's labels: left out
    assert "g-1" in set(labels["item"])  # a gold item's: in, as the study's agreement counts them
    annotators = set(labels["annotator"])
    assert kept.member.pseudonym in annotators and dropped.member.pseudonym not in annotators
    report = build_report(study, ReportOptions(n_resamples=0))
    assert len(labels) == report["n_annotations_in_agreement"] == report["n_annotations"]
    table = stats.build_table(labels, list(study.labels))
    assert stats.fleiss_kappa_generalized(table).value == pytest.approx(
        report["agreement"]["fleiss_kappa_generalized"]["value"], abs=1e-12
    )
    with_screened = lab.labels(study.slug, include_screened_out=True)
    assert dropped.member.pseudonym in set(with_screened["annotator"])
    gone = Participant.objects.get(study=study, panel_id="gone").member.pseudonym
    assert gone not in set(with_screened["annotator"]) | annotators  # the withdrawn: never
    assert (
        len(with_screened)
        == build_report(study, ReportOptions(n_resamples=0, include_screened_out=True))["n_annotations"]
    )
    without_gold = lab.labels(study.slug, include_gold_items=False)
    on_gold = int((labels["gold_label"] != "").sum())
    assert "g-1" not in set(without_gold["item"]) and len(without_gold) == len(labels) - on_gold >= len(labels) - 4
