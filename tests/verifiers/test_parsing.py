"""Shared parsing rules: whole words, last verdict, hedges, statuses, JSON extraction."""

from __future__ import annotations

import pytest

from metaeval.verifiers.presets.parsing import (
    ParseResult,
    Vocabulary,
    extract_json,
    last_line,
    marked_verdict,
    parse_plain_verdict,
    strip_markup,
)

BINARY = Vocabulary({"supported": "supported", "not supported": "unsupported", "unsupported": "unsupported"})
TERNARY = Vocabulary(["supported", "contradicted", "inconclusive"])


class TestParseResult:
    def test_unparseable_has_no_label_and_keeps_raw(self):
        result = ParseResult.unparseable("I'm sorry, I can't help with that.")
        assert (result.label, result.status, result.raw) == (None, "unparseable", "I'm sorry, I can't help with that.")

    @pytest.mark.parametrize(
        ("label", "status"), [(None, "ok"), (None, "fallback"), ("supported", "unparseable"), ("supported", "maybe")]
    )
    def test_a_label_goes_with_ok_or_fallback_only(self, label, status):
        with pytest.raises(ValueError):
            ParseResult(label, status)


class TestVocabulary:
    @pytest.mark.parametrize(
        "spelling", ["not supported", "not_supported", "Not Supported", "NOT-SUPPORTED", "not\nsupported"]
    )
    def test_spellings_of_a_multiword_label_are_one_label(self, spelling):
        assert BINARY.last(f"My verdict: {spelling}.").label == "unsupported"

    def test_unsupported_never_counts_as_supported(self):
        only_supported = Vocabulary(["supported"])
        assert only_supported.last("The claim is unsupported.") is None
        assert only_supported.last("It is well-supported by result 2.").label == "supported"

    def test_whole_words_only(self):
        factscore = Vocabulary({"true": "supported", "false": "unsupported"})
        assert factscore.last("This is a truism; the falsetto register ...") is None

    def test_last_verdict_wins(self):
        text = "At first glance this looks Supported. But result 4 gives 5,267 ft, so it is Contradicted."
        assert TERNARY.last(text).label == "contradicted"

    @pytest.mark.parametrize(
        "text",
        [
            "The claim is not supported by the search results.",
            "It isn't supported anywhere.",
            "The claim is not fully supported.",
            "This cannot be supported.",
            "I cannot determine whether the claim is supported.",
            "Choose Supported, Contradicted, or Inconclusive.",
            "Reply with supported/contradicted/inconclusive.",
        ],
    )
    def test_negated_offered_and_asked_labels_are_not_verdicts(self, text):
        assert TERNARY.last(text) is None

    def test_a_verdict_after_a_hedge_still_counts(self):
        text = "Is it supported or contradicted? The claim is not supported, so: Inconclusive."
        assert TERNARY.last(text).label == "inconclusive"

    def test_markup_and_punctuation_around_a_verdict(self):
        assert TERNARY.last("**Contradicted**.").label == "contradicted"
        assert TERNARY.exact('  "**Inconclusive.**" ') == "inconclusive"
        assert TERNARY.exact("Inconclusive, mostly") is None

    def test_labels_keep_their_order_and_reject_empty_vocabularies(self):
        assert BINARY.labels == ("supported", "unsupported")
        with pytest.raises(ValueError):
            Vocabulary([])
        with pytest.raises(ValueError):
            Vocabulary(["supported", " _ "])


class TestLines:
    def test_last_line_skips_trailing_blank_lines(self):
        text = "Reasoning here.\n\nSupported.\n\n  \n"
        line, offset = last_line(text)
        assert line == "Supported."
        assert text[offset:].startswith("Supported.")

    def test_last_line_of_empty_text(self):
        assert last_line("") == ("", 0)

    def test_strip_markup(self):
        assert strip_markup("**[Not Supported].**") == "Not Supported"


class TestMarkedVerdict:
    def test_the_last_marker_wins(self):
        text = "Answer: Supported\nOn second thought the date is wrong.\n**Final answer:** [Contradicted]"
        verdict, line_start = marked_verdict(text, TERNARY)
        assert verdict.label == "contradicted"
        assert text[line_start:].startswith("**Final answer:**")

    def test_a_marker_must_be_followed_by_the_verdict(self):
        assert marked_verdict("Answer: the claim is contradicted by result 1.", TERNARY) is None


class TestPlainVerdict:
    def test_verdict_on_the_last_line_is_ok_and_the_rest_is_the_rationale(self):
        raw = "Result 1 gives 5,269 feet, not 6,288.\n\nContradicted."
        result = parse_plain_verdict(raw, TERNARY)
        assert (result.label, result.status, result.rationale, result.raw) == (
            "contradicted",
            "ok",
            "Result 1 gives 5,269 feet, not 6,288.",
            raw,
        )

    def test_verdict_only_in_the_middle_is_a_fallback(self):
        raw = "Inconclusive. None of the results mention the exact height.\nLet me know if you need more."
        result = parse_plain_verdict(raw, TERNARY)
        assert (result.label, result.status) == ("inconclusive", "fallback")

    @pytest.mark.parametrize("raw", ["", None, "   \n", "I'm sorry, but I can't assist with that request."])
    def test_no_verdict_is_unparseable(self, raw):
        result = parse_plain_verdict(raw, TERNARY)
        assert (result.label, result.status, result.raw) == (None, "unparseable", raw or "")


class TestExtractJson:
    def test_plain_json_is_not_repaired(self):
        assert extract_json('{"verdict": 1}') == ({"verdict": 1}, False)

    def test_one_code_fence_around_the_answer_is_not_a_repair(self):
        assert extract_json('```json\n[{"verdict": 0}]\n```') == ([{"verdict": 0}], False)

    def test_json_inside_prose_is_repaired(self):
        text = 'Sure! Here is the result:\n{"statements": [{"verdict": 1}]}\nLet me know if you need anything else.'
        assert extract_json(text) == ({"statements": [{"verdict": 1}]}, True)

    def test_trailing_commas_are_repaired(self):
        assert extract_json('{"statements": [{"verdict": 1,},],}') == ({"statements": [{"verdict": 1}]}, True)

    def test_accept_skips_fragments_of_the_wrong_shape(self):
        text = 'Note {"x": 1} then {"statements": []}'
        assert extract_json(text, accept=lambda value: "statements" in value) == ({"statements": []}, True)

    @pytest.mark.parametrize("text", ["", "no JSON here", '{"statements": [{"statement": "x", "verdict": '])
    def test_nothing_decodable(self, text):
        assert extract_json(text) is None

    def test_a_truncated_answer_yields_only_what_accept_allows(self):
        truncated = '{"statements": [{"verdict": 1}'
        assert extract_json(truncated) == ({"verdict": 1}, True)
        assert extract_json(truncated, accept=lambda value: "statements" in value) is None
