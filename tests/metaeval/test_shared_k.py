"""F1@K of every source in a report uses one K per domain (issue 29, finding 6).

VeriScore's K is the upper median of countable claims per response. Scored with its own
median, a source that leaves claims without a verdict (the human majority, where the
annotators tie) gets a smaller K than a verifier that labels every claim, and the tables
of one report then use different K. Here the human majority and a verifier on the same
responses have different medians (3 and 5), and every table must use the reference's K.
The F1@K values are recomputed by hand with VeriScore's formula.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict

import pytest
from django.urls import reverse

from annotation.members.services import add_members
from annotation.studies.services import create_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from metaeval.reporting import ReportOptions, build_report
from metaeval.reporting.csv_format import report_csv
from metaeval.reporting.latex_format import report_tables
from metaeval.verifiers.services import import_predictions
from tests.conftest import jsonl, verification_item
from tests.support.streamed import streamed_json

pytestmark = pytest.mark.django_db
DOMAIN = "bios"
CLAIMS_PER_RESPONSE = {"r0": 2, "r1": 3, "r2": 4, "r3": 5, "r4": 6, "r5": 7}
SYSTEM = {"r0": "A", "r1": "A", "r2": "A", "r3": "B", "r4": "B", "r5": "B"}


def _claims() -> list[tuple[str, str, int]]:
    """(item, response, position in the response)."""
    return [(f"{r}-c{i}", r, i) for r, n in CLAIMS_PER_RESPONSE.items() for i in range(n)]


def _human(item: str, response: str, position: int) -> tuple[str, str]:
    """Two annotators' labels: they tie on each response's last two claims (no majority, no verdict)."""
    if position >= CLAIMS_PER_RESPONSE[response] - 2:
        return "supported", "contradicted"
    label = "supported" if position % 3 else "contradicted"
    return label, label


def _verifier(position: int) -> str:
    return "supported" if position % 2 == 0 else "contradicted"


def _upper_median(counts: list[int]) -> int:
    return sorted(counts)[len(counts) // 2]


def _f1_at_k(supported: int, countable: int, k: int) -> float:
    """VeriScore's F1@K of one response, written out."""
    if supported == 0:
        return 0.0
    precision, recall = supported / countable, min(supported / k, 1.0)
    return 2 * precision * recall / (precision + recall)


@pytest.fixture
def study(db, researcher):
    study = create_study(slug="shared-k", name="Shared K", kind="verification", annotators_per_item=2)
    add_members(study=study, usernames=[researcher.username], role="researcher")
    items = [
        verification_item(item, domain=DOMAIN, response_id=response, system=SYSTEM[response])
        for item, response, _ in _claims()
    ]
    import_items(study=study, stream=jsonl(*items), fmt="jsonl")
    labels = []
    for item, response, position in _claims():
        first, second = _human(item, response, position)
        labels += [
            {"item": item, "annotator": "w1", "label": first},
            {"item": item, "annotator": "w2", "label": second},
        ]
    import_annotations(study=study, stream=jsonl(*labels), fmt="jsonl")
    predictions = [{"item": item, "verifier": "v", "label": _verifier(position)} for item, _, position in _claims()]
    import_predictions(study=study, stream=jsonl(*predictions), fmt="jsonl")
    return study


def _medians() -> tuple[int, int]:
    """(human majority's K, verifier's K): each source's own median of countable claims."""
    human: defaultdict[str, int] = defaultdict(int)
    verifier: defaultdict[str, int] = defaultdict(int)
    for item, response, position in _claims():
        first, second = _human(item, response, position)
        human[response] += first == second
        verifier[response] += 1
    return _upper_median(list(human.values())), _upper_median(list(verifier.values()))


def test_the_human_majority_and_the_verifier_share_the_references_k(study):
    k_human, k_verifier = _medians()
    assert (k_human, k_verifier) == (3, 5)  # the two sources' own medians differ
    scores = build_report(study, ReportOptions(n_resamples=0))["scores"]
    sources = {"human": scores["human"], "gold": None, "reference": scores["reference"], "v": scores["verifiers"]["v"]}
    ks = {name: block["veriscore"]["by_domain"][DOMAIN]["k"] for name, block in sources.items() if block}
    assert ks == {"human": k_human, "reference": k_human, "v": k_human}
    assert scores["veriscore_k"]["k"] == {DOMAIN: k_human}
    assert {block["veriscore"]["by_domain"][DOMAIN]["k_source"] for block in sources.values() if block} == {
        "reference median"
    }
    # The verifier's F1@K is VeriScore's formula with the shared K, not with its own median.
    per_system = defaultdict(list)
    supported = defaultdict(int)
    for _, response, position in _claims():
        supported[response] += _verifier(position) == "supported"
    for response, n in CLAIMS_PER_RESPONSE.items():
        per_system[SYSTEM[response]].append(_f1_at_k(supported[response], n, k_human))
    systems = scores["verifiers"]["v"]["veriscore"]["by_domain"][DOMAIN]["systems"]
    for system, values in per_system.items():
        assert systems[system]["f1_at_k"]["value"] == pytest.approx(sum(values) / len(values), abs=1e-12)
    # The choice of K changes the number: with its own median the verifier's F1@K would differ.
    own = [_f1_at_k(supported[r], n, k_verifier) for r, n in CLAIMS_PER_RESPONSE.items() if SYSTEM[r] == "B"]
    assert systems["B"]["f1_at_k"]["value"] != pytest.approx(sum(own) / len(own))


def test_the_shared_k_is_stated_beside_every_table(client, researcher, study):
    report = build_report(study, ReportOptions(n_resamples=0))
    rule = report["scores"]["veriscore_k"]["rule"]
    assert "one for every source" in rule and "reference labels" in rule and "?k= overrides" in rule
    rows = list(csv.DictReader(io.StringIO(report_csv(report))))
    k_rows = [r for r in rows if r["statistic"] == "veriscore_k"]
    assert {r["section"] for r in k_rows} == {"scores_human", "scores_reference", "scores_verifier:v"}
    assert {(r["value"], r["note"]) for r in k_rows} == {("3", "reference median")}
    tables = report_tables(report)
    assert "$K$ from the reference labels, the same for every source" in tables["veriscore_human"].caption
    client.force_login(researcher)
    html = client.get(reverse("metaeval:report", args=[study.slug])).content.decode()
    section = html[html.index('id="scores"') :]
    assert section.count('class="small veriscore-k"') == 3  # human majority, reference, verifier v
    data = streamed_json(client.get(reverse("api-study-report", args=[study.slug])))
    assert data["scores"]["veriscore_k"]["k"] == {DOMAIN: 3}


def test_k_from_the_query_still_overrides_for_every_source(study):
    scores = build_report(study, ReportOptions(n_resamples=0, k=4))["scores"]
    for block in (scores["human"], scores["reference"], scores["verifiers"]["v"]):
        entry = block["veriscore"]["by_domain"][DOMAIN]
        assert (entry["k"], entry["k_source"]) == (4, "given")
    assert scores["veriscore_k"]["given"] == 4 and "K = 4 in every domain" in scores["veriscore_k"]["rule"]


def test_without_reference_labels_k_is_the_claim_count_for_every_source(db):
    """A study with verifiers only: no human or gold label, so K comes from the number of claims."""
    study = create_study(slug="verifiers-only", name="V", kind="verification", annotators_per_item=2)
    items = [
        verification_item(item, domain=DOMAIN, response_id=response, system=SYSTEM[response])
        for item, response, _ in _claims()
    ]
    import_items(study=study, stream=jsonl(*items), fmt="jsonl")
    # "w" labels only the first claim of each response: its own median would be 1.
    import_predictions(
        study=study,
        stream=jsonl(
            *({"item": item, "verifier": "v", "label": _verifier(p)} for item, _, p in _claims()),
            *({"item": item, "verifier": "w", "label": "supported"} for item, _, p in _claims() if p == 0),
        ),
        fmt="jsonl",
    )
    scores = build_report(study, ReportOptions(n_resamples=0))["scores"]
    k = _upper_median(list(CLAIMS_PER_RESPONSE.values()))
    for name in ("v", "w"):
        entry = scores["verifiers"][name]["veriscore"]["by_domain"][DOMAIN]
        assert (entry["k"], entry["k_source"]) == (k, "claim-count median")
    assert "whatever their verdict" in scores["veriscore_k"]["rule"]
    assert scores["verifiers"]["w"]["veriscore"]["overall"]["recall"] == pytest.approx(1 / k)
