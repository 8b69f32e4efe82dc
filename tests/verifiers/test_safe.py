"""SAFE preset: reasoning, then [Supported] or [Not Supported]; the last bracketed verdict counts."""

from __future__ import annotations

import pytest

from metaeval.verifiers.presets import get_preset
from tests.verifiers.evidence import CLAIM, EVIDENCE

SAFE = get_preset("safe")


def test_prompt_numbers_the_results_and_asks_for_a_bracketed_answer():
    messages = SAFE.render(CLAIM, "", EVIDENCE)
    assert "[Supported] or [Not Supported]" in messages[0]["content"]
    task = messages[-1]["content"]
    assert "[1] Mount Katahdin - Wikipedia (https://en.wikipedia.org/wiki/Mount_Katahdin)\nKatahdin is" in task
    assert "[3] Tallest buildings in Tennessee (https://example.org/towers?city=nashville&state=tn)" in task


CASES = [
    (
        "1. The statement says Katahdin is 6,288.2 ft.\n2. Result [1] says 5,269 ft.\n"
        "3. These disagree.\n\n[Not Supported]",
        "unsupported",
        "ok",
    ),
    ("Result [1] confirms the height.\n[Supported]", "supported", "ok"),
    ("[Supported].", "supported", "ok"),
    ("Final answer: **[Not Supported]**", "unsupported", "ok"),
    ("[not_supported]", "unsupported", "ok"),
    # a first conclusion corrected at the end: the last bracketed verdict wins
    ("Initially this looks [Supported], but result [1] gives 5,269 ft, so [Not Supported].", "unsupported", "ok"),
    # options echoed before the verdict are not verdicts
    ("I must answer [Supported] or [Not Supported]. The height differs. [Not Supported]", "unsupported", "ok"),
    ("The statement is therefore supported.\n\nFinal answer: Supported", "supported", "fallback"),
    ("Final answer: Not Supported.", "unsupported", "fallback"),
    ("The answer must be [Supported] or [Not Supported].", None, "unparseable"),
    ("Result [2] talks about the trail; I am unsure.", None, "unparseable"),
]


@pytest.mark.parametrize(("raw", "label", "status"), CASES)
def test_parse(raw, label, status):
    result = SAFE.parse(raw)
    assert (result.label, result.status, result.raw) == (label, status, raw)


def test_rationale_is_the_reasoning_before_the_answer():
    result = SAFE.parse("Result [1] gives 5,269 ft.\n[Not Supported]")
    assert result.rationale == "Result [1] gives 5,269 ft."
