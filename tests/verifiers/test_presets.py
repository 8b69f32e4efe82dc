"""The registry and what every preset promises: messages with the claim and each passage, a cited method."""

from __future__ import annotations

import pytest

from metaeval.verifiers.presets import PRESETS, ParseResult, Preset, get_preset
from tests.verifiers.evidence import CLAIM, CONTEXT, EVIDENCE

# Per-claim presets (the pairwise judge reads an item's two claim lists: tests/verifiers_run/test_pairwise_judge.py).
CLAIM_LEVEL = [preset_id for preset_id, preset in PRESETS.items() if not preset.evidence_level and not preset.pairwise]


def test_registry_holds_the_issue_ids_and_wice():
    assert set(PRESETS) == {
        "veriscore_ternary",
        "veriscore_binary",
        "factscore",
        "safe",
        "facts_evidence",
        "ragas",
        "custom",
        "wice",
        "pairwise_judge",
    }
    assert all(preset.id == preset_id for preset_id, preset in PRESETS.items())


@pytest.mark.parametrize("preset_id", sorted(set(PRESETS) - {"custom"}))
def test_every_method_note_cites_its_paper_and_says_the_wording_is_ours(preset_id):
    method = PRESETS[preset_id].method
    assert "arXiv:" in method and "20" in method
    assert "ours" in method


@pytest.mark.parametrize("preset_id", CLAIM_LEVEL)
def test_render_gives_chat_messages_with_claim_context_and_every_passage(preset_id):
    messages = PRESETS[preset_id].render(CLAIM, CONTEXT, EVIDENCE)
    assert all(set(message) == {"role", "content"} for message in messages)
    assert {message["role"] for message in messages} <= {"system", "user", "assistant"}
    assert messages[-1]["role"] == "user"
    task = messages[-1]["content"]
    assert CLAIM in task and CONTEXT in task
    for passage in EVIDENCE:
        assert passage["text"] in task, "passage text missing or escaped"
        assert passage["title"] in task
        assert passage["url"] in task


@pytest.mark.parametrize("preset_id", CLAIM_LEVEL)
def test_render_without_context_mentions_none(preset_id):
    task = PRESETS[preset_id].render(CLAIM, "", EVIDENCE)[-1]["content"]
    assert "taken from" not in task and "comes from" not in task


@pytest.mark.parametrize("preset_id", CLAIM_LEVEL)
def test_render_with_no_evidence_still_states_the_claim(preset_id):
    assert CLAIM in PRESETS[preset_id].render(CLAIM, "", [])[-1]["content"]


@pytest.mark.parametrize("preset_id", sorted(PRESETS))
def test_parse_never_turns_a_refusal_into_a_label(preset_id):
    refusal = "I'm sorry, but I can't verify claims about real-world facts."
    result = PRESETS[preset_id].parse(refusal)
    assert isinstance(result, ParseResult)
    assert (result.label, result.status, result.raw) == (None, "unparseable", refusal)


@pytest.mark.parametrize("preset_id", sorted(PRESETS))
def test_parse_of_empty_output_is_unparseable(preset_id):
    assert PRESETS[preset_id].parse("").status == "unparseable"
    assert PRESETS[preset_id].parse(None).label is None


def test_prediction_labels_are_claim_labels_for_evidence_level_presets():
    assert PRESETS["facts_evidence"].prediction_labels == ("supported", "unsupported")
    assert PRESETS["veriscore_ternary"].prediction_labels == ("supported", "contradicted", "inconclusive")


def test_evidence_level_flag_must_match_the_per_passage_parts():
    base = PRESETS["factscore"]
    with pytest.raises(ValueError):
        Preset(id="x", labels=("a",), method="m", render=base.render, parse=base.parse, evidence_level=True)
    with pytest.raises(ValueError):
        Preset(
            id="x",
            labels=("a",),
            method="m",
            render=base.render,
            parse=base.parse,
            aggregate=PRESETS["facts_evidence"].aggregate,
        )


class TestGetPreset:
    def test_returns_the_registered_preset(self):
        assert get_preset("safe") is PRESETS["safe"]
        assert get_preset("custom") is PRESETS["custom"]

    def test_unknown_id_names_the_known_ones(self):
        with pytest.raises(KeyError, match="veriscore_ternary"):
            get_preset("veriscore")

    def test_template_options_only_for_custom(self):
        with pytest.raises(ValueError):
            get_preset("factscore", template="{{ claim }}")

    def test_custom_options_build_a_new_preset(self):
        preset = get_preset("custom", template="Is this right? {{ claim }}", labels=["yes", "no"])
        assert preset.labels == ("yes", "no")
        assert preset.render(CLAIM, "", [])[-1]["content"] == f"Is this right? {CLAIM}"
        assert PRESETS["custom"].labels == ("supported", "contradicted", "inconclusive")
