"""The report cache: a report is built once per state of the study's data (issue 15 §3).

A built report is stored as a ``ReportSnapshot`` keyed by (study, options, fingerprint),
the fingerprint being ``metaeval.selectors.report_fingerprint``, the same key the chart
ETags use. Two ways to read it:

- ``current_report`` (downloads, API, CLI, charts): exact for the data now. The snapshot
  of the current fingerprint when there is one, else built in the call and stored.
- ``page_report`` (the report page): stale-while-revalidate. The current snapshot when
  there is one; else the latest older one, marked not current, while ONE background task
  (``metaeval.tasks.refresh_report``, deduplicated by ``ReportRefresh``) builds the new
  one. With no snapshot at all, the first report is built in the request up to
  ``REPORT_INLINE_MAX_LABELS`` labels; a bigger study's is built by that same background task
  while the page says so (``pending``); that build stores the counts and agreement sections
  first (a snapshot with ``complete`` False, a few seconds in), which the page shows, saying the
  rest is on its way, until the whole report replaces them. Nothing else ever reads such a
  snapshot. The page loads only the rows of the long lists it shows (``ReportSnapshotPart`` chunks).

Every report this module hands out went through a JSON round trip, so the page, the
downloads and a fresh build see the same types (lists, string keys) whether cached or not.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from itertools import islice
from typing import Any, overload

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, F, QuerySet
from django.utils import timezone

from annotation.lib.job_runs import current_worker
from annotation.models import Study, WorkerHeartbeat
from annotation.progress.selectors import annotation_count
from metaeval import selectors
from metaeval.models import ReportRefresh, ReportSnapshot, ReportSnapshotPart
from metaeval.stats.scores import ResponseRows, lazy_response_rows

from .build import FIRST_SECTIONS_PENDING, build_report
from .disagreements import DisagreementRows
from .options import ReportOptions

__all__ = [
    "CACHE_VERSION",
    "CHUNK_ROWS",
    "CachedReport",
    "FIRST_SECTIONS_PENDING",
    "cached_current",
    "ChunkedRows",
    "current_report",
    "report_json_pieces",
    "ReportReplaced",
    "options_from_dict",
    "options_key",
    "page_report",
    "refresh_report",
    "request_refresh",
    "snapshot_status",
]

#: Bump when ``build_report``'s output changes shape, so older snapshots stop matching.
CACHE_VERSION = "3"  # 2: every section reads the study frame (checks rule, new keys); 3: PPI F1@K, adaptive overlap
#: The report's lists that grow with the items, stored in chunks and loaded only when needed:
#: the disagreement list (a page at a time) and every score block's ``per_response`` rows
#: (downloads only). In the stored report each is replaced, in place, by a ``PARTS`` marker.
DISAGREEMENTS = "disagreements"
PER_RESPONSE = "per_response"
PARTS = "stored_in_parts"
#: Rows per stored chunk of a long list (a page size must divide it).
CHUNK_ROWS = 1000
#: Snapshots kept per (study, options) and per study; older ones are deleted when one is stored.
KEEP_PER_OPTIONS = 2
KEEP_PER_STUDY = 8
#: The fingerprint of a report whose data moved while it was built: never equal to a real one,
#: so such a report is only ever shown as an older report.
MOVED = "moved:"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CachedReport:
    """A report and what it is: the data state it was built from, when, and whether that is now.

    ``report`` has markers instead of the long lists when it came from ``page_report``; ``rows``
    always holds the disagreement list (read a chunk at a time from a stored snapshot).
    """

    report: dict[str, Any]
    fingerprint: str
    computed_at: datetime
    current: bool
    snapshot_id: int | None
    rows: dict[str, ChunkedRows]
    refreshing: bool = False
    built_now: bool = False
    pending: bool = False  # no report of this study yet: the first one is being built in the background
    partial: bool = False  # only the first sections of the study's first report: the rest is being built


class ChunkedRows(Sequence[dict[str, Any]]):
    """A snapshot's long list, read a chunk at a time on slicing (Django's Paginator slices it)."""

    def __init__(self, snapshot_id: int | None, section: str, total: int, rows: list | None = None) -> None:
        self.snapshot_id, self.section, self.total, self._rows = snapshot_id, section, total, rows

    def __len__(self) -> int:
        return self.total

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, int):
            found = self[index : index + 1] if index >= 0 else self[self.total + index : self.total + index + 1]
            if not found:
                raise IndexError(index)
            return found[0]
        start, stop, step = index.indices(self.total)
        if self._rows is not None:
            return self._rows[start:stop:step]
        if stop <= start:
            return []
        chunks = range(start // CHUNK_ROWS, (stop - 1) // CHUNK_ROWS + 1)
        parts = ReportSnapshotPart.objects.filter(
            snapshot_id=self.snapshot_id, section=self.section, chunk__in=list(chunks)
        ).order_by("chunk")
        loaded = [row for part in parts.values_list("rows", flat=True) for row in json.loads(part)]
        offset = chunks.start * CHUNK_ROWS
        return loaded[start - offset : stop - offset : step]


def options_key(options: ReportOptions) -> str:
    """The cache key of a report's options (with the cache version), a SHA-256 of their JSON."""
    data = json.dumps({"cache_version": CACHE_VERSION, **options.as_dict()}, sort_keys=True)
    return hashlib.sha256(data.encode()).hexdigest()


def options_from_dict(data: dict[str, Any]) -> ReportOptions:
    """``ReportOptions.as_dict()`` back into options (a task's argument is JSON)."""
    values = dict(data)
    if values.get("source_types") is not None:
        values["source_types"] = tuple(values["source_types"])
    values["exclude_source_types"] = tuple(values.get("exclude_source_types") or ())
    return ReportOptions(**values)


def _complete(study: Study, options: ReportOptions) -> QuerySet[ReportSnapshot]:
    """The study's whole stored reports of these options (what everything but the page's first view reads)."""
    return ReportSnapshot.objects.filter(study=study, options_key=options_key(options), complete=True)


class _FirstSections:
    """Stores a report's first sections (counts, agreement) while the rest of it is built.

    Why a thread on PostgreSQL: there the build is one REPEATABLE READ transaction, and nothing
    written in it is seen before the whole build commits; a connection of the thread's own
    commits the first sections at once (and the write overlaps the rest of the build).
    Elsewhere they are stored in line, and only if the data has not moved since the build's
    fingerprint was read (no snapshot there to make the pair exact).
    """

    def __init__(self, study: Study, options: ReportOptions, fingerprint: str, start: float, *, own_connection: bool):
        self.study, self.options, self.fingerprint, self.start = study, options, fingerprint, start
        self.own_connection = own_connection
        self.thread: threading.Thread | None = None
        self.build_thread = threading.current_thread()

    def __call__(self, first: dict[str, Any]) -> None:
        """Store ``first``; called on the build's thread, or on the thread that receives a big study's agreement
        from its process alongside (``agreement_beside``)."""
        encoded = _Encoded.of(first)
        seconds = time.perf_counter() - self.start
        if not self.own_connection:
            if threading.current_thread() is not self.build_thread:
                # in line, on this thread's own connection (in a caller's transaction that has written, it sees
                # other data than the build: the fingerprint differs and nothing is stored)
                self._store_apart(encoded, seconds, if_unmoved=True)
            elif selectors.report_fingerprint(self.study) == self.fingerprint:
                _store(self.study, self.options, encoded, self.fingerprint, seconds, complete=False)
            return
        self.thread = threading.Thread(target=self._store_apart, args=(encoded, seconds), daemon=True)
        self.thread.start()

    def _store_apart(self, encoded: _Encoded, seconds: float, *, if_unmoved: bool = False) -> None:
        """Store on this thread's own connection (not the build's); with ``if_unmoved``, only if the data it sees
        has not moved since the build's fingerprint."""
        try:
            if not if_unmoved or selectors.report_fingerprint(self.study) == self.fingerprint:
                _store(self.study, self.options, encoded, self.fingerprint, seconds, complete=False)
        except Exception:  # the whole report still comes; only the early view of it is lost
            logger.exception("could not store the first sections of the report of study %s", self.study.pk)
        finally:
            connection.close()  # this thread's own connection

    def wait(self) -> None:
        if self.thread is not None:
            self.thread.join()


def _built(study: Study, options: ReportOptions, *, first_sections: bool = False) -> tuple[dict[str, Any], str, float]:
    """Build the report; return it (as built, not yet JSON), the fingerprint it belongs to, and seconds taken.

    On PostgreSQL (outside a caller's transaction) the fingerprint and the build read one
    REPEATABLE READ snapshot, so the pair is exact. Elsewhere the fingerprint is read before
    and after: if the data moved meanwhile, the report is marked ``MOVED`` and never served
    as current (SQLite here takes its write lock at BEGIN, so a long read transaction would
    stop annotators). With ``first_sections`` the counts and agreement sections are stored as
    soon as they are computed (``_FirstSections``), for the page to show meanwhile.
    """
    start = time.perf_counter()
    hook: _FirstSections | None = None
    if connection.vendor == "postgresql" and not connection.in_atomic_block:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            fingerprint = selectors.report_fingerprint(study)
            if first_sections:
                hook = _FirstSections(study, options, fingerprint, start, own_connection=True)
            with lazy_response_rows():
                report = build_report(study, options, on_first_sections=hook)
        after = fingerprint
    else:
        fingerprint = selectors.report_fingerprint(study)
        if first_sections:
            hook = _FirstSections(study, options, fingerprint, start, own_connection=False)
        with lazy_response_rows():
            report = build_report(study, options, on_first_sections=hook)
        after = selectors.report_fingerprint(study)
    if hook is not None:
        hook.wait()  # stored before the whole report, which takes its place
    if after != fingerprint:
        fingerprint = MOVED + after
    return report, fingerprint, time.perf_counter() - start


@dataclass(frozen=True)
class _Encoded:
    """A built report as it is stored: JSON text of the report with markers, and its long lists,
    written as JSON text a chunk at a time when they are stored (``texts``).

    Why: a report of 100,000 items is about 60 MB of JSON (mostly the per-response score rows), and of
    a million claims 1.5 GB: the chunks are written as they are stored (``_insert_parts``), never held
    all at once (issue 35: the first report of a million-claim study held them, 2.1 GB). What is handed
    out is decoded from that same text (the types every cached report has), and only as far as the
    caller needs: the page reads the report with markers, a download the whole.
    """

    main: str
    lists: dict[str, Sequence[Any]]
    #: A list in two places (a reference scored as the human majority): section -> the section stored first.
    same_as: dict[str, str]

    @classmethod
    def of(cls, report: dict[str, Any]) -> _Encoded:
        main, lists = _split(report)
        first_of: dict[int, str] = {}
        same_as = {}
        for section, rows in lists.items():
            if id(rows) in first_of:
                same_as[section] = first_of[id(rows)]
            else:
                first_of[id(rows)] = section
        return cls(main=json.dumps(main, allow_nan=False), lists=lists, same_as=same_as)

    def texts(self, section: str) -> Iterator[str]:
        """A list's chunks as JSON text, one written at a time."""
        rows = self.lists[section]
        # lazy rows write their JSON from their columns (stats.json_rows), the same text as json.dumps
        text = rows.json_text if isinstance(rows, ResponseRows | DisagreementRows) else _dumped(rows)
        return (text(n, n + CHUNK_ROWS) for n in range(0, len(rows), CHUNK_ROWS))

    def whole(self, *, per_response: bool = True) -> dict[str, Any]:
        """The report with its long lists in place (without the per-response rows: see ``current_report``)."""
        lists = {
            section: [row for text in self.texts(section) for row in json.loads(text)]
            for section in self.lists
            if per_response or not _is_per_response(section)
        }
        return _put_back(json.loads(self.main), lists, per_response=per_response)


def _dumped(rows: Sequence[Any]) -> Callable[[int, int], str]:
    """A list's chunk as JSON text (``_Encoded``)."""
    return lambda start, stop: json.dumps(rows[start:stop], allow_nan=False)


def _store(
    study: Study, options: ReportOptions, encoded: _Encoded, fingerprint: str, seconds: float, *, complete: bool = True
) -> int:
    """Keep a built report (its long lists in chunks) and prune older snapshots; returns its id.

    A whole report takes the place of the first sections of the same data state; first
    sections never take the place of anything.
    """
    key = options_key(options)
    same_state = ReportSnapshot.objects.filter(study=study, options_key=key, fingerprint=fingerprint)
    for _attempt in range(2):
        try:
            with transaction.atomic():
                if complete:
                    same_state.filter(complete=False).delete()
                snapshot = ReportSnapshot.objects.create(
                    study=study,
                    options_key=key,
                    fingerprint=fingerprint,
                    report=encoded.main,
                    computed_at=timezone.now(),
                    build_seconds=seconds,
                    complete=complete,
                )
                _insert_parts(snapshot.pk, encoded)
        except IntegrityError:  # another request or task stored this very state first
            stored = same_state.values_list("pk", "complete").first()
            if stored is not None and (stored[1] or not complete):
                return stored[0]  # the same report, or first sections we need not store
            continue  # another build's first sections came in between: they give way on the retry
        _prune(study, key)
        return snapshot.pk
    raise RuntimeError(f"could not store the report of study {study.pk}")  # pragma: no cover - a retry always wins


#: Chunks written and sent to the database at once while a snapshot is stored.
INSERT_CHUNKS = 16


def _insert_parts(snapshot_id: int, encoded: _Encoded) -> None:
    """Store a snapshot's chunks, written INSERT_CHUNKS at a time and sent by ``executemany``; a list in two
    places is stored once and copied in the database.

    Not bulk_create: on PostgreSQL that sends the chunks as one text array, which psycopg quotes in
    Python (12 s of a 100,000-item report's 16 s cold build). Not one ``create`` per chunk either: each
    was a round trip through the ORM (0.2 s for a 100,000-item report's 250 chunks), where psycopg's
    ``executemany`` sends them in one pipeline.
    """
    meta, quote = ReportSnapshotPart._meta, connection.ops.quote_name
    column_of = {field.name: str(field.column) for field in meta.concrete_fields}
    snapshot, section_column, chunk, rows = (
        quote(column_of[name]) for name in ("snapshot", "section", "chunk", "rows")
    )
    table = quote(meta.db_table)
    insert = f"INSERT INTO {table} ({snapshot}, {section_column}, {chunk}, {rows}) VALUES (%s, %s, %s, %s)"
    with connection.cursor() as cursor:
        for section in encoded.lists:
            if section in encoded.same_as:
                continue
            numbered = enumerate(encoded.texts(section))
            while batch := [(snapshot_id, section, n, text) for n, text in islice(numbered, INSERT_CHUNKS)]:
                cursor.executemany(insert, batch)
        for section, first in encoded.same_as.items():
            cursor.execute(
                f"INSERT INTO {table} ({snapshot}, {section_column}, {chunk}, {rows}) "
                f"SELECT {snapshot}, %s, {chunk}, {rows} FROM {table} WHERE {snapshot} = %s AND {section_column} = %s",
                [section, snapshot_id, first],
            )


def _prune(study: Study, key: str) -> None:
    """Bound the cache: the latest few snapshots per options, and per study."""
    newest = ReportSnapshot.objects.filter(study=study).order_by("-computed_at", "-id")
    same = list(newest.filter(options_key=key).values_list("pk", flat=True)[KEEP_PER_OPTIONS:])
    others = list(newest.values_list("pk", flat=True)[KEEP_PER_STUDY:])
    if same or others:
        ReportSnapshot.objects.filter(pk__in=same + others).delete()


def _split(report: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Sequence[Any]]]:
    """The report with its long lists replaced by markers (same key order), and the lists by section path."""
    lists: dict[str, Sequence[Any]] = {}

    def walk(node: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in node.items():
            here = (*path, name)
            long = isinstance(value, list | ResponseRows | DisagreementRows) and (
                name == PER_RESPONSE or here == (DISAGREEMENTS,)
            )
            if long:
                section = "/".join(here)
                lists[section] = value
                out[name] = {PARTS: section, "n": len(value)}
            else:
                out[name] = walk(value, here) if isinstance(value, dict) else value
        return out

    return walk(report, ()), lists


def _is_per_response(section: str) -> bool:
    return section.rsplit("/", 1)[-1] == PER_RESPONSE


def _with_lists(snapshot_id: int, report: dict[str, Any], *, per_response: bool = True) -> dict[str, Any]:
    """A stored report with its long lists put back where their markers are (every chunk, in order)."""
    parts: dict[str, list] = {}
    stored = ReportSnapshotPart.objects.filter(snapshot_id=snapshot_id)
    if not per_response:
        stored = stored.exclude(section__endswith=f"/{PER_RESPONSE}")
    for section, rows in stored.order_by("section", "chunk").values_list("section", "rows"):
        parts.setdefault(section, []).extend(json.loads(rows))
    return _put_back(report, parts, per_response=per_response)


def _put_back(report: dict[str, Any], parts: dict[str, list], *, per_response: bool = True) -> dict[str, Any]:
    """The report with each marker replaced by its list (``_split`` undone); without ``per_response``
    those rows' keys are left out (absent, not empty: a reader that needs them fails loudly)."""

    def walk(node: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in node.items():
            if isinstance(value, dict) and PARTS in value and len(value) == 2:
                if per_response or not _is_per_response(value[PARTS]):
                    out[name] = parts.get(value[PARTS], [])
            else:
                out[name] = walk(value) if isinstance(value, dict) else value
        return out

    return walk(report)


def _lazy_lists(snapshot_id: int | None, report: dict[str, Any], full: dict[str, Any] | None) -> dict[str, ChunkedRows]:
    """The disagreement list as a sequence that reads only the chunks a page needs (or the built list, at hand)."""
    rows = full[DISAGREEMENTS] if full is not None else None
    total = report["n_disagreements"] or 0  # None in a report's first sections: the list comes later
    return {DISAGREEMENTS: ChunkedRows(snapshot_id, DISAGREEMENTS, total, rows)}


def current_report(study: Study, options: ReportOptions, *, per_response: bool = True) -> CachedReport:
    """The report of the data as it is now, whole: the cached one if it is current, else built and stored.

    ``per_response=False`` leaves the score blocks' ``per_response`` rows out (their keys absent): the
    CSV, HTML and LaTeX files do not show them, and at a million claims they are most of the report.
    """
    fingerprint = selectors.report_fingerprint(study)
    snapshot = _complete(study, options).filter(fingerprint=fingerprint).first()
    if snapshot is not None:
        full = _with_lists(snapshot.pk, json.loads(snapshot.report), per_response=per_response)
        return CachedReport(
            report=full,
            fingerprint=fingerprint,
            computed_at=snapshot.computed_at,
            current=True,
            snapshot_id=snapshot.pk,
            rows=_lazy_lists(snapshot.pk, full, full),
        )
    return _build_now(study, options, whole=True, per_response=per_response)


#: Chunks of a long list read per query while a JSON download streams (about 300 KB each).
STREAM_CHUNKS_PER_READ = 8


class ReportReplaced(RuntimeError):
    """A streamed download's snapshot was pruned before all its rows were sent (a newer one replaced it)."""


def report_json_pieces(study: Study, options: ReportOptions) -> Iterator[str]:
    """The JSON download of the current report, as pieces of text: indented, its long lists one line each.

    Why pieces: the long lists (per-response score rows, disagreements) are most of a big study's
    report (about 300 MB of JSON at a million predictions). They are sent as stored, a few chunks
    per query, so no process holds them whole, neither as text nor as Python objects; the rest of
    the report is small. Joined, the pieces parse to exactly ``current_report``'s report.
    The report is found (or built) in the call; only the sending is left to the iterator.
    """
    fingerprint = selectors.report_fingerprint(study)
    snapshot = _complete(study, options).filter(fingerprint=fingerprint).only("pk", "report").first()
    snapshot_id: int | None
    if snapshot is not None:
        snapshot_id, main = snapshot.pk, json.loads(snapshot.report)
        del snapshot
    else:
        built = _build_now(study, options, whole=False)
        snapshot_id, main = built.snapshot_id, built.report
    counts: dict[str, int] = dict(
        ReportSnapshotPart.objects.filter(snapshot_id=snapshot_id)
        .order_by()
        .values("section")
        .annotate(chunks=Count("pk"))
        .values_list("section", "chunks")
    )
    # Each marker becomes a placeholder string, the report is indented around them, and the text is
    # cut at each placeholder, where its list goes: the stored chunks' texts without their brackets.
    token = f"\x00{secrets.token_hex(8)}\x00"  # no string in the data can be mistaken for it

    def placeholder(node: dict[str, Any]) -> dict[str, Any]:
        return {
            name: (
                f"{token}{value[PARTS]}"
                if isinstance(value, dict) and PARTS in value and len(value) == 2
                else placeholder(value)
                if isinstance(value, dict)
                else value
            )
            for name, value in node.items()
        }

    indented = json.dumps(placeholder(main), indent=2, allow_nan=False)
    marker = re.compile(re.escape(json.dumps(token)[:-1]) + r'([^"]*)"')  # as JSON writes it, to its closing quote
    return _pieces(indented, marker, snapshot_id, counts)


def _pieces(indented: str, marker: re.Pattern[str], snapshot_id: int | None, counts: dict[str, int]) -> Iterator[str]:
    """The indented report cut at each placeholder, its list streamed in between."""
    at = 0
    for found in marker.finditer(indented):
        yield indented[at : found.start()]
        yield from _list_pieces(snapshot_id, json.loads(f'"{found.group(1)}"'), counts)
        at = found.end()
    yield indented[at:]


def _list_pieces(snapshot_id: int | None, section: str, counts: dict[str, int]) -> Iterator[str]:
    """One stored long list as JSON text, a few chunks per query; ReportReplaced when chunks went missing."""
    yield "["
    first = True
    total = counts.get(section, 0)
    for start in range(0, total, STREAM_CHUNKS_PER_READ):
        wanted = range(start, min(total, start + STREAM_CHUNKS_PER_READ))
        texts = list(
            ReportSnapshotPart.objects.filter(
                snapshot_id=snapshot_id, section=section, chunk__gte=wanted.start, chunk__lt=wanted.stop
            )
            .order_by("chunk")
            .values_list("rows", flat=True)
        )
        if len(texts) != len(wanted):  # pruned meanwhile: a cut-off file must not look whole
            raise ReportReplaced(f"the report of {section} was replaced while it was sent; download it again")
        for text in texts:
            if text == "[]":
                continue
            if not first:
                yield ", "
            yield text[1:-1]
            first = False
    yield "]"


def _build_now(study: Study, options: ReportOptions, *, whole: bool, per_response: bool = True) -> CachedReport:
    """Build and store the report; hand it out whole (downloads) or with markers, as ``page_report`` does."""
    built, fingerprint, seconds = _built(study, options)
    encoded = _Encoded.of(built)
    del built  # tens of MB at 100,000 items; what is handed out is decoded from `encoded`
    snapshot_id = _store(study, options, encoded, fingerprint, seconds)
    report = encoded.whole(per_response=per_response) if whole else json.loads(encoded.main)
    return CachedReport(
        report=report,
        fingerprint=fingerprint,
        computed_at=timezone.now(),
        current=True,  # built in this call: the data as of this request
        snapshot_id=snapshot_id,
        built_now=True,
        rows=_lazy_lists(snapshot_id, report, report if whole else None),
    )


def page_report(study: Study, options: ReportOptions) -> CachedReport:
    """The page's report: current if cached; else the latest older one (not current) and a refresh queued.

    The returned ``report`` lacks the long lists; ``rows`` reads the chunks a page shows.
    With nothing cached at all the report is built in the request (a cold start), or for a big
    study in the background: meanwhile the page says so, then shows its first sections (``partial``).
    """
    fingerprint = selectors.report_fingerprint(study)
    snapshots = _complete(study, options)
    snapshot = snapshots.filter(fingerprint=fingerprint).first()
    current = snapshot is not None
    if snapshot is None:
        snapshot = snapshots.order_by("-computed_at", "-id").first()
    partial = False
    if snapshot is None:
        if annotation_count(study) <= settings.REPORT_INLINE_MAX_LABELS:
            return _build_now(study, options, whole=False)
        request_refresh(study, options, fingerprint)  # queued now, or already queued by an earlier view
        snapshot = (
            ReportSnapshot.objects.filter(study=study, options_key=options_key(options), complete=False)
            .order_by("-computed_at", "-id")
            .first()
        )
        if snapshot is None:
            return _pending(fingerprint)
        partial, current = True, snapshot.fingerprint == fingerprint
    elif not current:
        request_refresh(study, options, fingerprint)  # queued now, or already queued by an earlier view
    report = json.loads(snapshot.report)
    return CachedReport(
        report=report,
        fingerprint=snapshot.fingerprint,
        computed_at=snapshot.computed_at,
        current=current,
        snapshot_id=snapshot.pk,
        refreshing=partial or not current,
        partial=partial,
        rows=_lazy_lists(snapshot.pk, report, None),
    )


def _pending(fingerprint: str) -> CachedReport:
    """What the page shows of a study whose first report is still being built: nothing yet."""
    return CachedReport(
        report={},
        fingerprint=fingerprint,
        computed_at=timezone.now(),
        current=False,
        snapshot_id=None,
        refreshing=True,
        pending=True,
        rows={DISAGREEMENTS: ChunkedRows(None, DISAGREEMENTS, 0, [])},
    )


def cached_current(study: Study, options: ReportOptions, fingerprint: str) -> dict[str, Any] | None:
    """The cached report of this data state, without its long lists, or None (never builds; the charts ask)."""
    text = _complete(study, options).filter(fingerprint=fingerprint).values_list("report", flat=True).first()
    return json.loads(text) if text is not None else None


def snapshot_status(study: Study, options: ReportOptions) -> dict[str, Any]:
    """What the page could show now (its poll asks this; no build).

    ``current``: a whole report of the data as it is now is cached (``computed_at`` says when);
    ``whole``: some whole report is; ``first_sections``: the first sections of one being built are.
    """
    fingerprint = selectors.report_fingerprint(study)
    stored = ReportSnapshot.objects.filter(study=study, options_key=options_key(options)).values_list(
        "fingerprint", "complete", "computed_at"
    )
    found = None
    whole = first_sections = False
    for state, complete, computed_at in stored:  # a few rows: the cache keeps the latest per options
        whole, first_sections = whole or complete, first_sections or not complete
        if complete and state == fingerprint:
            found = computed_at
    return {
        "current": found is not None,
        "computed_at": found.isoformat() if found else None,
        "whole": whole,
        "first_sections": first_sections,
    }


def _retry_seconds() -> float:
    return float(settings.REPORT_REFRESH_RETRY_SECONDS)


#: Queues the background build (study id, options): ``metaeval.tasks`` registers its task's ``enqueue``
#: when it is imported (the app's ``ready()`` imports it). A registry, not an import of the task
#: module, because the task module imports this one (it runs ``refresh_report``): no import circle.
_queue_refresh: Callable[[int, dict[str, Any]], Any] | None = None


def register_refresh_task(queue: Callable[[int, dict[str, Any]], Any]) -> None:
    """Say how a refresh is queued (``metaeval.tasks``: its django-tasks task's ``enqueue``)."""
    global _queue_refresh
    _queue_refresh = queue


def request_refresh(study: Study, options: ReportOptions, fingerprint: str) -> bool:
    """Queue one background build of this report for this data state; False when one is already queued.

    The ``ReportRefresh`` row moves by a conditional UPDATE (or is created once), so of many
    concurrent page views exactly one queues the task; a task asked for longer ago than
    ``REPORT_REFRESH_RETRY_SECONDS`` (its worker may have died) is queued again.
    """
    key = options_key(options)
    now = timezone.now()
    rows = ReportRefresh.objects.filter(study=study, options_key=key)
    moved = rows.exclude(fingerprint=fingerprint, queued_at__gt=now - timedelta(seconds=_retry_seconds())).update(
        fingerprint=fingerprint, queued_at=now, options=options.as_dict()
    )
    if not moved:
        if rows.exists():
            return False
        try:
            with transaction.atomic():
                ReportRefresh.objects.create(
                    study=study, options_key=key, options=options.as_dict(), fingerprint=fingerprint, queued_at=now
                )
        except IntegrityError:  # a concurrent view created it: that one queues
            return False
    if _queue_refresh is None:
        raise ImproperlyConfigured(
            "no report refresh task is registered: metaeval.tasks is imported by the app's ready()"
        )
    _queue_refresh(study.pk, options.as_dict())
    return True


def refresh_report(study_id: int, options_data: dict[str, Any]) -> dict[str, Any]:
    """The background build: store the report of the data as it is when the task runs (if not cached yet).

    For the study's first report of these options, its first sections are stored on the way (the
    page shows them meanwhile); later refreshes need not, the page shows the older whole report.
    """
    study = Study.objects.filter(pk=study_id).first()
    if study is None:
        return {"status": "study deleted"}
    options = options_from_dict(options_data)
    # Which worker builds it: when that worker is gone, any worker queues the build again (recover_lost_refreshes).
    worker = current_worker()
    refresh = ReportRefresh.objects.filter(study=study, options_key=options_key(options))
    refresh.update(worker=worker, attempts=F("attempts") + 1)
    try:
        fingerprint = selectors.report_fingerprint(study)
        stored = _complete(study, options)
        if stored.filter(fingerprint=fingerprint).exists():
            return {"status": "already current", "fingerprint": fingerprint}
        report, fingerprint, seconds = _built(study, options, first_sections=not stored.exists())
        _store(study, options, _Encoded.of(report), fingerprint, seconds)
        return {"status": "built", "fingerprint": fingerprint, "seconds": round(seconds, 3)}
    finally:
        refresh.filter(worker=worker).update(worker="", attempts=0)


def recover_lost_refreshes(lost: set[str]) -> list[ReportRefresh]:
    """Queue again the report builds whose worker is gone (in ``lost``, or no longer registered); a build
    started JOB_MAX_ATTEMPTS times without ending is given up, with the reason in ``error`` (the next
    page view after ``REPORT_REFRESH_RETRY_SECONDS`` asks again). Run by every worker at start and every
    few seconds while idle (annotation.lib.job_runs.recover_lost_work)."""
    held = list(ReportRefresh.objects.exclude(worker="").values_list("pk", "worker"))
    if not held:
        return []
    registered = set(WorkerHeartbeat.objects.filter(pk__in={w for _, w in held}).values_list("pk", flat=True))
    handled: list[ReportRefresh] = []
    for pk, worker in held:
        if worker not in lost and worker in registered:
            continue
        with transaction.atomic():
            row = ReportRefresh.objects.select_for_update().filter(pk=pk, worker=worker).first()
            if row is None:
                continue
            row.worker = ""
            if row.attempts >= settings.JOB_MAX_ATTEMPTS:
                row.error = f"the worker building this report stopped {row.attempts} time(s); given up"
                row.attempts = 0
                row.save(update_fields=["worker", "error", "attempts"])
                logger.warning("report build of study %s failed: %s", row.study_id, row.error)
            else:
                row.queued_at, row.error = timezone.now(), ""
                row.save(update_fields=["worker", "queued_at", "error"])
                if _queue_refresh is not None:
                    transaction.on_commit(partial(_queue_refresh, row.study_id, row.options))
                logger.warning(
                    "report build of study %s: worker died (attempt %d); queued again", row.study_id, row.attempts
                )
        handled.append(row)
    return handled
