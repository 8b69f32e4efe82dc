"""VeriScore's few-shot demos, read from the copy we ship (see data/README.md for source and licence).

The demos are stored as VeriScore wrote them: a claim, its search results as
one preformatted string, and a human label such as ``"Contradicted."``. We
read the search results back into evidence dicts so that demos and the claim
under test are rendered by the same code, and we map the labels here, once,
so no prompt can show a demo under a label its question does not offer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = ["DEMOS_PATH", "Demo", "BINARY_LABELS", "TERNARY_LABELS", "load_demos", "parse_search_results"]

DEMOS_PATH = Path(__file__).resolve().parent / "data" / "veriscore_demos.jsonl"

TERNARY_LABELS = {"supported": "supported", "contradicted": "contradicted", "inconclusive": "inconclusive"}
"""VeriScore's three human labels, canonical spelling."""

BINARY_LABELS = {"supported": "supported", "contradicted": "unsupported", "inconclusive": "unsupported"}
"""docs/architecture.md, Label vocabularies binary collapse. VeriScore's binary mode reuses the ternary demos unmapped; we do not."""

_BLOCK = re.compile(r"Search result (\d+)\nTitle: (.*)\nContent: (.*)\nLink: (.*)", re.DOTALL)


@dataclass(frozen=True)
class Demo:
    """One demonstration: the claim, its search results as evidence dicts, the canonical label."""

    claim: str
    evidence: tuple[dict[str, str], ...]
    label: str


def parse_search_results(text: str) -> tuple[dict[str, str], ...]:
    """VeriScore's ``Search result N / Title / Content / Link`` blocks as evidence dicts."""
    passages = []
    for position, block in enumerate(text.strip().split("\n\n"), start=1):
        match = _BLOCK.fullmatch(block)
        if match is None or int(match.group(1)) != position:
            raise ValueError(f"search result {position} is not in VeriScore's block format: {block[:80]!r}")
        passages.append({"title": match.group(2), "text": match.group(3), "url": match.group(4)})
    return tuple(passages)


@cache
def load_demos(mode: str = "ternary", path: Path = DEMOS_PATH) -> tuple[Demo, ...]:
    """The demos in file order, labelled for ``mode`` ("ternary" or "binary")."""
    mapping = {"ternary": TERNARY_LABELS, "binary": BINARY_LABELS}[mode]
    demos = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            record = json.loads(line)
            human = record["human_label"].strip().rstrip(".").casefold()
            if human not in mapping:
                raise ValueError(f"{path.name} line {number}: unknown human_label {record['human_label']!r}")
            demos.append(Demo(record["claim"], parse_search_results(record["search_result"]), mapping[human]))
    return tuple(demos)
