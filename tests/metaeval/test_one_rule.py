"""One study frame, one rule (issue 29): every chart carries the numbers of the table beside it, and the
report, charts, CSV, card and Hugging Face export count the same labels under the study's rules.

Expected values come from the seeded records (sklearn for Cohen's kappa), never from Claimlab's output
alone; each comparison of a chart with its table is made on a study with gold items, once with gold
items in agreement and once without.
"""

from __future__ import annotations

import csv
import io
import random

import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from annotation.adjudication.services import adjudicate, verdict_for
from annotation.crowd import services as crowd
from annotation.members.services import add_members
from annotation.models import Annotation, Item, Participant, Study, StudyMember
from annotation.studies.services import create_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from annotation.workbench.services import SubmittedAnswer, claim_next, submit
from metaeval.dataset_export import write_hf_dataset
from metaeval.planning import study_precision
from metaeval.reporting import ReportOptions, build_report
from metaeval.reporting.annotator_quality import reference_and_quality
from metaeval.reporting.charts import (
    annotator_rows,
    chart_figure,
    chart_names,
    kappa_matrix,
    label_counts,
    preference_rows,
    verifier_rows,
)
from metaeval.reporting.csv_format import report_csv
from metaeval.study_frame import study_frame
from metaeval.verifiers.report import verifier_report
from metaeval.verifiers.services.prediction_import import import_predictions
from tests.annotation.crowd_support import crowd_study
from tests.conftest import jsonl, preference_item, verification_item

pytestmark = pytest.mark.django_db

LABELS = ["supported", "contradicted", "inconclusive"]
WORKERS = ("w1", "w2", "w3")
SCALE = ["a_strong", "a_slight", "tie", "b_slight", "b_strong"]
SYSTEMS = ("veriscore", "safe")
OPTIONS = ReportOptions(n_resamples=200, by_domain=True, binary=True)


def verification_records(n_items: int = 30, seed: int = 29) -> list[dict]:
    """Three workers on every item: a shared truth, each worker right 70% of the time."""
    rng = random.Random(seed)
    records = []
    for k in range(n_items):
        truth = rng.choice(LABELS)
        for worker in WORKERS:
            label = truth if rng.random() < 0.7 else rng.choice(LABELS)
            records.append({"item": f"c-{k:02d}", "annotator": worker, "label": label})
    return records


def verification_study(slug: str, *, gold_in_agreement: bool, n_gold: int = 6) -> Study:
    """Finding 4's study: 30 items, the last ``n_gold`` with a gold label, three workers on all 30, a verifier."""
    study = create_study(slug=slug, name=slug, kind="verification", annotators_per_item=3)
    items = [
        verification_item(
            f"c-{k:02d}",
            domain="bio" if k % 2 else "sci",
            evidence=[],
            **({"gold": "supported"} if k >= 30 - n_gold else {}),
        )
        for k in range(30)
    ]
    import_items(study=study, stream=jsonl(*items), fmt="jsonl")
    import_annotations(study=study, stream=jsonl(*verification_records()), fmt="jsonl")
    rng = random.Random(7)
    predictions = [
        {"item": f"c-{k:02d}", "verifier": "llm-x", "label": rng.choice(LABELS), "rationale": "r"} for k in range(30)
    ]
    import_predictions(study=study, stream=jsonl(*predictions), fmt="jsonl")
    Study.objects.filter(pk=study.pk).update(gold_in_agreement=gold_in_agreement)
    study.refresh_from_db()
    return study


def preference_records(n_items: int = 24, seed: int = 11) -> list[dict]:
    """Three workers on every item, each judgement drawn from the scale; p-00 is split three ways
    (veriscore slightly, safe slightly, a tie): no majority direction."""
    rng = random.Random(seed)
    split = {"w1": ("veriscore", "slight"), "w2": ("safe", "slight"), "w3": ("tie", "")}
    records = []
    for k in range(n_items):
        for slot, worker in enumerate(WORKERS):
            label = rng.choice(SCALE)
            record = {"item": f"p-{k:02d}", "annotator": worker, "left_system": SYSTEMS[(k + slot) % 2]}
            if k == 0:
                preferred, strength = split[worker]
            elif label == "tie":
                preferred, strength = "tie", ""
            else:
                side, strength = label.split("_")
                preferred = SYSTEMS["ab".index(side)]
            record["preferred"] = preferred
            if strength:
                record["strength"] = strength
            records.append(record)
    return records


def pref_study(slug: str, *, gold_in_agreement: bool) -> Study:
    """24 items in two domains, the last 4 with a gold label, three workers on each."""
    study = create_study(slug=slug, name=slug, kind="preference", systems=list(SYSTEMS), annotators_per_item=3)
    items = [
        preference_item(
            f"p-{k:02d}",
            domain="bio" if k < 12 else "sci",
            lists={"veriscore": ["A claim."], "safe": ["Another claim."]},
            **({"gold": "a_slight"} if k >= 20 else {}),
        )
        for k in range(24)
    ]
    import_items(study=study, stream=jsonl(*items), fmt="jsonl")
    import_annotations(study=study, stream=jsonl(*preference_records()), fmt="jsonl")
    Study.objects.filter(pk=study.pk).update(gold_in_agreement=gold_in_agreement)
    study.refresh_from_db()
    return study


def cell_texts(figure) -> set[str]:
    return {text.get_text() for text in figure.axes[0].texts}


def assert_label_chart_is_the_table(study: Study, report: dict, options: ReportOptions) -> None:
    counts = label_counts(study_frame(study, options))
    distribution = report["agreement"]["label_distribution"]
    for label in report["labels"]:
        assert counts[label] == distribution["counts"][label], label
    assert sum(counts.values()) == report["n_annotations_in_agreement"]
    assert sum(counts.values()) == distribution["n_ratings"] + report["agreement"]["n_labels_off_scale"]
    title = chart_figure(study, "labels", options).axes[0].get_title()
    assert f"(n = {report['n_annotations_in_agreement']})" in title


def assert_heatmap_is_the_table(study: Study, report: dict, options: ReportOptions) -> None:
    names, kappa, n = kappa_matrix(study_frame(study, options))
    pairs = report["agreement"]["pairwise_cohen_kappa"]
    assert len(pairs) == len(names) * (len(names) - 1) // 2 > 0
    drawn = cell_texts(chart_figure(study, "agreement", options))
    for pair in pairs:
        i, j = (names.index(name) for name in pair["annotators"])
        assert n[i, j] == pair["n"]
        if pair["value"] is None:
            assert pd.isna(kappa[i, j])
        else:
            assert kappa[i, j] == pytest.approx(pair["value"], abs=1e-12)
            assert f"{pair['value']:.2f}\nn={pair['n']}" in drawn


def assert_annotator_chart_is_the_table(study: Study, report: dict, options: ReportOptions) -> None:
    _, _, quality = reference_and_quality(study_frame(study, options), options)
    assert annotator_rows(quality) == annotator_rows(report["annotator_quality"])
    assert len(annotator_rows(quality)[0]) == report["n_annotators"]


@pytest.mark.parametrize("gold_in_agreement", [True, False])
def test_every_chart_of_a_verification_study_carries_its_tables_numbers(gold_in_agreement):
    study = verification_study(f"one-rule-v-{str(gold_in_agreement).lower()}", gold_in_agreement=gold_in_agreement)
    report = build_report(study, OPTIONS)
    assert report["n_annotations"] == 90
    assert report["n_annotations_in_agreement"] == (90 if gold_in_agreement else 72)
    assert_label_chart_is_the_table(study, report, OPTIONS)
    assert_heatmap_is_the_table(study, report, OPTIONS)
    assert_annotator_chart_is_the_table(study, report, OPTIONS)
    # the verifier chart drawn on its own (no report at hand) is the report's verifier table
    assert "verifiers" in chart_names(study)
    alone = verifier_report(study, n_resamples=OPTIONS.n_resamples, seed=OPTIONS.seed, disagreements_limit=0)
    assert verifier_rows(alone) == verifier_rows(report["verifiers"]) and len(verifier_rows(alone)) == 1
    # the planning card counts the agreement's labels too
    assert study_precision(study)["n"] == report["agreement"]["fleiss_kappa_generalized"]["n_items"]


@pytest.mark.parametrize("gold_in_agreement", [True, False])
def test_every_chart_of_a_preference_study_carries_its_tables_numbers(gold_in_agreement):
    study = pref_study(f"one-rule-p-{str(gold_in_agreement).lower()}", gold_in_agreement=gold_in_agreement)
    report = build_report(study, OPTIONS)
    assert report["n_annotations_in_agreement"] == (72 if gold_in_agreement else 60)
    assert_label_chart_is_the_table(study, report, OPTIONS)
    assert_heatmap_is_the_table(study, report, OPTIONS)
    assert_annotator_chart_is_the_table(study, report, OPTIONS)
    section = report["preference"]
    rows = dict(preference_rows(study_frame(study, OPTIONS)))
    a, b = SYSTEMS

    def as_scale(counts: dict) -> dict[str, int]:
        sides = counts["systems"]
        given = {
            "a_strong": sides[a]["wins_strong"],
            "a_slight": sides[a]["wins_slight"],
            "tie": counts["ties"],
            "b_slight": sides[b]["wins_slight"],
            "b_strong": sides[b]["wins_strong"],
        }
        return {label: n for label, n in given.items() if n}

    assert rows["all"] == as_scale(section["counts"]) and sum(rows["all"].values()) == section["n_judgements"]
    assert set(rows) == {"all", *section["by_domain"]}
    for domain, counts in section["by_domain"].items():
        assert rows[domain] == as_scale(counts), domain
    ticks = [tick.get_text() for tick in chart_figure(study, "preference", OPTIONS).axes[0].get_yticklabels()]
    assert ticks[0] == f"all (n={section['n_judgements']})"


def test_finding_4_the_label_chart_and_the_heatmap_follow_the_gold_rule():
    """6 gold items of 30, 3 workers on all 30, gold in agreement (the default): the report counts 90
    labels and so must the chart (it said 72); the heatmap's pair is the agreement table's (it was not)."""
    study = verification_study("finding-4", gold_in_agreement=True)
    assert Study._meta.get_field("gold_in_agreement").default is True
    report = build_report(study)
    assert report["n_annotations"] == 90
    assert "(n = 90)" in chart_figure(study, "labels").axes[0].get_title()
    records = pd.DataFrame(verification_records())
    drawn = cell_texts(chart_figure(study, "agreement"))
    for pair in report["agreement"]["pairwise_cohen_kappa"]:
        first, second = (
            records.loc[records["annotator"] == name].set_index("item")["label"] for name in pair["annotators"]
        )
        shared = first.index.intersection(second.index)
        expected = cohen_kappa_score(first[shared], second[shared], labels=LABELS)
        assert pair["n"] == len(shared) == 30
        assert pair["value"] == pytest.approx(expected, abs=1e-12)
        assert f"{expected:.2f}\nn=30" in drawn


def test_finding_4_the_dataset_card_gives_the_reports_agreement(tmp_path):
    study = verification_study("finding-4-card", gold_in_agreement=True)
    report = build_report(study)
    write_hf_dataset(study, tmp_path / "card")
    text = (tmp_path / "card" / "README.md").read_text(encoding="utf-8")
    kappa = report["agreement"]["fleiss_kappa"]
    assert f"| fleiss_kappa | {kappa['value']:.3f} |" in text
    assert f"| {kappa['n_items']} |" in text and kappa["n_items"] == 30


def _adjudicated_pref_study(researcher) -> tuple[Study, str]:
    """A preference study where item p-00's judgements have no majority direction; the researcher
    adjudicates it: veriscore (system a), strongly."""
    study = pref_study("finding-9", gold_in_agreement=True)
    add_members(study=study, usernames=[researcher.username], role="researcher")
    item = Item.objects.get(study=study, external_id="p-00")
    adjudicate(item=item, adjudicator=researcher, verdict=verdict_for(study, preferred="veriscore", strength="strong"))
    return study, "p-00"


def test_finding_9_preference_pairs_take_the_adjudicated_side(researcher, tmp_path):
    study, item = _adjudicated_pref_study(researcher)
    frame = study_frame(study)
    assert sorted(frame.labels.loc[frame.labels["item"] == item, "label"]) == ["a_slight", "b_slight", "tie"]
    assert study.reference_rule == "adjudicated_else_majority"
    write_hf_dataset(study, tmp_path / "hf")
    pairs = pd.read_parquet(tmp_path / "hf" / "data" / "preference_pairs").set_index("item")
    assert pairs.loc[item, "chosen_system"] == "veriscore" and pairs.loc[item, "rejected_system"] == "safe"
    items = pd.read_parquet(tmp_path / "hf" / "data" / "items").set_index("item")
    assert items.loc[item, "reference_label"] == items.loc[item, "adjudicated_label"] == "a_strong"
    assert items.loc[item, "reference_source"] == "adjudicated"
    # every other item: its strict-majority direction, as before (computed here from the records)
    records = pd.DataFrame(preference_records())
    for other, given in records.groupby("item"):
        if other == item:
            continue
        sides = given["preferred"].value_counts()
        winner = sides.index[0] if 2 * sides.iloc[0] > len(given) and sides.index[0] != "tie" else None
        assert (other in pairs.index) == (winner is not None), other
        if winner is not None:
            assert pairs.loc[other, "chosen_system"] == winner
    # the majority rule asked for by name: the item has no majority direction, so no pair
    Study.objects.filter(pk=study.pk).update(reference_rule="majority")
    study.refresh_from_db()
    write_hf_dataset(study, tmp_path / "hf-majority")
    majority_pairs = pd.read_parquet(tmp_path / "hf-majority" / "data" / "preference_pairs")
    assert item not in set(majority_pairs["item"])


def test_check_items_labels_are_left_out_unless_the_study_counts_them(tmp_path):
    study, _ = crowd_study("checks", items=6, gold=4, n=3, attention_items=["g-0", "g-1"], attention_every=2)
    # the link's lists mark them (annotation.crowd.services); marked here too, as this test is the frame's
    Item.objects.filter(study=study, external_id__in=["g-0", "g-1"]).update(is_check=True)
    records = [
        {"item": item, "annotator": worker, "label": "supported" if (k + n) % 3 else "contradicted"}
        for k, item in enumerate([*(f"i-{k:02d}" for k in range(6)), "g-0", "g-1", "g-2", "g-3"])
        for n, worker in enumerate(WORKERS)
    ]
    import_annotations(study=study, stream=jsonl(*records), fmt="jsonl")
    on_checks = sum(1 for r in records if r["item"] in {"g-0", "g-1"})
    assert on_checks == 6

    report = build_report(study, OPTIONS)
    assert report["n_annotations"] == len(records) - on_checks == 24
    assert report["n_items_check"] == 2 and report["checks_in_agreement"] is False
    assert "the 6 label(s) they got as ordinary items are left out" in report["checks_rule"]
    assert not {"g-0", "g-1"} & set(study_frame(study).labels["item"])
    assert sum(label_counts(study_frame(study, OPTIONS)).values()) == report["n_annotations_in_agreement"] == 24
    assert_heatmap_is_the_table(study, report, OPTIONS)
    assert report["agreement"]["fleiss_kappa"]["n_items"] == 8
    write_hf_dataset(study, tmp_path / "hf")
    annotations = pd.read_parquet(tmp_path / "hf" / "data" / "annotations")
    assert len(annotations) == 24 and not {"g-0", "g-1"} & set(annotations["item"])
    items = pd.read_parquet(tmp_path / "hf" / "data" / "items").set_index("item")
    assert list(items.loc["g-0", "labels"]) == [] and items.loc["g-0", "is_check"]

    Study.objects.filter(pk=study.pk).update(checks_in_agreement=True)
    study.refresh_from_db()
    counted = build_report(study, OPTIONS)
    assert counted["n_annotations"] == len(records) == 30
    assert counted["agreement"]["fleiss_kappa"]["n_items"] == 10
    assert "count like every other item" in counted["checks_rule"]
    assert sum(label_counts(study_frame(study, OPTIONS)).values()) == 30


# --- participants: the report, charts, CSV and HF export leave out the same ones --------------------------


def _working(link, pid: str) -> Participant:
    participant = crowd.arrive(link=link, ids=crowd.PanelIds(participant=pid, study="S1", session="X1"))
    crowd.accept_consent(participant=participant)
    crowd.start(participant=participant, link=link)
    return participant


def _label_one(participant: Participant, link, label: str) -> None:
    user = participant.member.user
    assignment = claim_next(user=user, study=participant.study)
    assert assignment is not None
    submit(user=user, study=participant.study, assignment_id=assignment.pk, answer=SubmittedAnswer(label=label))
    crowd.after_item(participant=participant, link=link)
    participant.refresh_from_db()


def _csv_value(text: str, key: str) -> str:
    rows = list(csv.DictReader(io.StringIO(text)))
    [row] = [row for row in rows if row["section"] == "study" and row["statistic"] == key]
    return row["value"]


def test_screened_out_and_withdrawn_participants_count_alike_everywhere(tmp_path):
    study, link = crowd_study("one-rule-crowd", items=4, gold=0, items_per_participant=2, n=3)
    kept, dropped, gone = _working(link, "k"), _working(link, "d"), _working(link, "w")
    _label_one(kept, link, "supported")
    _label_one(dropped, link, "contradicted")
    _label_one(gone, link, "inconclusive")
    crowd.end(participant=dropped, status=Participant.Status.SCREENED_OUT)
    crowd.withdraw(participant=gone)

    for include_screened_out, expected in ((False, {kept}), (True, {kept, dropped})):
        options = ReportOptions(n_resamples=0, include_screened_out=include_screened_out)
        names = {p.member.pseudonym for p in expected}
        report = build_report(study, options)
        assert {entry["annotator"] for entry in report["annotators"]} == names
        assert report["n_annotations"] == len(names)
        assert int(_csv_value(report_csv(report), "n_annotations")) == len(names)
        frame = study_frame(study, options)
        assert set(frame.labels["annotator"]) == names
        assert sum(label_counts(frame).values()) == len(names)
        assert f"(n = {len(names)})" in chart_figure(study, "labels", options).axes[0].get_title()

    write_hf_dataset(study, tmp_path / "hf")
    annotations = pd.read_parquet(tmp_path / "hf" / "data" / "annotations")
    assert set(annotations["annotator"]) == {kept.member.pseudonym}  # as the report by default
    items = pd.read_parquet(tmp_path / "hf" / "data" / "items")
    assert sorted(name for names in items["annotators"] for name in names) == [kept.member.pseudonym]


def test_the_verifiers_reference_is_the_frames_labels_under_the_study_rule(researcher):
    """``StudyFrame.verifier_reference`` (what metaeval.verifiers.report scores verifiers against): every
    counted human label, gold items' too where gold is in agreement, and an adjudicated item as one
    rating "adjudicated" in place of its annotators' labels; checked against the stored answers."""

    def rows(frame: pd.DataFrame) -> list[tuple]:
        return sorted(frame[["item", "annotator", "label"]].itertuples(index=False, name=None))

    def stored(study) -> list[tuple]:
        names = dict(StudyMember.objects.filter(study=study).values_list("user_id", "pseudonym"))
        answers = Annotation.objects.filter(study=study).values_list(
            "assignment__item__external_id", "assignment__annotator_id", "label"
        )
        return sorted((item, names[user], label) for item, user, label in answers)

    plain = verification_study("verifier-ref", gold_in_agreement=True, n_gold=0)
    ours, _ = study_frame(plain).verifier_reference()
    assert rows(ours) == stored(plain) and len(ours) == 90
    with_gold = verification_study("verifier-ref-gold", gold_in_agreement=True)
    ours, _ = study_frame(with_gold).verifier_reference()
    assert ours["item"].nunique() == 30  # gold items are in agreement here, so in the verifiers' reference too
    without_gold = verification_study("verifier-ref-nogold", gold_in_agreement=False)
    ours, _ = study_frame(without_gold).verifier_reference()
    assert ours["item"].nunique() == 30 - Item.objects.filter(study=without_gold).exclude(gold_label="").count()
    add_members(study=plain, usernames=[researcher.username], role="researcher")
    adjudicate(
        item=Item.objects.get(study=plain, external_id="c-00"),
        adjudicator=researcher,
        verdict=verdict_for(plain, label="inconclusive"),
    )
    ours, sentence = study_frame(plain).verifier_reference()
    expected = [row for row in stored(plain) if row[0] != "c-00"] + [("c-00", "adjudicated", "inconclusive")]
    assert rows(ours) == sorted(expected)
    assert "adjudicated labels where given (1 items)" in sentence


def test_making_an_item_a_check_gives_the_study_a_new_fingerprint():
    """Item.is_check follows the link's lists by UPDATE (no updated_at): a cached report must not outlive it."""
    from metaeval.selectors import report_fingerprint

    study, _ = crowd_study("checks-key", items=2, gold=2, n=2)
    before = report_fingerprint(study)
    crowd.configure_link(study=study, changes={"attention_items": ["g-0"], "attention_every": 2})
    study.refresh_from_db()
    assert report_fingerprint(study) != before
