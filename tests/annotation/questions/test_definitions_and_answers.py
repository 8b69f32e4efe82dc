"""Extra questions (issue 32): definitions are checked once and stored complete; answers are checked
against them and stored per system, never per screen side."""

from __future__ import annotations

import pytest

from annotation.errors import ServiceError
from annotation.questions.answers import checked_question_answers, screen_answers
from annotation.questions.definitions import parse_questions, questions_text, read_questions_text
from annotation.questions.forms import page_questions, posted_answers

CONFIDENCE = {"key": "confidence", "type": "likert", "prompt": "How sure are you?", "anchors": {"1": "guess"}}
COMPLETE = {"key": "complete", "type": "likert", "prompt": "How complete is the list?", "target": "list"}
VERIFIABLE = {"key": "verifiable", "type": "check", "prompt": "Verifiable", "target": "claim"}
SUPPORT = {
    "key": "support",
    "type": "single",
    "prompt": "Supported?",
    "target": "claim",
    "options": ["supported", "not supported"],
    "required": False,
}
TOPICS = {"key": "topics", "type": "multi", "prompt": "Topics", "options": ["dates", "names", "places"]}
YEARS = {"key": "years", "type": "number", "prompt": "Years of experience", "min": 0, "max": 60, "integer": True}
NOTE = {"key": "note", "type": "text", "prompt": "Anything else?", "required": False, "max_length": 20}


def test_definitions_are_stored_complete_with_their_defaults():
    (confidence,) = parse_questions([CONFIDENCE], kind="verification")
    assert confidence == {
        "key": "confidence",
        "type": "likert",
        "prompt": "How sure are you?",
        "help": "",
        "target": "item",
        "required": True,
        "scale": [1, 5],
        "anchors": {"1": "guess"},
    }
    (verifiable,) = parse_questions([VERIFIABLE], kind="preference")
    assert verifiable["required"] is False  # an unticked box is the answer "no"


@pytest.mark.parametrize(
    ("definition", "kind", "message"),
    [
        ({**CONFIDENCE, "key": "Confidence"}, "verification", "key must be"),
        ({**CONFIDENCE, "type": "slider"}, "verification", "question 1 (confidence): type must be one of"),
        ({**CONFIDENCE, "scale": [1, 20]}, "verification", "2 to 11 points, got 20"),
        ({**CONFIDENCE, "anchors": {"9": "x"}}, "verification", "anchor '9' is not a point of the scale 1-5"),
        ({**CONFIDENCE, "api_key": "x"}, "verification", "unknown field(s) api_key"),
        (COMPLETE, "verification", "target 'list' is for preference studies"),
        ({**TOPICS, "options": ["a"]}, "verification", "options must be a list of 2 to 12"),
        ({**TOPICS, "options": ["a", "a"]}, "verification", "options must be distinct"),
        ({**YEARS, "min": 9, "max": 1}, "verification", "min (9) is above max (1)"),
        ({**NOTE, "max_length": 0}, "verification", "max_length must be a whole number from 1 to 2000"),
        ({**CONFIDENCE, "prompt": ""}, "verification", "prompt must be a non-empty string"),
    ],
)
def test_a_bad_definition_is_refused_naming_the_question_and_the_field(definition, kind, message):
    with pytest.raises(ServiceError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_questions([definition], kind=kind)


def test_keys_are_distinct_and_the_count_is_bounded():
    with pytest.raises(ServiceError, match="confidence appear more than once"):
        parse_questions([CONFIDENCE, CONFIDENCE], kind="verification")
    many = [{**NOTE, "key": f"q{number}"} for number in range(21)]
    with pytest.raises(ServiceError, match="at most 20 questions"):
        parse_questions(many, kind="verification")


def test_json_and_yaml_read_alike_and_the_settings_text_reads_back():
    as_yaml = "- key: confidence\n  type: likert\n  prompt: How sure are you?\n  anchors: {1: guess}\n"
    assert parse_questions(as_yaml, kind="verification") == parse_questions([CONFIDENCE], kind="verification")
    stored = parse_questions([CONFIDENCE, TOPICS, YEARS, NOTE], kind="verification")
    assert parse_questions(questions_text(stored), kind="verification") == stored
    with pytest.raises(ServiceError, match="neither JSON nor YAML at line 2"):
        read_questions_text("- key: a\n  : : ]")


def _preference_questions():
    return parse_questions([CONFIDENCE, COMPLETE, VERIFIABLE, SUPPORT], kind="preference")


def test_list_and_claim_answers_are_stored_per_system_whichever_side_it_was_shown_on():
    questions = _preference_questions()
    given = {
        "confidence": 4,
        "complete": {"list_1": 2, "list_2": "5"},
        "verifiable": {"list_1": [True, False], "list_2": [True]},
        "support": {"list_1": ["supported", None], "list_2": ["not supported"]},
    }
    left_a = checked_question_answers(questions, given, shown=("A", "B"), claim_counts=(2, 1))
    assert left_a == {
        "confidence": 4,
        "complete": {"A": 2, "B": 5},
        "verifiable": {"A": [True, False], "B": [True]},
        "support": {"A": ["supported", None], "B": ["not supported"]},
    }
    # The same screen answer with B on the left is about the other systems: blinding holds.
    left_b = checked_question_answers(questions, given, shown=("B", "A"), claim_counts=(2, 1))
    assert left_b["complete"] == {"B": 2, "A": 5}
    assert left_b["verifiable"] == {"B": [True, False], "A": [True]}
    # And back to the screen for a revision.
    assert screen_answers(questions, left_b, ("B", "A"))["complete"] == {"list_1": 2, "list_2": 5}


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({}, "question confidence: an answer is required"),
        ({"confidence": 6}, "question confidence: choose a whole number from 1 to 5, got 6"),
        ({"confidence": True}, "choose a whole number"),
        ({"confidence": 3, "complete": {"list_1": 3}}, "question complete, List 2: an answer is required"),
        ({"confidence": 3, "complete": {"left": 3}}, 'answer per list, as {"list_1": ..., "list_2": ...}'),
        (
            {"confidence": 3, "complete": {"list_1": 3, "list_2": 3}, "verifiable": {"list_1": [True]}},
            "question verifiable, List 1: answer each of its 2 claim",
        ),
        (
            {"confidence": 3, "complete": {"list_1": 3, "list_2": 3}, "support": {"list_1": ["maybe", None]}},
            "question support, List 1, claim 1: choose one of supported, not supported",
        ),
        ({"confidence": 3, "mood": 1}, "unknown question(s) mood"),
        ("great", "questions must be an object"),
    ],
)
def test_a_bad_answer_is_refused_naming_the_question_the_list_and_the_claim(given, message):
    with pytest.raises(ServiceError, match=message.replace("(", r"\(").replace(")", r"\)").replace("{", r"\{")):
        checked_question_answers(_preference_questions(), given, shown=("A", "B"), claim_counts=(2, 1))


def test_item_question_types_are_checked_and_normalised():
    questions = parse_questions([TOPICS, YEARS, NOTE], kind="verification")
    checked = checked_question_answers(questions, {"topics": ["places", "dates"], "years": "7", "note": "  ok "})
    assert checked == {"topics": ["dates", "places"], "years": 7, "note": "ok"}
    with pytest.raises(ServiceError, match="write a whole number"):
        checked_question_answers(questions, {"topics": ["dates"], "years": 7.5})
    with pytest.raises(ServiceError, match="the number must be from 0 to 60"):
        checked_question_answers(questions, {"topics": ["dates"], "years": 61})
    with pytest.raises(ServiceError, match="21 characters; the limit is 20"):
        checked_question_answers(questions, {"topics": ["dates"], "years": 1, "note": "x" * 21})
    with pytest.raises(ServiceError, match="this study asks no extra questions"):
        checked_question_answers([], {"topics": []})
    assert checked_question_answers(questions, {"topics": ["names"], "years": 0})["note"] is None


def test_the_page_posts_what_the_api_takes():
    """The annotate form's field names read back into the API's screen-space shape."""
    from django.http import QueryDict

    questions = _preference_questions()
    posted = QueryDict(mutable=True)
    posted.update({"q.confidence": "4", "q.complete.list_1": "2", "q.complete.list_2": "5"})
    posted.update({"q.verifiable.list_1.0": "on", "q.support.list_2.0": "not supported"})
    answers = posted_answers(questions, posted, claim_counts=(2, 1))
    assert answers == {
        "confidence": "4",
        "complete": {"list_1": "2", "list_2": "5"},
        "verifiable": {"list_1": [True, False], "list_2": [False]},
        "support": {"list_1": [None, None], "list_2": ["not supported"]},
    }
    stored = checked_question_answers(questions, answers, shown=("A", "B"), claim_counts=(2, 1))
    assert stored["verifiable"] == {"A": [True, False], "B": [False]}
    page = page_questions(questions, answers, (2, 1))
    assert [control["name"] for control in page["item"]] == ["q.confidence"]
    assert [control["name"] for control in page["lists"]["list_2"]] == ["q.complete.list_2"]
    assert [[c["name"] for c in claim] for claim in page["claims"]["list_1"]] == [
        ["q.verifiable.list_1.0", "q.support.list_1.0"],
        ["q.verifiable.list_1.1", "q.support.list_1.1"],
    ]
    chosen = [choice["value"] for choice in page["item"][0]["choices"] if choice["checked"]]
    assert chosen == [4] and [choice["key"] for choice in page["item"][0]["choices"]] == ["1", "2", "3", "4", "5"]
