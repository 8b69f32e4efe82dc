"""The real factscore-pref demo study (fixtures/factscore) with seeded human judgements and a rule-based judge.

The demo has no human preference labels, so tests draw them here with a
seeded RNG: each annotator agrees with a simple rule ("the longer list is
better") 60% of the time and otherwise picks any point of the scale. The
loopback judge (``judge_answer``) follows the same rule and, on lists of
equal length, always says "List 1 slightly better": a known position bias.
Every expected number is computed by the tests from these records.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

from annotation.members.services import add_members
from annotation.models import Study
from annotation.studies.services import create_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from tests.conftest import jsonl

ITEMS = Path(__file__).resolve().parents[2] / "fixtures" / "factscore" / "items.jsonl"
SYSTEMS = ("model_facts", "human_facts")
SCALE = ("a_strong", "a_slight", "tie", "b_slight", "b_strong")
WORKERS = ("w1", "w2", "w3")
#: Not the demo's own slug: tests/metaeval loads the demo itself for some modules (package-scoped).
SLUG = "factscore-pref-seeded"


def demo_items() -> list[dict]:
    return [json.loads(line) for line in ITEMS.read_text(encoding="utf-8").splitlines() if line.strip()]


def rule_label(n_a: int, n_b: int) -> str:
    """The longer list wins: by 3 or more facts much better, by 1-2 slightly; equal length a tie."""
    diff = n_b - n_a
    if diff == 0:
        return "tie"
    side = "b" if diff > 0 else "a"
    return f"{side}_{'strong' if abs(diff) >= 3 else 'slight'}"


def human_records(items: list[dict], seed: int = 20261130) -> list[dict]:
    """3 judgements per item, in the import format, counterbalanced left/right."""
    rng = random.Random(seed)
    records = []
    for n, item in enumerate(items):
        expected = rule_label(len(item["lists"][SYSTEMS[0]]), len(item["lists"][SYSTEMS[1]]))
        for slot, worker in enumerate(WORKERS):
            label = expected if rng.random() < 0.6 else rng.choice(SCALE)
            record = {"item": item["id"], "annotator": worker, "left_system": SYSTEMS[(n + slot) % 2]}
            if label == "tie":
                record["preferred"] = "tie"
            else:
                side, strength = label.split("_")
                record.update(preferred=SYSTEMS["ab".index(side)], strength=strength)
            records.append(record)
    return records


def record_label(record: dict) -> str:
    if record["preferred"] == "tie":
        return "tie"
    return f"{'ab'[SYSTEMS.index(record['preferred'])]}_{record['strength']}"


def make_study(*, researcher=None, with_labels: bool = True, slug: str = SLUG) -> Study:
    """The demo study as fixtures/studies.json defines it, its 120 real items, and the seeded judgements."""
    study = create_study(
        slug=slug,
        name="FActScore: model vs. human atomic-fact lists",
        kind="preference",
        annotators_per_item=3,
        systems=list(SYSTEMS),
    )
    if researcher is not None:
        add_members(study=study, usernames=[researcher.username], role="researcher")
    import_items(study=study, stream=ITEMS.open("rb"), fmt="jsonl")
    if with_labels:
        import_annotations(study=study, stream=jsonl(*human_records(demo_items())), fmt="jsonl")
    return study


_LIST = re.compile(r"List (\d):\n(.*?)(?=\n\nList \d:|\Z)", re.DOTALL)


def judge_answer(prompt: str) -> str:
    """The loopback judge: the longer list wins; equal lengths -> "List 1 slightly better" (position bias)."""
    lists = dict(_LIST.findall(prompt))
    n1, n2 = (len([line for line in lists.get(key, "").splitlines() if line.strip()]) for key in ("1", "2"))
    if n1 == n2:
        return "Both are fine; the first reads better.\nList 1 slightly better"
    winner = "1" if n1 > n2 else "2"
    strength = "much" if abs(n1 - n2) >= 3 else "slightly"
    return f"One list covers more.\nList {winner} {strength} better"


def expected_order_labels(item: dict) -> tuple[str, str]:
    """What the loopback judge's two orders come to in system space (A's list first, then B's)."""
    n_a, n_b = len(item["lists"][SYSTEMS[0]]), len(item["lists"][SYSTEMS[1]])
    if n_a == n_b:
        return "a_slight", "b_slight"  # List 1 both times: A, then B
    label = rule_label(n_a, n_b)
    return label, label
