"""Reading verdicts out of free-form model answers.

Every preset's parser returns a :class:`ParseResult` that keeps the raw
output and says how sure the reading is (docs/architecture.md, Mechanisms), because agreement with
humans is only meaningful if a misread answer cannot pass for a label:

- ``ok``: the answer was where the prompt asked for it;
- ``fallback``: a verdict was found only by a looser rule (tag missing, verdict
  in prose, JSON buried in text);
- ``unparseable``: no verdict; the label is None and must not be counted.

The helpers here implement the shared rules: the *last* verdict wins (models
correct themselves), labels match as whole words in any spelling
(``not supported`` = ``not_supported`` = ``Not-Supported``), and a label that
is negated (``not fully supported``), offered as an option (``true or
false``) or asked about (``whether it is supported``) is not a verdict.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "PARSE_STATUSES",
    "ParseResult",
    "ParseStatus",
    "Verdict",
    "Vocabulary",
    "extract_json",
    "last_line",
    "marked_verdict",
    "parse_plain_verdict",
    "strip_markup",
]

ParseStatus = Literal["ok", "fallback", "unparseable"]
PARSE_STATUSES: tuple[ParseStatus, ...] = ("ok", "fallback", "unparseable")


@dataclass(frozen=True)
class ParseResult:
    """One parsed answer; ``label`` is None exactly when it is unparseable."""

    label: str | None
    status: ParseStatus
    score: float | None = None
    rationale: str = ""
    raw: str = ""

    def __post_init__(self) -> None:
        if self.status not in PARSE_STATUSES:
            raise ValueError(f"unknown parse status {self.status!r}")
        if (self.label is None) != (self.status == "unparseable"):
            raise ValueError("a result has a label unless, and only unless, it is unparseable")

    @classmethod
    def unparseable(cls, raw: str | None, rationale: str = "") -> ParseResult:
        """A result that must never be counted as a label."""
        return cls(None, "unparseable", None, rationale, raw or "")


@dataclass(frozen=True)
class Verdict:
    """A label found in a text: the canonical label and where its surface form was."""

    label: str
    start: int
    end: int


_SEPARATOR = r"[\s_\-]+"
_NEGATED_BEFORE = re.compile(
    r"(?:\b(?:not|never|no|nor|cannot)|n[’']t)\s+(?:\w+ly\s+)?(?:be\s+|been\s+)?$|\b(?:non|un)-$",
    re.IGNORECASE,
)
_QUESTION_BEFORE = re.compile(
    r"\bwhether\b|\b(?:determine|verify|tell|say|know|assess|judge|decide|confirm|check)\s+if\b",
    re.IGNORECASE,
)
_OPTION_JOINER = re.compile(r"[\s\[\]*_`\"'“”]*(?:,\s*)?(?:or|and/or|/|,)[\s\[\]*_`\"'“”]*", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?\n]")


def _words(surface: str) -> list[str]:
    return [word for word in re.split(_SEPARATOR, surface.strip()) if word]


def _key(surface: str) -> str:
    return " ".join(_words(surface)).casefold()


class Vocabulary:
    """Surface forms of verdicts mapped to canonical labels, matched as whole words.

    ``surfaces`` is a list of labels (each its own surface form) or a mapping
    from surface form to label, for aliases such as ``True -> supported``.
    Longer forms are tried first, so ``not supported`` wins over
    ``supported`` at the same place; whole-word matching means
    ``unsupported`` never contains ``supported``.
    """

    def __init__(self, surfaces: Iterable[str] | Mapping[str, str]):
        pairs = surfaces.items() if isinstance(surfaces, Mapping) else ((label, label) for label in surfaces)
        self._labels: dict[str, str] = {}
        for surface, label in pairs:
            if not _words(surface):
                raise ValueError("a verdict cannot be empty")
            self._labels[_key(surface)] = label
        if not self._labels:
            raise ValueError("a vocabulary needs at least one verdict")
        forms = sorted(self._labels, key=len, reverse=True)
        alternatives = "|".join(_SEPARATOR.join(re.escape(word) for word in form.split(" ")) for form in forms)
        self._pattern = re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE)

    @property
    def labels(self) -> tuple[str, ...]:
        """Canonical labels, without duplicates, in the order given."""
        return tuple(dict.fromkeys(self._labels.values()))

    def exact(self, text: str) -> str | None:
        """The label if ``text`` is nothing but one verdict (markup and punctuation aside)."""
        return self._labels.get(_key(strip_markup(text)))

    def verdicts(self, text: str) -> list[Verdict]:
        """Every verdict in ``text`` that is asserted (not negated, offered or asked about)."""
        matches = list(self._pattern.finditer(text))
        in_option_list: set[int] = set()
        for first, second in itertools.pairwise(matches):
            if _OPTION_JOINER.fullmatch(text[first.end() : second.start()]):
                in_option_list.update((first.start(), second.start()))
        found = []
        for match in matches:
            if match.start() in in_option_list or self._hedged(text, match.start()):
                continue
            found.append(Verdict(self._labels[_key(match.group())], match.start(), match.end()))
        return found

    def last(self, text: str) -> Verdict | None:
        """The last asserted verdict in ``text``, or None."""
        verdicts = self.verdicts(text)
        return verdicts[-1] if verdicts else None

    @staticmethod
    def _hedged(text: str, start: int) -> bool:
        before = text[max(0, start - 60) : start]
        if _NEGATED_BEFORE.search(before):
            return True
        sentence_start = max((m.end() for m in _SENTENCE_END.finditer(before)), default=0)
        return bool(_QUESTION_BEFORE.search(before[sentence_start:]))


_MARKUP = re.compile(r"^[\s*_`#>\"'“”‘’\[\](){}:.,;!?-]+|[\s*_`#>\"'“”‘’\[\](){}:.,;!?-]+$")


def strip_markup(text: str) -> str:
    """``text`` without surrounding Markdown emphasis, quotes, brackets and punctuation."""
    return _MARKUP.sub("", text)


def last_line(text: str) -> tuple[str, int]:
    """The last non-blank line of ``text`` and the offset where it starts ("" and len when none)."""
    end = len(text.rstrip())
    start = text.rfind("\n", 0, end) + 1
    return text[start:end], start if end else len(text)


_MARKER = r"(?:final\s+answer|answer|decision|verdict|label|conclusion|rating)"
_MARKER_LINE = re.compile(rf"^[\s*_#>`-]*{_MARKER}[\s*_`]*[:\-–—][\s*_`]*", re.IGNORECASE | re.MULTILINE)


def marked_verdict(text: str, vocabulary: Vocabulary) -> tuple[Verdict, int] | None:
    """The verdict right after the last ``Answer:`` (or ``Verdict:``, ...) marker at a line start.

    Returns the verdict and the offset where its line starts, so callers can
    take what comes before as the rationale.
    """
    for marker in reversed(list(_MARKER_LINE.finditer(text))):
        line_end = text.find("\n", marker.end())
        rest = text[marker.end() : len(text) if line_end == -1 else line_end]
        lead = len(rest) - len(rest.lstrip(" *_`\"'“[("))
        verdicts = vocabulary.verdicts(rest)
        if verdicts and verdicts[0].start == lead:
            first = verdicts[0]
            offset = marker.end()
            return Verdict(first.label, offset + first.start, offset + first.end), marker.start()
    return None


def parse_plain_verdict(raw: str | None, vocabulary: Vocabulary) -> ParseResult:
    """The shared rule for presets whose answer ends with a verdict word.

    ok: a verdict in the last non-blank line (the prompts ask for it there);
    fallback: otherwise the last verdict anywhere; else unparseable.
    """
    text = raw or ""
    line, offset = last_line(text)
    verdict = vocabulary.last(line)
    if verdict is not None:
        status: ParseStatus = "ok"
        rationale = text[:offset].strip() if vocabulary.exact(line) else text.strip()
    else:
        verdict = vocabulary.last(text)
        if verdict is None:
            return ParseResult.unparseable(text, text.strip())
        status = "fallback"
        rationale = text.strip()
    return ParseResult(verdict.label, status, None, rationale, text)


_FENCE = re.compile(r"```[\w-]*[ \t]*\n?(.*?)\n?[ \t]*```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def _loads(candidate: str) -> tuple[bool, Any]:
    try:
        return True, json.loads(candidate)
    except ValueError:
        return False, None


def extract_json(text: str, accept: Callable[[Any], bool] = lambda value: True) -> tuple[Any, bool] | None:
    """JSON in a model answer, as ``(value, repaired)``, or None.

    Not repaired: the whole answer is JSON, possibly inside one code fence.
    Repaired: the JSON was found inside prose or another fence, or needed
    trailing commas removed. ``accept`` rejects values of the wrong shape, so a
    fragment (one inner object) is not mistaken for the answer.
    """
    stripped = (text or "").strip()
    whole = _FENCE.fullmatch(stripped)
    candidate = whole.group(1) if whole else stripped
    ok, value = _loads(candidate)
    if ok and accept(value):
        return value, False
    sources = [block.group(1) for block in _FENCE.finditer(stripped)] + [stripped]
    for source in sources + [_TRAILING_COMMA.sub(r"\1", source) for source in sources]:
        ok, value = _loads(source.strip())
        if ok and accept(value):
            return value, True
        decoder = json.JSONDecoder()
        for opening in re.finditer(r"[\[{]", source):
            try:
                value, _ = decoder.raw_decode(source, opening.start())
            except ValueError:
                continue
            if accept(value):
                return value, True
    return None
