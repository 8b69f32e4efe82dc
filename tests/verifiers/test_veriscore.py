"""VeriScore presets: the shipped demos, their label mapping, the search-result layout, the parsers."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from metaeval.verifiers.presets import get_preset
from metaeval.verifiers.presets.demos import DEMOS_PATH, load_demos, parse_search_results
from metaeval.verifiers.presets.rendering import search_results
from tests.datasets import TEST_DATA
from tests.verifiers.evidence import CLAIM, EVIDENCE

ORIGINAL_DEMOS = TEST_DATA / "veriscore_demos" / "few_shot_examples.jsonl"


def _original_records() -> list[dict]:
    with ORIGINAL_DEMOS.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


class TestShippedDemos:
    def test_the_shipped_file_is_veriscores_file_unchanged(self):
        assert DEMOS_PATH.read_bytes() == ORIGINAL_DEMOS.read_bytes()

    def test_licence_and_attribution_ship_with_it(self):
        folder = DEMOS_PATH.parent
        assert (folder / "LICENSE.Apache-2.0.txt").read_text().lstrip().startswith("Apache License")
        readme = (folder / "README.md").read_text()
        assert "7dd3352dd1fb7b0192323b9eb8d0212c2bc9e21d" in readme
        assert "Apache" in readme and "2406.19276" in readme

    def test_ternary_demos_have_three_of_each_label(self):
        demos = load_demos("ternary")
        assert Counter(demo.label for demo in demos) == {"supported": 3, "contradicted": 3, "inconclusive": 3}

    def test_binary_demos_map_contradicted_and_inconclusive_to_unsupported(self):
        original = {record["claim"]: record["human_label"] for record in _original_records()}
        binary = load_demos("binary")
        assert len(binary) == 9
        for demo in binary:
            expected = "supported" if original[demo.claim] == "Supported." else "unsupported"
            assert demo.label == expected, demo.claim

    def test_search_results_read_back_render_byte_for_byte_as_veriscore_wrote_them(self):
        for record, demo in zip(_original_records(), load_demos("ternary"), strict=True):
            assert search_results(demo.evidence) == record["search_result"]
            assert all(passage["url"].startswith(("https://", "http://")) for passage in demo.evidence)

    def test_a_malformed_search_result_block_is_rejected(self):
        with pytest.raises(ValueError, match="search result 2"):
            parse_search_results("Search result 1\nTitle: a\nContent: b\nLink: c\n\nSearch result 3\nTitle: x")


def _demo_answers(preset_id: str) -> list[str]:
    messages = get_preset(preset_id).render(CLAIM, "", EVIDENCE)
    return [message["content"] for message in messages if message["role"] == "assistant"]


class TestRender:
    def test_ternary_prompt_shows_each_label_three_times(self):
        assert Counter(_demo_answers("veriscore_ternary")) == {"Supported.": 3, "Contradicted.": 3, "Inconclusive.": 3}

    def test_no_binary_demo_answers_contradicted_or_inconclusive(self):
        answers = _demo_answers("veriscore_binary")
        assert Counter(answers) == {"Supported.": 3, "Unsupported.": 6}
        assert not any("Contradicted" in answer or "Inconclusive" in answer for answer in answers)

    def test_binary_system_prompt_offers_only_the_two_labels(self):
        system = get_preset("veriscore_binary").render(CLAIM, "", EVIDENCE)[0]["content"]
        assert "Unsupported" in system and "Contradicted" not in system and "Inconclusive" not in system

    def test_demos_alternate_user_and_assistant_before_the_claim(self):
        messages = get_preset("veriscore_ternary").render(CLAIM, "", EVIDENCE)
        assert [message["role"] for message in messages] == ["system"] + ["user", "assistant"] * 9 + ["user"]
        assert "Vikings used their longships to transport livestock." in messages[9]["content"]

    def test_evidence_is_numbered_search_results(self):
        task = get_preset("veriscore_ternary").render(CLAIM, "", EVIDENCE)[-1]["content"]
        assert (
            "Search result 2\nTitle: Katahdin | Baxter State Park\n"
            "Content: Baxter Peak, the summit of Katahdin, marks the northern terminus of the Appalachian Trail ...\n"
            "Link: https://baxterstatepark.org/katahdin/"
        ) in task
        assert "Search result 3\n" in task and "Search result 4" not in task

    def test_a_passage_without_title_or_link_leaves_those_lines_out(self):
        task = get_preset("veriscore_ternary").render(CLAIM, "", [{"text": "Katahdin is 5,269 ft."}])[-1]["content"]
        assert "Search result 1\nContent: Katahdin is 5,269 ft." in task
        assert "Title:" not in task and "Link:" not in task and "None" not in task


TERNARY_CASES = [
    ("Contradicted.", "contradicted", "ok"),
    ("Inconclusive", "inconclusive", "ok"),
    ("**Supported**", "supported", "ok"),
    (
        "Search result 5 says the summit is 5,269 feet, which contradicts 6,288.2 feet.\n\nContradicted.",
        "contradicted",
        "ok",
    ),
    (
        "Result 1 supports part of it.\nHowever, no result gives the height in meters.\nDecision: Inconclusive",
        "inconclusive",
        "ok",
    ),
    ("Supported.\n\nWait - result 1 gives 5,269 feet, so the claim is wrong.\nContradicted.", "contradicted", "ok"),
    (
        "The claim is not supported by any result, but nothing contradicts it either.\nInconclusive.",
        "inconclusive",
        "ok",
    ),
    ("The claim is contradicted by result 1 (5,269 ft).\nI hope this helps!", "contradicted", "fallback"),
    ("The claim is not supported.", None, "unparseable"),
    ("Should the verdict be Supported, Contradicted, or Inconclusive? I cannot tell.", None, "unparseable"),
    ("", None, "unparseable"),
]


@pytest.mark.parametrize(("raw", "label", "status"), TERNARY_CASES)
def test_parse_ternary(raw, label, status):
    result = get_preset("veriscore_ternary").parse(raw)
    assert (result.label, result.status, result.raw) == (label, status, raw)


BINARY_CASES = [
    ("Unsupported.", "unsupported", "ok"),
    ("Supported.", "supported", "ok"),
    ("Result 2 only covers the trail, not the height.\n**Unsupported**", "unsupported", "ok"),
    ("The height in result 1 differs, so the claim is not supported.", "unsupported", "ok"),
    ("Not_Supported", "unsupported", "ok"),
    ("Supported? No: result 1 gives 5,269 feet.\nUnsupported.", "unsupported", "ok"),
    ("Unsupported.\n(Result 1 gives a different height.)", "unsupported", "fallback"),
    ("Contradicted.", None, "unparseable"),
]


@pytest.mark.parametrize(("raw", "label", "status"), BINARY_CASES)
def test_parse_binary(raw, label, status):
    result = get_preset("veriscore_binary").parse(raw)
    assert (result.label, result.status) == (label, status)


def test_rationale_is_the_reasoning_before_a_bare_verdict_line():
    result = get_preset("veriscore_ternary").parse("Result 1 gives 5,269 feet.\n\nContradicted.")
    assert result.rationale == "Result 1 gives 5,269 feet."
