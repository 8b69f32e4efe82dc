"""The prediction parser's fast path (prediction_import._text) gives what the full rule gives (issue 35)."""

from __future__ import annotations

import pytest

from metaeval.verifiers.services.prediction_import import _text


@pytest.mark.parametrize(
    ("name", "value", "limit", "expected", "problems"),
    [
        ("verifier", " v1 ", 100, "v1", []),
        ("verifier", "v1", 100, "v1", []),
        ("verifier", "v" * 101, 100, "", ["is 101 characters long; the limit is 100"]),
        ("rationale", "  kept as written ", 100, "  kept as written ", []),
        ("rationale", "because\n", 100, "because\n", []),
        ("rationale", " \n ", 100, "", []),
        ("item", 42, 100, "42", []),
        ("label", 3, 100, "", ["must be a string, got number"]),
    ],
)
def test_prediction_text_fields_keep_their_rules(name, value, limit, expected, problems):
    errors: list = []
    assert _text({name: value}, name, errors, 1, limit=limit, required=False) == expected
    assert [error.message for error in errors] == problems
