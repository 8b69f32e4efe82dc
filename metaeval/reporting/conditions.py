"""The report's comparison of a study's between-subject conditions (issue 32): automation bias.

Per condition: agreement with the reference label, agreement with the suggestion's verifier (the
automation-bias measure: do annotators shown its prediction agree with it more?) and time per
item; each other condition against the baseline with a cluster-bootstrap interval and a
permutation test over annotators (``stats.compare_conditions``). The labels are the study
frame's counted ones (the same rule as every other number), each with its annotator's condition.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from annotation.conditions.definitions import EXACT_N_RULES
from annotation.models import Study
from metaeval import selectors, stats
from metaeval.study_frame import StudyFrame

from .options import ReportOptions

REFERENCE_NOTE = (
    "agreement with the reference compares each label with its item's reference label ({rule}); where the "
    "reference is the annotators' own majority, each label takes part in its own reference, so prefer gold or "
    "adjudicated references for this comparison"
)


def conditions_section(
    frame: StudyFrame, study: Study, options: ReportOptions, verdicts: dict[str, pd.Series]
) -> dict[str, Any] | None:
    """None when the study declares no conditions."""
    if not study.conditions:
        return None
    labels = frame.agreed[["item", "annotator", "label"]].reset_index(drop=True)
    times = selectors.answer_times(study, include_screened_out=frame.options.include_screened_out)
    rows = labels.merge(times, on=["item", "annotator"], how="left")
    conditions = selectors.annotator_conditions(study)
    rows["condition"] = rows["annotator"].map(conditions).replace("", None)
    rows["reference"] = rows["item"].map(frame.reference.labels)
    verifier = next((c["verifier"] for c in study.conditions if c["verifier"]), "")
    if verifier and verifier in verdicts:
        rows["verifier"] = rows["item"].map(verdicts[verifier])
    baseline = next((c["key"] for c in study.conditions if not c["verifier"]), study.conditions[0]["key"])
    present = set(rows["condition"].dropna())
    section: dict[str, Any] = {
        "conditions": study.conditions,
        "baseline": baseline,
        "verifier": verifier,
        "verifier_missing": bool(verifier) and verifier not in verdicts,
        "exact_n_rule": EXACT_N_RULES[study.exact_n_per],
        "reference_note": REFERENCE_NOTE.format(rule=frame.rule),
        "people": [
            {**c, "n_people": sum(1 for value in conditions.values() if value == c["key"])} for c in study.conditions
        ],
    }
    if baseline not in present:
        section["comparison"] = None
        section["reason"] = f"no counted label comes from the baseline condition {baseline!r} yet"
        return section
    section["comparison"] = stats.json_ready(
        stats.compare_conditions(rows, baseline=baseline, n_boot=options.n_resamples, seed=options.seed)
    )
    return section
