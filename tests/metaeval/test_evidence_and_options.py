"""Reading stored evidence judgements, and report options from a query string."""

from __future__ import annotations

import pytest
from django.http import QueryDict

from metaeval.evidence import canonical_judgement, read_judgements
from metaeval.reporting import ReportOptions, options_from_query


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("support", "support"),
        (" Supports ", "support"),
        ("completely-support", "support"),
        ("not support", "not_support"),
        ("refute", "not_support"),
        ("partially-support", "not_support"),
        ("irrelevant", "irrelevant"),
        ("maybe", None),
        (1, None),
        (None, None),
    ],
)
def test_canonical_judgement(raw, expected):
    assert canonical_judgement(raw) == expected


def test_read_judgements_uses_index_or_position_and_counts_the_unreadable():
    judgements, unreadable = read_judgements(
        [
            {"judgement": "support", "useful": True},  # position 0
            {"index": 3, "label": "irrelevant"},
            {"passage": -1, "label": "support"},  # bad index
            {"index": True, "label": "support"},  # a bool is not an index
            "support",  # not an object
            {"stance": "refute", "useful": "yes"},  # position 5; useful not a bool
        ]
    )
    assert [(j.passage, j.judgement, j.useful) for j in judgements] == [
        (0, "support", True),
        (3, "irrelevant", None),
        (5, "not_support", None),
    ]
    assert unreadable == 3


def test_options_from_a_query():
    query = QueryDict("by_domain=true&binary=0&source_type=news,web&source_type=wikipedia&exclude_source_type=blog")
    options = options_from_query(query)
    assert options.by_domain is True and options.binary is False
    assert options.source_types == ("news", "web", "wikipedia")
    assert options.exclude_source_types == ("blog",)
    assert options_from_query(QueryDict(""), by_domain=True, binary=True) == ReportOptions(by_domain=True, binary=True)


def test_options_refuse_nonsense():
    with pytest.raises(ValueError):
        ReportOptions(n_resamples=-1)
    with pytest.raises(ValueError):
        ReportOptions(confidence=1.5)
