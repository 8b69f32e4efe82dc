"""WiCE preset, tested on WiCE's 300 real GPT-4 outputs and the claims they judged."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict

import pytest

from metaeval.verifiers.presets import get_preset
from tests.datasets import TEST_DATA, read_jsonl
from tests.verifiers.evidence import CLAIM, EVIDENCE

WICE_DIR = TEST_DATA / "wice"
RAW_OUTPUTS = WICE_DIR / "oracle_chunks_claim_test.gpt-4-0613.raw_outputs.jsonl.gz"

WICE = get_preset("wice")


@pytest.fixture(scope="module")
def outputs() -> list[dict]:
    rows = read_jsonl(RAW_OUTPUTS)
    assert len(rows) == 300
    return rows


@pytest.fixture(scope="module")
def parsed(outputs) -> list:
    return [WICE.parse(row["response"]) for row in outputs]


def _answer_by_regex(response: str) -> str:
    (answer,) = re.findall(r"<answer>(.*?)</answer>", response, re.DOTALL)
    return answer.strip()


class TestRealGpt4Outputs:
    def test_parse_counts(self, parsed):
        counts = Counter(result.status for result in parsed)
        print(f"\nWiCE GPT-4 raw outputs parsed: {dict(counts)}")
        assert counts == {"ok": 300}

    def test_every_label_matches_the_answer_tag_read_independently(self, outputs, parsed):
        for number, (row, result) in enumerate(zip(outputs, parsed, strict=True), start=1):
            assert result.label == _answer_by_regex(row["response"]), f"output {number}"
        assert Counter(result.label for result in parsed) == {
            "partially_supported": 153,
            "supported": 83,
            "not_supported": 64,
        }

    def test_xml_parser_agrees_where_the_output_is_well_formed(self, outputs, parsed):
        malformed = 0
        for row, result in zip(outputs, parsed, strict=True):
            try:
                root = ET.fromstring(row["response"])
            except ET.ParseError:
                malformed += 1
                continue
            assert result.label == root.findtext("answer").strip()
            assert result.rationale == root.findtext("explanation").strip()
        # one real output has a bare "&" in its explanation, which is why the parser uses no XML parser
        assert malformed == 1

    def test_raw_output_is_kept_and_scores_follow_the_label(self, outputs, parsed):
        for row, result in zip(outputs, parsed, strict=True):
            assert result.raw == row["response"]
            assert result.score == {"supported": 1.0, "partially_supported": 0.5, "not_supported": 0.0}[result.label]

    def test_max_over_chunks_reproduces_wices_published_gpt4_scores(self, outputs, parsed):
        """Each claim was judged on 3 evidence chunks; WiCE scores a claim by its best chunk."""
        ids = {row["claim"]: row["meta"]["id"] for row in read_jsonl(WICE_DIR / "claim_test.jsonl.gz")}
        by_claim: dict[str, list[float]] = defaultdict(list)
        for row, result in zip(outputs, parsed, strict=True):
            claim = re.findall(r"<claim>(.*?)</claim>", row["prompt"], re.DOTALL)[-1]
            by_claim[ids[claim]].append(result.score)
        published = json.loads((WICE_DIR / "oracle_chunks_claim_test.gpt-4-0613.entailment_score.json").read_text())
        assert {claim: max(scores) for claim, scores in by_claim.items()} == published


class TestRender:
    def test_renders_a_real_claim_with_its_sentences_as_wice_numbered_them(self, outputs):
        """Our rendering of WiCE's first claim shows the same tagged sentences as WiCE's own prompt."""
        record = read_jsonl(WICE_DIR / "claim_test.jsonl.gz")[0]
        prompt = outputs[0]["prompt"]
        task = prompt[prompt.rindex("<input>") :]
        shown = [int(index) for index in re.findall(r"<sentence_(\d+)>", task)]
        evidence = [{"text": record["evidence"][index], "index": index} for index in shown]
        content = WICE.render(record["claim"], "", evidence)[-1]["content"]
        assert f"<claim>{record['claim']}</claim>" in content
        for line in re.findall(r"<sentence_\d+>.*?</sentence_\d+>", task):
            assert line in content

    def test_titles_and_urls_become_attributes_and_positions_number_untagged_passages(self):
        content = WICE.render(CLAIM, "", EVIDENCE)[-1]["content"]
        assert (
            '<sentence_0 title="Mount Katahdin - Wikipedia" url="https://en.wikipedia.org/wiki/Mount_Katahdin">'
            "Katahdin is the highest mountain"
        ) in content
        assert "AT&T tower in Nashville is 617 feet <188 m> tall.</sentence_2>" in content

    def test_system_prompt_asks_for_the_xml_answer(self):
        system = WICE.render(CLAIM, "", EVIDENCE)[0]["content"]
        assert "<explanation>" in system and "<answer>" in system


CASES = [
    (
        "<output>\n    <explanation>Sentence 5 gives the date.</explanation>\n    <answer>Partially Supported</answer>\n"
        "</output>",
        "partially_supported",
        "ok",
    ),
    ("<output><explanation>x</explanation><answer>**not_supported**</answer></output>", "not_supported", "ok"),
    (
        "<answer>supported</answer>\nOn reflection sentence 3 is about a different person.\n"
        "<answer>not_supported</answer>",
        "not_supported",
        "ok",
    ),
    (
        "<output>\n    <explanation>Sentences 2 and 4 cover the birth date only.</explanation>\n"
        "    Answer: partially_supported\n</output>",
        "partially_supported",
        "fallback",
    ),
    (
        "<output>\n    <explanation>Sentence 7 confirms every part.</explanation>\n    <answer>supported",
        "supported",
        "fallback",
    ),
    (
        "<output><explanation>The evidence supports it.</explanation><answer>likely supported, mostly</answer></output>",
        "supported",
        "fallback",
    ),
    ("<output><explanation>Unclear.</explanation><answer>unknown</answer></output>", None, "unparseable"),
    ("<output>\n    <explanation>Sentence 4 mentions the film", None, "unparseable"),
]


@pytest.mark.parametrize(("raw", "label", "status"), CASES)
def test_parse_synthetic_variants(raw, label, status):
    result = WICE.parse(raw)
    assert (result.label, result.status, result.raw) == (label, status, raw)
