"""Facts&Evidence preset: one yes/no/irrelevant judgement per passage, pooled into credibility."""

from __future__ import annotations

import pytest

from metaeval.verifiers.presets import ParseResult, get_preset
from tests.verifiers.evidence import CLAIM, CONTEXT, EVIDENCE

FACTS_EVIDENCE = get_preset("facts_evidence")


class TestRender:
    def test_is_evidence_level(self):
        assert FACTS_EVIDENCE.evidence_level is True
        with pytest.raises(TypeError, match="render_passage"):
            FACTS_EVIDENCE.render(CLAIM, "", EVIDENCE)

    @pytest.mark.parametrize("position", range(len(EVIDENCE)))
    def test_one_passage_per_prompt_with_its_title_url_and_source_type(self, position):
        passage = EVIDENCE[position]
        task = FACTS_EVIDENCE.render_passage(CLAIM, passage, CONTEXT)[-1]["content"]
        assert CLAIM in task and CONTEXT in task
        assert f"Title: {passage['title']}\nURL: {passage['url']}\nSource type: {passage['source_type']}" in task
        assert f"Text: {passage['text']}" in task
        others = [other["text"] for index, other in enumerate(EVIDENCE) if index != position]
        assert not any(text in task for text in others)

    def test_asks_for_a_rationale_and_a_yes_no_irrelevant_answer(self):
        system = FACTS_EVIDENCE.render_passage(CLAIM, EVIDENCE[0])[0]["content"]
        assert "Rationale:" in system and "Answer: <Yes, No or Irrelevant>" in system


CASES = [
    (
        "Rationale: The passage gives Katahdin's height as 5,269 feet, not 6,288.2 feet.\nAnswer: No",
        "not_support",
        "ok",
        "The passage gives Katahdin's height as 5,269 feet, not 6,288.2 feet.",
    ),
    (
        "**Rationale:** The passage is about a tower in Nashville, not Katahdin.\n\n**Answer:** Irrelevant",
        "irrelevant",
        "ok",
        "The passage is about a tower in Nashville, not Katahdin.",
    ),
    ("Rationale: It states the same height.\nAnswer: Yes.", "support", "ok", "It states the same height."),
    ("Rationale: Different subject.\nAnswer: Not relevant", "irrelevant", "ok", "Different subject."),
    (
        "Rationale: At first glance yes, it names Katahdin.\nAnswer: Yes\n\nCorrection: it gives a different height."
        "\nAnswer: No",
        "not_support",
        "ok",
        None,
    ),
    (
        "The passage does not mention the claimed height.\n\nNo, it does not support the claim.",
        "not_support",
        "fallback",
        "The passage does not mention the claimed height.",
    ),
    ("The passage confirms the height.\n**Yes**", "support", "fallback", "The passage confirms the height."),
    ("No mention of the height is made in this passage.", None, "unparseable", None),
    ("Rationale: The passage is about the trail.\nAnswer: It depends on the reading.", None, "unparseable", None),
]


@pytest.mark.parametrize(("raw", "label", "status", "rationale"), CASES)
def test_parse(raw, label, status, rationale):
    result = FACTS_EVIDENCE.parse(raw)
    assert (result.label, result.status, result.raw) == (label, status, raw)
    if rationale is not None:
        assert result.rationale == rationale


def _results(*labels: str | None) -> list[ParseResult]:
    return [ParseResult.unparseable("garbled") if label is None else ParseResult(label, "ok") for label in labels]


class TestAggregate:
    def test_credibility_leaves_irrelevant_out_unless_counted(self):
        results = _results("support", "support", "not_support", "irrelevant", "irrelevant")
        left_out = FACTS_EVIDENCE.aggregate(results, count_irrelevant=False)
        assert left_out == {
            "label": "supported",
            "score": pytest.approx(2 / 3),
            "n_support": 2,
            "n_not_support": 1,
            "n_irrelevant": 2,
            "n_unparseable": 0,
        }
        counted = FACTS_EVIDENCE.aggregate(results, count_irrelevant=True)
        assert counted["score"] == pytest.approx(2 / 5)
        assert counted["label"] == "unsupported"

    def test_unparseable_passages_are_excluded_and_counted(self):
        result = FACTS_EVIDENCE.aggregate(_results("support", None, None), count_irrelevant=True)
        assert (result["score"], result["label"], result["n_unparseable"]) == (1.0, "supported", 2)

    def test_a_tie_is_not_a_majority(self):
        result = FACTS_EVIDENCE.aggregate(_results("support", "not_support"), count_irrelevant=False)
        assert (result["score"], result["label"]) == (0.5, "unsupported")

    @pytest.mark.parametrize("labels", [(), (None, None), ("irrelevant", None)])
    def test_nothing_counted_gives_no_label_and_no_score(self, labels):
        result = FACTS_EVIDENCE.aggregate(_results(*labels), count_irrelevant=False)
        assert (result["label"], result["score"]) == (None, None)

    def test_parsed_real_answers_aggregate_end_to_end(self):
        answers = [
            "Rationale: Gives 5,269 feet, a different height.\nAnswer: No",
            "Rationale: Only about the trail's terminus.\nAnswer: No",
            "Rationale: About a building in Tennessee.\nAnswer: Irrelevant",
            "I'm unable to evaluate this passage.",
        ]
        result = FACTS_EVIDENCE.aggregate([FACTS_EVIDENCE.parse(answer) for answer in answers], count_irrelevant=False)
        assert result == {
            "label": "unsupported",
            "score": 0.0,
            "n_support": 0,
            "n_not_support": 2,
            "n_irrelevant": 1,
            "n_unparseable": 1,
        }

    def test_claim_level_labels_are_rejected(self):
        with pytest.raises(ValueError):
            FACTS_EVIDENCE.aggregate([ParseResult("supported", "ok")], count_irrelevant=False)
