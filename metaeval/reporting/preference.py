"""The preference section: wins / losses / ties, sign tests, position bias, 3-way agreement.

Labels are stored in system space (a/b = the study's declared systems), so
counting needs no display information; position bias uses the stored
``left_system`` of each assignment ("List 1").
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from annotation.models import Study
from metaeval import stats

from .agreement import agreement_table, unavailable
from .options import ReportOptions

__all__ = ["preference_section"]

# One representative 5-point label per direction, to test item-level majorities.
_DIRECTION_LABEL = {"a": "a_slight", "tie": "tie", "b": "b_slight"}


def _item_majority_labels(table: stats.RatingTable) -> tuple[list[str], dict[str, int]]:
    """Per item, the strict-majority direction (a / tie / b) as a 5-point label."""
    three = table.collapse(stats.PREFERENCE_3WAY, ["a", "tie", "b"])
    vote = stats.majority_vote(three)
    labels = [_DIRECTION_LABEL[x] for x in vote.labels().tolist()]
    return labels, {"n_items_judged": three.n_items, "n_items_without_majority": vote.n_no_majority}


def _position_bias(frame: pd.DataFrame, systems: tuple[str, str]) -> dict[str, Any]:
    unknown = int((frame["left_system"] == "").sum())
    if unknown:
        return stats.Estimate.undefined(
            f"the display order is unknown for {unknown} judgements, so position bias cannot be tested",
            0,
            n_judgements_without_order=unknown,
        ).to_dict()
    winner = stats.winners(frame["label"], systems)
    return stats.position_bias(frame["left_system"].to_numpy(), winner).to_dict()


def preference_section(frame: pd.DataFrame, study: Study, options: ReportOptions) -> dict[str, Any] | None:
    """Everything about which system annotators preferred; None for other kinds of study."""
    if not study.is_preference:
        return None
    if len(study.systems) != 2:
        return unavailable("the study has no two declared systems yet")
    systems = (study.systems[0], study.systems[1])
    on_scale = frame["label"].isin(stats.PREFERENCE_LABELS).to_numpy()
    judged = frame.loc[on_scale]
    table, _ = agreement_table(frame, study)
    majority_labels, majority_counts = _item_majority_labels(table)
    by_domain = {}
    for domain, rows in judged.groupby("domain", sort=True):
        by_domain[str(domain)] = {
            **stats.preference_counts(rows["label"], systems),
            "sign_test": stats.sign_test(rows["label"], systems, confidence=options.confidence).to_dict(),
        }
    three_way = stats.agreement_summary(
        table.collapse(stats.PREFERENCE_3WAY, ["a", "tie", "b"]),
        n_resamples=options.n_resamples,
        ci=options.n_resamples > 0,
        confidence=options.confidence,
        seed=options.seed,
        n_raters=study.slots_per_item,
    )
    return {
        "systems": list(systems),
        "n_judgements": len(judged),
        "n_judgements_off_scale": int((~on_scale).sum()),
        "counts": stats.preference_counts(judged["label"], systems),
        "by_domain": by_domain,
        "sign_test": {
            **stats.sign_test(judged["label"], systems, confidence=options.confidence).to_dict(),
            "unit": "judgement (judgements of one item are not independent; see sign_test_items)",
        },
        "sign_test_items": {
            **stats.sign_test(
                np.asarray(majority_labels, dtype=object), systems, confidence=options.confidence
            ).to_dict(),
            **majority_counts,
            "unit": "item: the strict-majority direction of its judgements; items without one are left out",
        },
        "position_bias": _position_bias(judged, systems),
        "three_way": three_way,
        "ordinal_agreement": "the report's 'agreement' is on the 5-point scale: Krippendorff ordinal alpha and "
        "linearly / quadratically weighted Cohen kappa are there",
    }
