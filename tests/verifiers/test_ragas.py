"""RAGAS preset: JSON verdicts 1/0 with reasons; fences tolerated, repairs recorded as fallback."""

from __future__ import annotations

import pytest

from metaeval.verifiers.presets import get_preset
from tests.verifiers.evidence import CLAIM, EVIDENCE

RAGAS = get_preset("ragas")


def test_prompt_gives_the_evidence_as_context_and_the_claim_as_the_statement():
    messages = RAGAS.render(CLAIM, "", EVIDENCE)
    assert '"verdict": 1' in messages[0]["content"]
    task = messages[-1]["content"]
    assert task.index("Context:") < task.index("[1] Mount Katahdin - Wikipedia") < task.index(f"1. {CLAIM}")


OBJECT = (
    '{"statements": [{"statement": "Mount Katahdin is 6,288.2 feet tall.", '
    '"reason": "The context gives 5,269 feet.", "verdict": 0}]}'
)

CASES = [
    (OBJECT, "unsupported", "ok", 0.0),
    (
        '[{"statement": "Mount Katahdin is 6,288.2 feet tall.", "reason": "Stated in [1].", "verdict": 1}]',
        "supported",
        "ok",
        1.0,
    ),
    ("```json\n" + OBJECT + "\n```", "unsupported", "ok", 0.0),
    (
        '{"statements": [{"statement": "Katahdin is in Maine.", "reason": "[1] says so.", "verdict": 1}, '
        '{"statement": "It is 6,288.2 feet tall.", "reason": "[1] says 5,269 feet.", "verdict": 0}]}',
        "unsupported",
        "ok",
        0.5,
    ),
    ('{"statements": [{"statement": "s", "reason": "r", "verdict": "1"}]}', "supported", "ok", 1.0),
    ("Here is my assessment:\n\n" + OBJECT + "\n\nThe claim overstates the height.", "unsupported", "fallback", 0.0),
    ('```json\n{"statements": [{"statement": "s", "reason": "r", "verdict": 1,},]}\n```', "supported", "fallback", 1.0),
    (
        '{"statements": [{"statement": "s", "reason": "r", "verdict": 1}, {"statement": "t", "verdict": "maybe"}]}',
        "supported",
        "fallback",
        1.0,
    ),
    # broken JSON: the verdict fragments are still read, as a fallback
    (
        '{"statements": [{"statement": "Katahdin is in Maine", "reason": "yes", "verdict": 1}, '
        '{"statement": "6,288.2 ft" "reason": "no", "verdict": 0',
        "unsupported",
        "fallback",
        0.5,
    ),
    ('{"statements": [{"statement": "s", "reason": "r", "verdict": "unclear"}]}', None, "unparseable", None),
    ('{"result": "the claim is supported"}', None, "unparseable", None),
    ("The claim is supported by the context.", None, "unparseable", None),
]


@pytest.mark.parametrize(("raw", "label", "status", "score"), CASES)
def test_parse(raw, label, status, score):
    result = RAGAS.parse(raw)
    assert (result.label, result.status, result.score, result.raw) == (label, status, score, raw)


def test_rationale_keeps_each_reason_with_its_verdict():
    result = RAGAS.parse(OBJECT)
    assert result.rationale == "0: The context gives 5,269 feet."
