"""The item parser's fast paths (importers.py: `_url_ok`, `_Problems.string`) give what the full rules give.

Why these exist: at a million items the parser's per-field checks were most of an import's
Python time (issue 35). A fast path may only answer the common case early, never differently.
"""

from __future__ import annotations

import random
from urllib.parse import urlsplit

import pytest

from annotation.transfer.importers import _Problems, _url_ok


def urlsplit_rule(url: str) -> bool | str:
    """The rule as urllib states it: an http(s) scheme and a host; "error" where urlsplit refuses the text."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "error"
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def fast_rule(url: str) -> bool | str:
    try:
        return _url_ok(url)
    except ValueError:
        return "error"


def test_passage_urls_are_judged_as_urlsplit_judges_them():
    """Seeded random URLs over the characters that matter to urlsplit (schemes in any case, brackets,
    tabs and line breaks, spaces, non-ASCII hosts incl. ones NFKC turns into '/')."""
    rng = random.Random(35)
    alphabet = "hHtTpPsS:/?#[]@.a1 \t\n\r-_é％／"
    prefixes = ["http://", "https://", "HTTP://", "Https://", "http:/", "https:", "ftp://", ""]
    urls = [
        rng.choice(prefixes) + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14))) for _ in range(50_000)
    ]
    urls += ["https://example.org/a", "http://1.2.3.4:80/x", "https://[::1]/", "https://ex\tample.org", "https://"]
    mismatches = [url for url in urls if fast_rule(url) != urlsplit_rule(url)]
    assert mismatches == []
    assert sum(fast_rule(url) is True for url in urls) > 5_000  # the fast path was exercised


@pytest.mark.parametrize(
    ("record", "name", "options", "value", "problems"),
    [
        ({"claim": "  leading space kept"}, "claim", {}, "  leading space kept", []),
        ({"claim": "   "}, "claim", {"required": True}, "", ["is required and must be a non-empty string"]),
        ({"claim": "\tx"}, "claim", {}, "\tx", []),
        ({"domain": "abcd"}, "domain", {"max_length": 3}, "", ["is 4 characters long; the limit is 3"]),
        ({"domain": "abc"}, "domain", {"max_length": 3}, "abc", []),
        ({"id": "  c-1 "}, "id", {"required": True}, "c-1", []),
        ({"id": 7}, "id", {}, "7", []),
        ({"claim": 7}, "claim", {}, "", ["must be a string, got number"]),
        ({"claim": True}, "claim", {}, "", ["must be a string, got boolean"]),
        ({}, "claim", {}, "", []),
    ],
)
def test_string_fields_keep_their_rules(record, name, options, value, problems):
    collected = _Problems(line=1)
    assert collected.string(record, name, **options) == value
    assert [error.message for error in collected.errors] == problems
