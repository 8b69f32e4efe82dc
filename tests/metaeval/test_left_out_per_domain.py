"""Why Fleiss' kappa left items out, per domain: each domain's causes count that domain's items only.

``left_out_causes`` reads the labels each item received aligned to the table's items without a lookup where they
are the same items (the table's own counts, or a domain's share of them); where some labels are off the scale the
counts come from all the labels and are looked up. Both ways are checked against a count in plain pandas.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from annotation.studies.services import create_study
from metaeval.reporting import ReportOptions
from metaeval.reporting.agreement import agreement_sections

LABELS = ["supported", "contradicted", "inconclusive"]
N_RATERS = 3


def _labels(seed: int, off_scale: bool) -> pd.DataFrame:
    """Items in three domains with 1 to 4 labels each (so every cause occurs), some off the scale when asked."""
    rng = np.random.default_rng(seed)
    rows = []
    for item in range(240):
        domain = ["bio", "law", "sci"][item % 3]
        for annotator in range(int(rng.choice([1, 2, 3, 3, 3, 4]))):
            label = str(rng.choice([*LABELS, "skip"] if off_scale else LABELS))
            rows.append({"item": f"i{item:03d}", "annotator": f"a{annotator}", "label": label, "domain": domain})
    return pd.DataFrame(rows)


def _expected(frame: pd.DataFrame, domain: str, dropped: list[str]) -> dict:
    """The causes counted directly: over the domain's items with a label on the scale."""
    mine = frame[frame["domain"] == domain]
    given = mine.groupby("item").size()
    kept = mine[mine["label"].isin(LABELS)].groupby("item").size()
    received = given.reindex(kept.index)
    left = kept != N_RATERS
    return {
        "fewer_given": int((left & (received < N_RATERS)).sum()),
        "lost_dropped": int((left & (received >= N_RATERS) & (kept < N_RATERS)).sum()),
        "more_given": int((left & (kept > N_RATERS)).sum()),
        "dropped_labels": dropped,
    }


@pytest.mark.django_db
@pytest.mark.parametrize("off_scale", [False, True])
def test_each_domains_left_out_causes_count_its_own_items(off_scale):
    study = create_study(slug=f"left-{int(off_scale)}", name="left", kind="verification", labels=LABELS)
    frame = _labels(seed=7, off_scale=off_scale)
    sections = agreement_sections(frame, study, ReportOptions(by_domain=True))
    dropped = ["skip"] if off_scale else []
    causes = {domain: entry["fleiss_kappa"]["left_out_causes"] for domain, entry in sections["by_domain"].items()}
    assert causes == {domain: _expected(frame, domain, dropped) for domain in ("bio", "law", "sci")}
    assert all(entry["fewer_given"] and entry["more_given"] for entry in causes.values())
    assert any(entry["lost_dropped"] for entry in causes.values()) == off_scale
    whole = sections["agreement"]["fleiss_kappa"]["left_out_causes"]
    assert whole == {key: sum(c[key] for c in causes.values()) for key in whole if key != "dropped_labels"} | {
        "dropped_labels": dropped
    }
