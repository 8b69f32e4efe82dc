"""A seeded preference study (60 items x 3 workers) for the report tests, built through the services.

Shared by test_report_preference, test_report_honesty and test_report_latex through the fixtures
in tests/metaeval/conftest.py, so that no test module imports another.
"""

from __future__ import annotations

import random

import numpy as np
import pandas as pd

from annotation.members.services import add_members
from annotation.models import Study
from annotation.studies.services import create_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from metaeval.reporting import ReportOptions, build_report
from tests.conftest import jsonl, preference_item

SYSTEMS = ("veriscore", "safe")
SCALE = ["a_strong", "a_slight", "tie", "b_slight", "b_strong"]
WORKERS = ("w1", "w2", "w3")


def _records() -> list[dict]:
    """60 items x 3 workers; veriscore tends to win, and List 1 a little more often still."""
    rng = random.Random(20240611)
    records = []
    for n in range(60):
        item_bias = rng.choice([0.4, 0.6, 0.8])
        for slot, worker in enumerate(WORKERS):
            left = SYSTEMS[(n + slot) % 2]  # counterbalanced by slot parity
            r = rng.random() + (-0.1 if left == "veriscore" else 0.1)  # the left list wins more often
            if r < item_bias * 0.5:
                preferred, strength = "veriscore", "strong"
            elif r < item_bias:
                preferred, strength = "veriscore", "slight"
            elif r < item_bias + 0.1:
                preferred, strength = "tie", ""
            elif r < item_bias + 0.1 + (1 - item_bias) * 0.5:
                preferred, strength = "safe", "slight"
            else:
                preferred, strength = "safe", "strong"
            record = {"item": f"p-{n}", "annotator": worker, "preferred": preferred, "left_system": left}
            if strength:
                record["strength"] = strength
            records.append(record)
    return records


def preference_label(record: dict) -> str:
    if record["preferred"] == "tie":
        return "tie"
    return ("a_" if record["preferred"] == SYSTEMS[0] else "b_") + record["strength"]


def seeded_records() -> list[dict]:
    return _records()


def build_study(researcher) -> Study:
    """The study, its 60 items and the seeded labels, with `researcher` as its researcher."""
    study = create_study(
        slug="pref-report", name="Preference report", kind="preference", systems=list(SYSTEMS), annotators_per_item=3
    )
    add_members(study=study, usernames=[researcher.username], role="researcher")
    items = [
        preference_item(
            f"p-{n}",
            domain="biography" if n < 30 else "science",
            lists={"veriscore": ["A claim."], "safe": ["Another claim."]},
        )
        for n in range(60)
    ]
    import_items(study=study, stream=jsonl(*items), fmt="jsonl")
    import_annotations(study=study, stream=jsonl(*_records()), fmt="jsonl")
    return study


def full_report(study: Study) -> dict:
    return build_report(study, ReportOptions(by_domain=True, binary=True))


def label_frame(records: list[dict]) -> pd.DataFrame:
    """The seeded labels with their canonical label, scale code and domain."""
    out = pd.DataFrame(records)
    out["label"] = [preference_label(r) for r in records]
    out["code"] = out["label"].map(SCALE.index)
    out["domain"] = np.where(out["item"].str[2:].astype(int) < 30, "biography", "science")
    return out
