"""VeriScore's human-labelled verification examples (data/demos/few_shot_examples.jsonl).

Each line is ``{claim, search_result, human_label}``: a claim, Serper's results as one
string ("Search result N / Title / Content / Link") and a human label "Supported.",
"Contradicted." or "Inconclusive.". A line becomes a verification item with the
results as its passages; its label is emitted as an annotation by ``veriscore-human``,
which the items import turns into the item's gold label or keeps as that annotator's,
as the researcher chose (adapters/source_labels.py).
"""

from __future__ import annotations

import re
from typing import Any

from annotation.transfer.adapters.base import ANNOTATIONS, ITEMS, Context, Converted, Origin, Yield, text_field
from annotation.transfer.adapters.links import source_type, web_url

ANNOTATOR = "veriscore-human"
#: A human label and the study labels it may stand for, tried in order. VeriScore's binary mode counts
#: everything but "supported" as unsupported, so a binary study takes contradicted and inconclusive as that.
LABEL_CANDIDATES = {
    "supported": ("supported", "S", "support"),
    "contradicted": ("contradicted", "refuted", "unsupported", "not_supported", "NS"),
    "inconclusive": ("inconclusive", "not_enough_info", "unsupported", "not_supported", "NS"),
}
_RESULT = re.compile(r"^Search result \d+\s*$", re.M)
_FIELDS = {"title": "title", "content": "text", "link": "url"}


def is_example(record: dict[str, Any]) -> bool:
    """A few-shot example line: a labelled claim, not a response."""
    return "human_label" in record and "claim" in record and "response" not in record


def example_records(line: int, record: dict[str, Any], context: Context) -> Yield:
    """The item of one example line, and its human label as an annotation by ANNOTATOR."""
    origin = Origin(line)
    claim = text_field(record, "claim", origin)
    raw = text_field(record, "human_label", origin)
    results = text_field(record, "search_result", origin, required=False)
    for value in (claim, raw, results):
        if not isinstance(value, str):
            yield value
            return
    assert isinstance(claim, str) and isinstance(raw, str) and isinstance(results, str)
    key = raw.strip().rstrip(".").lower()
    label = context.label(*LABEL_CANDIDATES.get(key, ()))
    if key not in LABEL_CANDIDATES:
        yield origin.error(f"must be Supported., Contradicted. or Inconclusive., got {raw!r}", "human_label")
        return
    if label is None:
        wanted = ", ".join(LABEL_CANDIDATES[key])
        yield origin.error(f"{raw!r} needs one of the study's labels {wanted} (or an alias)", "human_label")
        return
    item_id = f"veriscore-example-{line}"
    yield Converted(ITEMS, origin, {"id": item_id, "claim": claim, "evidence": passages(results)})
    yield Converted(ANNOTATIONS, origin, {"item": item_id, "annotator": ANNOTATOR, "label": label})


def passages(results: str) -> list[dict[str, str]]:
    """Serper's results as VeriScore formats them into one string, as evidence passages (those with text)."""
    found = []
    for block in _RESULT.split(results):
        fields: dict[str, str] = {}
        current = ""
        for text in block.splitlines():
            name, _, rest = text.partition(": ")
            if name.lower() in _FIELDS and rest:
                current = _FIELDS[name.lower()]
                fields[current] = rest
            elif current and text.strip():
                fields[current] += "\n" + text
        if fields.get("text", "").strip():
            url = web_url(fields.get("url", "").strip())
            found.append(
                {
                    "text": fields["text"],
                    "title": fields.get("title", "")[:500],
                    "url": url,
                    "source_type": source_type(url),
                }
            )
    return found
