"""What the labels a pipeline's file carries beside its items become: the researcher's choice (issue 29).

Some files hold the source's own labels with the items (Factcheck-GPT's claim labels and stances,
FActScore's human S/NS/IR, a Label Studio project's choices); the adapters emit them as annotation
records by a pseudo-annotator (``factcheck-bench``, ``factscore-human``, ``ls-<id>``). Kept as an
annotator's labels, each takes one of the N slots of its item, so a rerun with N fresh annotators
gets N - 1. So an items import asks (`source_labels`):

- ``gold`` (the default): the labels become the items' gold labels (reference) only, and no
  annotation is stored: all N slots stay with the study's own annotators. An item whose file
  labels disagree (several annotators in a Label Studio export) gets no gold label (counted in the
  notes); an item that has its own gold in the file keeps it.
- ``annotator``: the labels are kept as the pseudo-annotator's annotations, as before.

The study keeps which it was (`Study.source_labels`), for the report's sentence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from annotation.errors import ServiceError
from annotation.models import Study
from annotation.transfer.adapters.base import Converted, Origin

GOLD = "gold"
ANNOTATOR = "annotator"
#: The choices, the default first.
CHOICES: tuple[str, ...] = (GOLD, ANNOTATOR)
DEFAULT = GOLD
#: The choices in a few words, for the import page's menu.
SHORT = {GOLD: "gold labels only (no slot taken)", ANNOTATOR: "an annotator's labels (a slot each)"}
#: The choices as the commands' help and the API's schema describe them.
DESCRIPTIONS = {
    GOLD: "the items' gold labels only (reference; every slot stays with the study's annotators)",
    ANNOTATOR: "an imported annotator's labels (each takes one of the N slots of its item)",
}


def choice(value: str | None, *, target: str) -> str | None:
    """The checked choice for an import into `target`: the default for items when none is given; None when
    the import carries no choice (annotations and predictions imports). ServiceError names the allowed ones."""
    if value is None or value == "":
        return DEFAULT if target == "items" else None
    cleaned = value.strip().lower() if isinstance(value, str) else value
    if cleaned not in CHOICES:
        raise ServiceError(f"source_labels must be one of {', '.join(CHOICES)}, got {value!r}")
    if target != "items":
        if cleaned == GOLD:
            raise ServiceError(
                "source_labels=gold is for an items import (the labels that come with the items); an annotations "
                "import keeps the file's labels as annotators' labels"
            )
        return None
    return cleaned


@dataclass
class GoldFromLabels:
    """The file's labels gathered per item, to become the items' gold labels instead of annotations."""

    labels: dict[str, set[str]] = field(default_factory=dict)
    #: Where each item's first label is in the source file: a problem with the gold label points there.
    origins: dict[str, Origin] = field(default_factory=dict)
    annotators: set[str] = field(default_factory=set)
    judgements: int = 0
    count: int = 0

    def add(self, converted: Converted) -> None:
        record = converted.record
        item, label = record.get("item"), record.get("label")
        if not isinstance(item, str) or not isinstance(label, str) or not label:
            return
        self.labels.setdefault(item, set()).add(label)
        self.origins.setdefault(item, converted.origin)
        self.annotators.add(str(record.get("annotator") or ""))
        self.judgements += bool(record.get("evidence_judgements"))
        self.count += 1

    def gold(self) -> dict[str, tuple[str, Origin]]:
        """Item id -> (label, where it is in the file), for the items whose labels in the file agree."""
        return {
            item: (next(iter(labels)), self.origins[item]) for item, labels in self.labels.items() if len(labels) == 1
        }

    def disagreeing(self) -> int:
        return sum(len(labels) > 1 for labels in self.labels.values())

    def notes(self, *, given: int, own: int) -> list[str]:
        """What the import did with the labels, for the command's output, the page and the API's notes:
        `given` items got their gold label from them, `own` kept the gold label the file gives the item."""
        who = ", ".join(sorted(name for name in self.annotators if name)) or "the file"
        notes = [
            f"{self.count} label(s) by {who} are gold / reference only, not annotations (source_labels=gold: every "
            "slot stays with the study's annotators; source_labels=annotator keeps them as annotators' labels)"
        ]
        if given:
            notes.append(f"{given} item(s) got their gold label from them")
        if own:
            notes.append(f"{own} item(s) keep the gold label the file gives them")
        if self.disagreeing():
            notes.append(f"{self.disagreeing()} item(s) whose labels in the file disagree got no gold label")
        if self.judgements:
            notes.append(
                f"the evidence judgements of {self.judgements} label(s) are not kept (they belong to annotations)"
            )
        return notes


def record(study: Study, *, source: str, how: str, annotators: set[str]) -> None:
    """Add (source, how) to the study's record of imported labels, once, with the annotators named."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    entries = [dict(entry) for entry in study.source_labels]
    for entry in entries:
        if entry.get("from") == source and entry.get("as") == how:
            entry["annotators"] = sorted({*entry.get("annotators", []), *annotators})
            break
    else:
        entries.append({"from": source, "as": how, "annotators": sorted(annotators)})
    if entries != study.source_labels:
        study.source_labels = entries
        study.save(update_fields=["source_labels", "updated_at"])


def rule(study: Study) -> str | None:
    """The report's sentence on the labels that came with imported items; None when no import carried any."""
    parts = []
    for entry in study.source_labels:
        names = ", ".join(entry.get("annotators") or []) or "the file"
        if entry.get("as") == GOLD:
            parts.append(
                f"the labels that came with the items imported from {entry.get('from')} ({names}) are the items' "
                "gold labels only, not annotations: they take none of the N slots"
            )
        else:
            parts.append(
                f"the labels that came with the items imported from {entry.get('from')} are kept as annotators' "
                f"labels ({names}): each takes one of the N slots of its item and counts as an annotator here"
            )
    return "; ".join(parts) or None
