"""FActScore preset: True/False question after titled passages; the last whole-word verdict counts."""

from __future__ import annotations

import pytest

from metaeval.verifiers.presets import get_preset
from tests.verifiers.evidence import CLAIM, EVIDENCE

FACTSCORE = get_preset("factscore")


def test_prompt_lists_titled_passages_then_asks_true_or_false():
    task = FACTSCORE.render(CLAIM, "", EVIDENCE)[-1]["content"]
    assert task.index("Title: Mount Katahdin - Wikipedia") < task.index(f"Statement: {CLAIM}")
    assert "Source: https://en.wikipedia.org/wiki/Mount_Katahdin" in task
    assert task.rstrip().endswith("True or False?")


CASES = [
    ("True", "supported", "ok"),
    ("False.", "unsupported", "ok"),
    ("**False**", "unsupported", "ok"),
    ("true", "supported", "ok"),
    # both words: the last one decides (FActScore itself would compare first positions and say True here)
    (
        "It is not true that Katahdin is 6,288.2 feet tall; the passage gives 5,269 feet, so the answer is False.",
        "unsupported",
        "ok",
    ),
    ("The passage says Katahdin is 5,269 feet, so the statement is false.\nAnswer: False", "unsupported", "ok"),
    (
        "At first I thought False, but the passage does say 5,269 feet... wait, the claim says 6,288.2. False.",
        "unsupported",
        "ok",
    ),
    (
        "False. Actually, re-reading the passage, it is the highest mountain in Maine, which is what is asked.\nTrue",
        "supported",
        "ok",
    ),
    ("The statement is untrue.", "unsupported", "ok"),
    ("The statement is not true.", "unsupported", "ok"),
    ("False.\n\nThe passage gives 5,269 feet (1,606 m), not 6,288.2 feet.", "unsupported", "fallback"),
    ("True or False? The passages do not say.", None, "unparseable"),
    ("I cannot determine whether the statement is true from these passages.", None, "unparseable"),
    ("The passages do not mention the height in meters.", None, "unparseable"),
]


@pytest.mark.parametrize(("raw", "label", "status"), CASES)
def test_parse(raw, label, status):
    result = FACTSCORE.parse(raw)
    assert (result.label, result.status, result.raw) == (label, status, raw)


def test_words_containing_true_or_false_are_not_verdicts():
    assert FACTSCORE.parse("The construal of the falsetto register is untrustworthy.").label is None
