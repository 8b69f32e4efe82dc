"""Importing a pipeline's own file: convert with an adapter, then feed the existing import services.

The adapter's records are staged as Claimlab JSON Lines in a temporary file
(one per target) with the source place of every line, then imported by the
same services as a Claimlab file (several of them, e.g. items and their labels,
in one transaction): the import stays all or nothing, and each problem the
services find is reported at the line or record of the source file, not of
the staged one.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from typing import IO

from django.conf import settings
from django.db import transaction

from annotation.errors import ErrorCollector, ImportFailed, ImportResult, ServiceError
from annotation.lib.formats import MAX_LINE_BYTES, RecordError
from annotation.models import Item, Study
from annotation.transfer.adapters import source_labels as labels_choice
from annotation.transfer.adapters.base import (
    ABSTENTIONS,
    ANNOTATIONS,
    CLI,
    ITEMS,
    PREDICTIONS,
    Context,
    Converted,
    Origin,
    SourceFile,
)
from annotation.transfer.adapters.registry import get_adapter
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items

Importer = Callable[..., ImportResult]
#: A staged record may be bigger than its source line (a preference item holds two files' lists).
STAGED_LINE_BYTES = 4 * MAX_LINE_BYTES
_SPOOL_BYTES = 8 * 1024 * 1024
_NOUNS = {ITEMS: "item", ANNOTATIONS: "annotation", PREDICTIONS: "prediction"}


class _Staged:
    """One target's records as JSON Lines in a temporary file, with the source place of each line."""

    def __init__(self) -> None:
        self.file: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES)
        self.origins: list[Origin] = []
        #: Lines whose gold label is the file's own label (source_labels=gold): where that label is in the file.
        self.gold_origins: dict[int, Origin] = {}

    def add(self, converted: Converted) -> None:
        self.file.write(json.dumps(converted.record, ensure_ascii=False).encode() + b"\n")
        self.origins.append(converted.origin)

    def with_gold(self, gold: dict[str, tuple[str, Origin]]) -> tuple[_Staged, int, int]:
        """The staged items again, each item that has no gold of its own given the one in `gold`; how many got
        one, and how many of those in `gold` keep their own.

        Lines and source places stay as they were, so errors still point into the source file (a problem
        with a gold label given here, at the label's own place)."""
        again = _Staged()
        again.origins = self.origins
        given = own = 0
        self.file.seek(0)
        for number, line in enumerate(self.file, start=1):
            record = json.loads(line)
            if record.get("id") not in gold:
                pass
            elif record.get("gold"):
                own += 1
            else:
                record["gold"], again.gold_origins[number] = gold[record["id"]]
                given += 1
            again.file.write(json.dumps(record, ensure_ascii=False).encode() + b"\n")
        self.file.close()
        return again, given, own

    def source_error(self, error: RecordError) -> RecordError:
        """A service's error on a staged line, placed at the source record it came from."""
        if error.line is None or not 1 <= error.line <= len(self.origins):
            return error
        if error.field == "gold" and error.line in self.gold_origins:
            message = f"the label, made the item's gold label (source_labels=gold): {error.message}"
            return self.gold_origins[error.line].error(message, "label")
        return self.origins[error.line - 1].error(error.message, error.field)


def import_from(
    *,
    source: str,
    target: str,
    study: Study,
    stream: IO[bytes],
    file_name: str = "",
    pair: IO[bytes] | None = None,
    pair_name: str = "",
    systems: tuple[str, str] | None = None,
    verifier: str = "",
    update: bool = False,
    importers: Mapping[str, Importer] | None = None,
    source_labels: str | None = None,
    face: str = CLI,
) -> ImportResult:
    """Import a pipeline's file (`source` names its adapter) into `target`; ImportFailed names source places.

    Importing items also imports what the file carries beside them (abstentions, and the source's
    own labels), in the same transaction. The labels become what `source_labels` says
    (adapters/source_labels.py): the items' gold labels (the default, so every slot stays with the
    study's annotators), or an imported annotator's labels. `importers` adds services this app
    does not own (metaeval passes the predictions import). `face` (base.CLI, PAGE or API) is where the
    import was asked for: an error that asks for an option names it as that face does.
    """
    how = labels_choice.choice(source_labels, target=target)
    adapter = get_adapter(source)
    if target not in adapter.targets:
        named = f"--from {adapter.name}" if face == CLI else f"{adapter.title} ({adapter.name})"
        raise ServiceError(
            f"{named} imports {', '.join(adapter.targets)}, not {target}; "
            "see docs/importing.md for what each pipeline's files become"
        )
    services: dict[str, Importer] = {ITEMS: import_items, ANNOTATIONS: import_annotations, **(importers or {})}
    if target not in services:
        raise ServiceError(f"{target} cannot be imported from here")
    context = Context(
        kind=study.kind,
        labels=list(study.labels),
        aliases=dict(study.label_aliases),
        systems=list(study.systems),
        pair=SourceFile(pair, pair_name) if pair is not None else None,
        system_names=systems,
        verifier=verifier,
        max_json_bytes=settings.IMPORT_UPLOAD_MAX_BYTES,
        claims_index=lambda: _claims_index(study),
        face=face,
    )
    errors = ErrorCollector()
    staged: dict[str, _Staged] = {}
    abstentions: list[dict[str, str]] = []
    as_gold = labels_choice.GoldFromLabels() if how == labels_choice.GOLD else None
    wanted = {target, ANNOTATIONS, ABSTENTIONS} if target == ITEMS else {target}
    for converted in adapter.convert(SourceFile(stream, file_name), target, context):
        if isinstance(converted, RecordError):
            errors.extend([converted])
        elif converted.target == ABSTENTIONS and ABSTENTIONS in wanted:
            abstentions.append(converted.record)
        elif as_gold is not None and converted.target == ANNOTATIONS and target == ITEMS:
            as_gold.add(converted)
        elif converted.target in wanted and not errors:
            staged.setdefault(converted.target, _Staged()).add(converted)
    if not errors and target not in staged and not abstentions:
        errors.extend([RecordError(None, f"the file holds no {_NOUNS[target]}s for a {study.kind} study")])
    if errors:
        raise errors.fail()
    result = ImportResult()
    carried = _carried_labels(staged, as_gold)
    if as_gold is not None and as_gold.count and ITEMS in staged:
        staged[ITEMS], given, own = staged[ITEMS].with_gold(as_gold.gold())
        result.notes.extend(as_gold.notes(given=given, own=own))
    parts = [name for name in (ITEMS, ANNOTATIONS, PREDICTIONS) if name in staged]
    # One service alone is all or nothing by itself (a big item import then stages its rows without
    # holding a transaction, transfer/item_staging.py); several, or abstentions beside them, share one.
    together = transaction.atomic() if len(parts) > 1 or abstentions else nullcontext()
    with together:
        for name in parts:
            part = staged[name]
            part.file.seek(0)
            try:
                done = services[name](
                    study=study,
                    stream=part.file,
                    fmt="jsonl",
                    update=update,
                    max_line_bytes=STAGED_LINE_BYTES,
                    face=face,
                )
            except ImportFailed as exc:
                raise ImportFailed([part.source_error(error) for error in exc.errors], exc.total) from None
            finally:
                part.file.close()
            result.records += done.records
            if name == target:
                result.created += done.created
                result.updated += done.updated
            else:
                result.notes.append(
                    f"{done.created} new and {done.updated} updated {_NOUNS[name]}(s) from the same file"
                )
        if abstentions:
            added = _record_abstentions(study, abstentions)
            result.notes.append(f"{added} abstained response(s) recorded (they count in the respond ratio)")
    if how is not None and carried is not None:
        with transaction.atomic():
            labels_choice.record(study, source=adapter.name, how=how, annotators=carried)
    result.notes.extend(f"skipped {count} {what}" for what, count in sorted(context.skipped.items()))
    return result


def _carried_labels(staged: dict[str, _Staged], as_gold: labels_choice.GoldFromLabels | None) -> set[str] | None:
    """The annotators of the labels an items import carried beside its items; None when it carried none."""
    if as_gold is not None:
        return as_gold.annotators if as_gold.count else None
    if ANNOTATIONS not in staged:
        return None
    part = staged[ANNOTATIONS]
    part.file.seek(0)
    names = {str(json.loads(line).get("annotator") or "") for line in part.file}
    part.file.seek(0)
    return names


def _record_abstentions(study: Study, abstentions: list[dict[str, str]]) -> int:
    """Add responses without claims to the study (once each), for the respond ratio of its report."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    known = {entry["response_id"] for entry in study.abstained_responses}
    new = [entry for entry in abstentions if entry["response_id"] not in known]
    if new:
        study.abstained_responses = [*study.abstained_responses, *new]
        study.save(update_fields=["abstained_responses", "updated_at"])
    return len(new)


def _claims_index(study: Study) -> dict[str, list[tuple[str, str]]]:
    index: dict[str, list[tuple[str, str]]] = {}
    rows = Item.objects.filter(study=study).values_list("external_id", "response_id", "payload__claim")
    for external_id, response_id, claim in rows.iterator(chunk_size=2000):
        if isinstance(claim, str):
            index.setdefault(claim, []).append((external_id, response_id or external_id))
    return index
