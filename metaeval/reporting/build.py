"""The report service: one JSON-ready dict that the page, the CLI and the API all render.

Labels are read through ``metaeval.study_frame`` (the one read every number that leaves
Claimlab comes from: its rules for participants, check items, gold items and the reference),
statistics through ``metaeval.stats``; this module only decides which rows feed which section.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from annotation.adjudication.selectors import adjudication_summary
from annotation.crowd.selectors import exclusion_rule
from annotation.models import Study
from annotation.transfer.adapters.source_labels import rule as source_labels_rule
from annotation.workbench.training import training_accuracy
from metaeval import study_frame as frames
from metaeval.verifiers.pairwise_report import pairwise_judge_report
from metaeval.verifiers.report import verifier_report
from metaeval.verifiers.selectors import current_predictions, verifier_verdicts

from . import agreement_beside
from .adaptive import adaptive_overlap_section
from .adjudication_queue import queue_size_with
from .agreement import AgreementInputs, categories_for
from .annotator_quality import reference_and_quality
from .conditions import conditions_section
from .disagreements import disagreements
from .options import ReportOptions
from .ppi import ppi_section
from .preference import preference_section
from .questionnaires import questionnaires_section
from .questions import questions_section
from .scores import per_response_guard, scores_section
from .verifier_comparisons import verifier_comparisons
from .verifier_reference import verifiers_vs_reference

__all__ = ["build_report", "FIRST_SECTIONS_PENDING", "GOLD_RULE", "GOLD_INCLUDED_RULE", "gold_rule"]

GOLD_RULE = (
    "items with a gold label are quality-control items: they are left out of agreement, preference "
    "analysis and the disagreement list, and kept in the factuality scores"
)
GOLD_INCLUDED_RULE = (
    "items with a gold label count like every other item in agreement, preference analysis, the "
    "disagreement list and the factuality scores (a study setting: gold items in agreement)"
)


#: What the first sections of a report (``on_first_sections``) hold in place of the sections that
#: come later (``binary`` and ``by_domain`` are None in them too): nothing, in the whole report's key order.
FIRST_SECTIONS_PENDING: dict[str, Any] = {
    "preference": None,
    "reference": None,
    "annotator_quality": None,
    "scores": None,
    "ppi": None,
    "disagreements": [],
    "n_disagreements": None,
    "adjudication": None,
    "verifiers": None,
    "pairwise_judges": None,
    "verifiers_vs_reference": None,
    "verifier_comparisons": None,
    "questions": None,
    "conditions": None,
    "training": None,
    "questionnaires": None,
}


def gold_rule(study: Study) -> str:
    """How this study's report treats gold items (the study's `gold_in_agreement` setting)."""
    return GOLD_INCLUDED_RULE if study.gold_in_agreement else GOLD_RULE


def _hand_over_first(
    hand_over: Callable[[dict[str, Any]], None], counts: dict[str, Any], agreement: dict[str, Any]
) -> None:
    hand_over({**counts, **agreement, **FIRST_SECTIONS_PENDING})


def build_report(
    study: Study,
    options: ReportOptions | None = None,
    *,
    on_first_sections: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """The study's full meta-evaluation report (issue 4's JSON shape, with more keys).

    ``on_first_sections`` is handed the counts, the agreement on all labels and the human
    ceiling as soon as they are computed (one bootstrap; the later sections as in
    ``FIRST_SECTIONS_PENDING``), so a big study's first report can show them while the rest
    (binary and per-domain agreement, reference, quality, scores, disagreements...) is computed.

    The agreement sections are computed beside the later sections (``agreement_beside``): a big study's
    overall agreement and per-domain agreement in a forked process, which hands the first sections over as soon
    as they come (then ``on_first_sections`` is called on another thread than the caller's); a smaller study's
    overall agreement first, on the caller's thread, and its per-domain agreement on a thread of its own.
    """
    options = options or ReportOptions()
    crowd = options.include_screened_out
    # Every number below reads the one study frame (metaeval.study_frame: participants, check items,
    # the gold setting, the reference rule, adjudications). The counts and the first sections come
    # from its labels as codes; their strings are laid out (0.1 s at 300,000 labels) only for the
    # later sections (metaeval.label_rows).
    frame = frames.study_frame(study, options)
    rows = frame.rows
    items = frame.items
    n_items, n_items_gold = len(items), int((items["gold_label"] != "").sum())
    per_annotator = rows.per_annotator()
    report: dict[str, Any] = {
        "study": study.slug,
        "name": study.name,
        "kind": study.kind,
        "labels": categories_for(study),
        "systems": list(study.systems),
        "annotators_per_item": study.slots_per_item,
        "adaptive_overlap": adaptive_overlap_section(study),
        "options": options.as_dict(),
        "n_items": n_items,
        "n_items_annotated": rows.n_items(),
        "n_items_gold": n_items_gold,
        "n_items_check": len(frame.check_item_ids),
        "gold_rule": gold_rule(study),
        "gold_in_agreement": study.gold_in_agreement,
        "checks_rule": frame.checks_rule(),
        "checks_in_agreement": study.checks_in_agreement,
        "participants_rule": exclusion_rule(study, include_screened_out=crowd),
        "source_labels_rule": source_labels_rule(study),
        "n_annotators": len(per_annotator),
        "n_annotations": len(rows),
        "n_annotations_in_agreement": len(frame.agreed_rows),
        "annotators": [{"annotator": name, "n_annotations": n} for name, n in per_annotator],
    }
    on_overall = partial(_hand_over_first, on_first_sections, dict(report)) if on_first_sections else None
    agreement = agreement_beside.start(AgreementInputs.of(frame.agreed_rows, study, options), on_overall)
    report.update(agreement.so_far)  # in their place; what is computed beside the build is put in at its end
    try:
        _later_sections(report, frame, study, options)
        report.update(agreement.finish())
    except BaseException:
        agreement.cancel()
        raise
    return report


def _later_sections(report: dict[str, Any], frame: frames.StudyFrame, study: Study, options: ReportOptions) -> None:
    """The sections after the agreement's, into ``report`` in its order (they read the database: the build's thread)."""
    crowd = options.include_screened_out
    items = frame.items
    report["preference"] = preference_section(frame.agreed, study, options)
    evidence = frame.evidence() if not study.is_preference else None
    reference, report["reference"], report["annotator_quality"] = reference_and_quality(frame, options)
    labels = frame.labels
    # One read of the verifiers' predictions for every section, sharing the frame's items (verifiers/selectors.py)
    predictions = current_predictions(study, frame.rows.items)
    verdicts = verifier_verdicts(study, predictions)
    # The two sections that read the predictions' rows are computed now, and the rows let go before the scores
    # and the estimates (issue 35: with a million predictions they held ~240 MB through the build's peak);
    # they take their places in the report below.
    verifiers = verifier_report(
        study, n_resamples=options.n_resamples, seed=options.seed, frame=frame, predictions=predictions
    )
    verifiers_against_reference = verifiers_vs_reference(study, reference, options, predictions)
    del predictions
    rule = (reference.rule, reference.labels)
    # The later sections read the frame's codes where they have them (frames.SHARED_CODES): the human
    # majority's table that the reference built, the rows for the disagreements and the adjudication queue.
    shared = frame.reference_inputs.codes is not None
    human_table = (lambda: frame.reference_inputs.table) if shared else None
    report["scores"] = (
        per_response_guard(
            items, lambda: scores_section(labels, items, evidence, study, options, verdicts, rule, human_table)
        )
        if evidence is not None
        else None
    )
    report["ppi"] = per_response_guard(items, lambda: ppi_section(items, study, options, verdicts, rule))
    report["disagreements"] = disagreements(frame.agreed_rows if shared else frame.agreed)
    report["n_disagreements"] = len(report["disagreements"])
    queue = queue_size_with(study, frame.rows if shared else labels, include_screened_out=crowd)
    report["adjudication"] = {**adjudication_summary(study, queue=queue), "reference_rule": study.reference_rule}
    report["verifiers"] = verifiers
    report["pairwise_judges"] = pairwise_judge_report(
        study, n_resamples=options.n_resamples, seed=options.seed, frame=frame
    )
    report["verifiers_vs_reference"] = verifiers_against_reference
    report["verifier_comparisons"] = verifier_comparisons(study, reference, options, verdicts)
    report["questions"] = questions_section(frame, study, options)
    report["conditions"] = conditions_section(frame, study, options, verdicts)
    # Training answers are no labels of the study: only each annotator's accuracy on the training items.
    report["training"] = (
        {"items": [entry["item"] for entry in study.training], "annotators": training_accuracy(study)}
        if study.training
        else None
    )
    report["questionnaires"] = questionnaires_section(study)
