"""`manage.py replay_adaptive`: the README's XSum figure, and a clear error for a file it cannot read."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

XSUM = (
    Path(__file__).resolve().parents[1] / "data" / "xsum_hallucination" / "factuality_annotations_xsum_summaries.csv.gz"
)


def test_xsum_two_then_a_third_saves_the_labels_the_readme_states():
    out = StringIO()
    call_command(
        "replay_adaptive", str(XSUM), "--item=bbcid,system", "--label=is_factual", "--order=worker_id", stdout=out
    )
    result = json.loads(out.getvalue())
    assert (result["n_labels"], result["labels_saved"], result["n_items_closed_early"]) == (5564, 1774, 1774)
    assert result["n_reference_agrees"] == result["n_items_compared"] == 1857
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "1,774 of 5,564 labels (31.9 %" in " ".join(readme.split())


def test_a_missing_column_is_named(tmp_path):
    path = tmp_path / "labels.csv"
    path.write_text("item,answer\na,yes\n", encoding="utf-8")
    with pytest.raises(CommandError, match="has no column\\(s\\) label; it has item, answer"):
        call_command("replay_adaptive", str(path))


def test_an_impossible_rule_is_named(tmp_path):
    path = tmp_path / "labels.csv"
    path.write_text("item,label\na,yes\na,yes\n", encoding="utf-8")
    with pytest.raises(CommandError, match="n_min"):
        call_command("replay_adaptive", str(path), "--n-min=0")
