"""Custom preset: a researcher's Django template, rendered without escaping, and their own labels."""

from __future__ import annotations

import pytest

from metaeval.verifiers.presets.custom import make_custom_preset
from tests.verifiers.evidence import CLAIM, CONTEXT, EVIDENCE

TEMPLATE = """\
Claim: {{ claim }}
{% if context %}From: {{ context }}
{% endif %}{% for passage in evidence %}({{ forloop.counter }}) {{ passage.title }} <{{ passage.url }}>: {{ passage.text }}
{% endfor %}Reply supported, partially_supported or not_supported."""
LABELS = ["supported", "partially_supported", "not_supported"]


def test_template_sees_claim_context_and_evidence_fields():
    content = make_custom_preset(TEMPLATE, LABELS).render(CLAIM, CONTEXT, EVIDENCE)[-1]["content"]
    assert content.startswith(f"Claim: {CLAIM}\nFrom: {CONTEXT}\n(1) Mount Katahdin - Wikipedia")
    assert f"(3) Tallest buildings in Tennessee <{EVIDENCE[2]['url']}>: {EVIDENCE[2]['text']}" in content


def test_output_is_not_html_escaped():
    content = make_custom_preset(TEMPLATE, LABELS).render('The "AT&T" tower is <200 m>', "", EVIDENCE)[-1]["content"]
    assert 'The "AT&T" tower is <200 m>' in content
    assert "&amp;" not in content and "&lt;" not in content and "&quot;" not in content


def test_system_prompt_is_optional():
    assert [m["role"] for m in make_custom_preset(TEMPLATE, LABELS).render(CLAIM, "", [])] == ["user"]
    preset = make_custom_preset(TEMPLATE, LABELS, system="You are a careful fact checker.")
    assert preset.render(CLAIM, "", [])[0] == {"role": "system", "content": "You are a careful fact checker."}


@pytest.mark.parametrize(
    ("template", "labels", "message"),
    [
        ("{% for x in evidence %}{{ claim }}", LABELS, "syntax"),
        ("Is it true? {{ evidence }}", LABELS, "claim"),
        (TEMPLATE, [], "non-empty"),
        (TEMPLATE, ["supported", " "], "non-blank"),
        (TEMPLATE, ["Supported", "supported"], "distinct"),
        (TEMPLATE, ["not supported", "not_supported"], "distinct"),
    ],
)
def test_bad_configurations_are_rejected(template, labels, message):
    with pytest.raises(ValueError, match=message):
        make_custom_preset(template, labels)


def test_a_filtered_claim_still_counts_as_shown():
    assert make_custom_preset("CLAIM: {{ claim|upper }}", ["yes", "no"]).labels == ("yes", "no")


CASES = [
    ("not_supported", "not_supported", "ok"),
    ("Partially supported.", "partially_supported", "ok"),
    ("The sources back the location but not the height.\n**partially_supported**", "partially_supported", "ok"),
    ("supported? Not quite: the height differs.\nNot Supported", "not_supported", "ok"),
    ("The claim is partially supported.\nThanks!", "partially_supported", "fallback"),
    ("The claim is unsupported.", None, "unparseable"),
    ("", None, "unparseable"),
]


@pytest.mark.parametrize(("raw", "label", "status"), CASES)
def test_parse_takes_the_last_whole_word_label_longest_first(raw, label, status):
    result = make_custom_preset(TEMPLATE, LABELS).parse(raw)
    assert (result.label, result.status, result.raw) == (label, status, raw)


def test_unsupported_is_its_own_label_when_configured():
    preset = make_custom_preset("{{ claim }}", ["supported", "unsupported"])
    assert preset.parse("Unsupported.").label == "unsupported"
    assert preset.parse("I'd say supported at first, but overall unsupported").label == "unsupported"
