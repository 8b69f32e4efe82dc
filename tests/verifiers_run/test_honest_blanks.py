"""Every dash of the verifiers table (and of the human ceiling) has a reason that is true for the study.

Issue 29, finding 5: a study whose 20 items each had 3 human labels showed the human
ceiling as a dash "because it needs two or more human labels per item", while the cause
in the JSON was that kappa was undefined for every annotator. Each test here builds a
study that hits one cause and checks the reason the report gives for that very cause,
in the JSON (``blanks``, ``human_ceiling.reason``) and on the page.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from django.urls import reverse

from annotation.members.services import add_members
from annotation.models import Item
from annotation.studies.services import create_study
from metaeval.models import Prediction
from metaeval.reporting.build import build_report
from metaeval.reporting.charts import chart_figure
from metaeval.reporting.options import ReportOptions
from metaeval.stats import build_table, human_ceiling
from metaeval.verifiers.report import verifier_report
from metaeval.verifiers.services import create_verifier, import_predictions
from tests.conftest import jsonl
from tests.verifiers_run.conftest import add_items, add_labels, claim_item, operator_endpoint

pytestmark = pytest.mark.django_db
LABELS = ["supported", "contradicted", "inconclusive"]
TOO_FEW = "the human ceiling needs items with at least two human labels"
CONSTANT = "used one and the same category on every item compared"
NO_PRICE = "the verifier has no price per 1,000 tokens (set one on the verifier to estimate the cost)"


def _study(slug: str, n_items: int, researcher=None, **item_extra):
    study = create_study(slug=slug, name=slug, kind="verification", annotators_per_item=3)
    if researcher is not None:
        add_members(study=study, usernames=[researcher.username], role="researcher")
    add_items(study, [{**claim_item(f"c{n}", f"Claim {n} holds."), **item_extra} for n in range(1, n_items + 1)])
    return study


def _predict(study, labels: dict[str, str], name: str = "v") -> None:
    rows = ({"item": item, "verifier": name, "label": label} for item, label in labels.items())
    import_predictions(study=study, stream=jsonl(*rows), fmt="jsonl")


def _blank(section: dict, column: str) -> str:
    return section["blanks"][column]["reason"]


def test_constant_labels_blank_the_ceiling_for_kappa_not_for_a_label_count(client, researcher):
    """Finding 5 as seen: 20 items with 3 labels each, every label the same; kappa is undefined."""
    study = _study("constant", 20, researcher)
    add_labels(study, [(f"c{n}", w, "supported") for n in range(1, 21) for w in ("w1", "w2", "w3")])
    _predict(study, {f"c{n}": "supported" if n % 2 else "contradicted" for n in range(1, 21)})
    section = verifier_report(study, n_resamples=0)["v"]
    ceiling = section["human_ceiling"]
    assert ceiling["human"]["accuracy"]["value"] == 1.0  # the ceiling was computed: 3 labels per item
    assert ceiling["human"]["cohen_kappa"]["value"] is None
    reason = ceiling["reason"]
    assert reason.startswith("undefined for every annotator") and CONSTANT in reason and "(3 of 3)" in reason
    assert TOO_FEW not in reason
    assert _blank(section, "ceiling_human_kappa") == reason
    # The verifier's side of the ceiling is defined (it varies): no blank, and the page shows its number.
    assert ceiling["verifier"]["cohen_kappa"]["value"] == pytest.approx(0.0)
    assert "ceiling_verifier_kappa" not in section["blanks"]
    client.force_login(researcher)
    html = client.get(reverse("metaeval:report", args=[study.slug])).content.decode()
    table = html[html.index('id="verifiers"') :]
    assert CONSTANT in table and TOO_FEW not in table
    # The agreement section's ceiling table speaks of annotators, not of a verifier.
    per_annotator = build_report(study)["human_ceiling"]["annotators"]
    assert all(CONSTANT in entry["human"]["cohen_kappa"]["reason"] for entry in per_annotator)
    assert not any("verifier" in entry["human"]["cohen_kappa"]["reason"] for entry in per_annotator)
    # The verifier chart's legend gives the table's reason, not a guess ("needs two or more labels").
    figure = chart_figure(study, "verifiers", ReportOptions(n_resamples=0))
    legend = " ".join(text.get_text() for text in figure.legends[0].get_texts()).replace("\n", " ")
    assert CONSTANT in legend and "two or more human labels" not in legend


def test_one_label_per_item_says_the_ceiling_needs_two():
    study = _study("one-label", 6)
    add_labels(study, [(f"c{n}", "w1" if n % 2 else "w2", "supported") for n in range(1, 7)])
    _predict(study, {"c1": "supported", "c2": "contradicted"})
    section = verifier_report(study, n_resamples=0)["v"]
    reason = section["human_ceiling"]["reason"]
    assert reason.startswith(TOO_FEW) and "2 rater(s) and at most 1 label(s) per item" in reason
    assert _blank(section, "ceiling_human_kappa") == reason == _blank(section, "ceiling_verifier_kappa")


def test_gold_only_reference_names_the_gold_labels():
    study = _study("gold-only", 4, gold="supported")
    _predict(study, {"c1": "supported", "c2": "contradicted"})
    section = verifier_report(study, n_resamples=0)["v"]
    assert section["reference"] == "gold labels (the study has no human labels)"
    reason = _blank(section, "ceiling_human_kappa")
    assert reason.startswith(TOO_FEW) and "gold labels" in reason and "1 rater(s)" in reason


def test_others_that_tie_everywhere_leave_no_majority_to_compare_with(client, researcher):
    """Three annotators give three different labels on every item: the other two always tie."""
    study = _study("ties", 6, researcher)
    add_labels(
        study, [(f"c{n}", w, LABELS[(n + j) % 3]) for n in range(1, 7) for j, w in enumerate(("w1", "w2", "w3"))]
    )
    _predict(study, {f"c{n}": "supported" for n in range(1, 7)})
    section = verifier_report(study, n_resamples=0)["v"]
    reason = section["human_ceiling"]["reason"]
    assert "the other annotators tie on every item this annotator labelled" in reason and "(3 of 3)" in reason
    assert "prediction" not in reason  # the old reason blamed a missing prediction
    assert _blank(section, "coverage") == "no item has a human majority label"
    assert _blank(section, "cohen_kappa") == "no item has both a human majority label and a prediction"
    # The page's other dashes of this study carry their reasons too: the scores from the human
    # majority (no claim has a verdict) and the verifier against the reference labels (none).
    client.force_login(researcher)
    html = client.get(reverse("metaeval:report", args=[study.slug])).content.decode()
    assert 'title="no answered response has a countable claim">—<' in html
    assert 'title="no labelled item has a reference label">—<' in html


def test_a_verifier_without_labels_on_the_humans_items_blanks_the_ceiling_for_that():
    study = _study("elsewhere", 6)
    add_labels(
        study,
        [(f"c{n}", w, "supported" if (n + j) % 3 else "contradicted") for n in (1, 2, 3) for j, w in enumerate("abc")],
    )
    _predict(study, {"c4": "supported", "c5": "contradicted", "c6": "supported"})
    section = verifier_report(study, n_resamples=0)["v"]
    reason = section["human_ceiling"]["reason"]
    assert "the verifier has no label on the items where the others have a majority" in reason
    assert section["coverage"]["value"] == 0.0 and "coverage" not in section["blanks"]


def test_without_human_or_gold_labels_every_comparison_says_so():
    study = _study("nothing", 3)
    _predict(study, {"c1": "supported"})
    section = verifier_report(study, n_resamples=0)["v"]
    nothing = "the study has no human labels and no gold labels to compare with"
    for column in ("coverage", "accuracy", "balanced_accuracy", "cohen_kappa", "macro_f1", "ceiling_human_kappa"):
        assert _blank(section, column) == nothing
    assert _blank(section, "estimated_cost") == NO_PRICE  # an imported verifier has no prices
    assert "parse_failure_rate" not in section["blanks"] and "error_rate" not in section["blanks"]


def test_a_verifier_that_never_answered_says_why_its_rates_are_blank(researcher):
    study = _study("silent", 3, researcher)
    add_labels(study, [(f"c{n}", w, "supported") for n in (1, 2, 3) for w in ("w1", "w2")])
    priced = create_verifier(
        study=study,
        name="priced",
        preset="veriscore_ternary",
        model="m",
        endpoint=operator_endpoint("http://127.0.0.1:9/v1"),
        price_input_per_1k="2",
        price_output_per_1k="10",
    )
    failing = create_verifier(
        study=study, name="failing", preset="veriscore_ternary", model="m", endpoint=operator_endpoint("http://x/v1")
    )
    for item in Item.objects.filter(study=study):
        Prediction.objects.create(verifier=failing, item=item, label=None, error="HTTP 500", cache_key="k")
    report = verifier_report(study, n_resamples=0)
    assert priced.pk and report["priced"]["estimated_cost"] == 0.0
    assert _blank(report["priced"], "error_rate") == "the verifier has no predictions"
    assert _blank(report["priced"], "parse_failure_rate") == "no call was answered"
    assert "estimated_cost" not in report["priced"]["blanks"]
    assert report["failing"]["error_rate"]["value"] == 1.0
    assert _blank(report["failing"], "parse_failure_rate") == "no call was answered"
    assert _blank(report["failing"], "estimated_cost") == NO_PRICE


def test_the_ceiling_functions_reasons_name_the_cause():
    """The pure function behind both ceilings: each annotator's undefined kappa says which cause it is."""
    constant = pd.DataFrame(
        [(item, who, "a") for item in range(5) for who in ("x", "y", "z")], columns=["item", "annotator", "label"]
    )
    out = human_ceiling(build_table(constant, ["a", "b"]))
    assert all(CONSTANT in e["human"]["cohen_kappa"].reason for e in out["annotators"])
    assert all(e["human"]["accuracy"].value == 1.0 for e in out["annotators"])
    alone = pd.DataFrame([(0, "x", "a"), (1, "y", "b")], columns=["item", "annotator", "label"])
    out = human_ceiling(build_table(alone, ["a", "b"]))
    reasons = {e["human"][key].reason for e in out["annotators"] for key in ("accuracy", "cohen_kappa", "macro_f1")}
    assert reasons == {"no item this annotator labelled has a label from another annotator"}
    assert out["mean"]["human"]["cohen_kappa"].reason.endswith("(2 of 2)")
    varied = pd.DataFrame(
        [(item, who, "ab"[(item + j) % 2 if who != "z" else 0]) for item in range(6) for j, who in enumerate("xyz")],
        columns=["item", "annotator", "label"],
    )
    defined = human_ceiling(build_table(varied, ["a", "b"]))["mean"]["human"]["cohen_kappa"]
    assert defined.value is not None and not np.isnan(defined.value)
