"""The two verifiers that need no LLM, as pure functions (no Django).

Every report should show what a trivial verifier scores next to GPT-4's
number, and a run should work end to end on a machine without any endpoint:

- **majority**: always the study's most frequent human label (or gold label
  when there are no human labels); what "accuracy 0.73" is worth when 73% of
  the claims are supported;
- **overlap**: the share of the claim's content words that occur in its
  evidence; the study's positive label when the share is above a threshold,
  else its negative label. A bag-of-words entailment baseline.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "DEFAULT_THRESHOLD",
    "STOPWORDS",
    "content_words",
    "default_sides",
    "majority_label",
    "overlap_score",
]

DEFAULT_THRESHOLD = 0.5

#: Function words that say nothing about whether evidence backs a claim.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "being",
        "but",
        "by",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "hers",
        "him",
        "his",
        "i",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "our",
        "she",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "was",
        "we",
        "were",
        "which",
        "who",
        "whom",
        "whose",
        "will",
        "with",
        "would",
        "you",
        "your",
        "also",
        "not",
        "no",
        "nor",
        "only",
        "very",
        "can",
        "could",
        "did",
        "do",
        "does",
        "may",
        "might",
        "must",
        "shall",
        "should",
        "about",
        "after",
        "before",
        "between",
        "during",
        "over",
        "under",
        "up",
        "down",
        "out",
        "off",
        "again",
        "further",
        "once",
        "here",
        "when",
        "where",
        "why",
        "how",
        "all",
        "any",
        "both",
        "each",
        "few",
        "more",
        "most",
        "other",
        "some",
        "such",
        "own",
        "same",
        "too",
        "just",
    ]
)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def content_words(text: str) -> set[str]:
    """Lower-cased words of ``text`` without stopwords (numbers kept: dates and counts matter)."""
    return {
        word for word in (match.group().casefold() for match in _WORD.finditer(text or "")) if word not in STOPWORDS
    }


def overlap_score(claim: str, evidence_texts: Iterable[str]) -> float:
    """Share of the claim's content words found anywhere in the evidence (0 when the claim has none)."""
    wanted = content_words(claim)
    if not wanted:
        return 0.0
    found: set[str] = set()
    for text in evidence_texts:
        found |= wanted & content_words(text)
        if len(found) == len(wanted):
            break
    return len(found) / len(wanted)


def majority_label(labels: Iterable[str], order: Sequence[str]) -> tuple[str, int, int] | None:
    """(most frequent label, its count, all labels) or None for no labels; ties go to the earlier declared label."""
    counts = Counter(labels)
    total = sum(counts.values())
    if not total:
        return None
    rank = {label: index for index, label in enumerate(order)}
    label = min(counts, key=lambda value: (-counts[value], rank.get(value, len(rank)), value))
    return label, counts[label], total


def default_sides(labels: Sequence[str], binary_map: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(positive, negative) labels for the overlap baseline from the study's binary collapse.

    Positive: the first declared label mapped to "positive". Negative: the
    last declared label mapped to "negative" (not_supported rather than
    partially_supported; inconclusive rather than contradicted: overlap
    cannot see a contradiction). Without a binary map: first and last label.
    """
    positives = [label for label in labels if binary_map.get(label) == "positive"]
    negatives = [label for label in labels if binary_map.get(label) == "negative"]
    if not binary_map and len(labels) >= 2:
        return labels[0], labels[-1]
    return (positives[0] if positives else None), (negatives[-1] if negatives else None)
