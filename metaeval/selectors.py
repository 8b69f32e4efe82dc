"""Reads of the annotation tables that the meta-evaluation needs, as DataFrames.

Each frame is a fixed number of ``values_list`` queries (the label frame: the
answered assignments, their answers and the items, plus one for pseudonyms),
never a query per item or annotation, so a 100,000-label study loads in well
under a second. Annotators appear by pseudonym only. Labels on skipped assignments
are not answers and are left out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import pandas as pd
from django.db import connection
from django.db.models import Count, Max, Q, QuerySet, Sum

from annotation.lib.analysis_rules import excluded_annotator_ids
from annotation.lib.pseudonyms import Pseudonyms, pseudonyms
from annotation.models import (
    Adjudication,
    Annotation,
    Assignment,
    Item,
    Participant,
    ParticipantLink,
    Study,
    StudyMember,
)
from annotation.progress.fingerprint import label_state

from . import snapshot_reads
from .evidence import read_judgements
from .label_rows import ITEM_COLUMNS, LABEL_COLUMNS, LabelRows
from .models import Verifier

__all__ = [
    "LABEL_COLUMNS",
    "ITEM_COLUMNS",
    "EVIDENCE_COLUMNS",
    "label_frame",
    "label_and_item_frames",
    "label_rows",
    "item_frame",
    "evidence_frame",
    "pseudonyms",
    "report_fingerprint",
    "FrameRead",
    "read_frames",
]

EVIDENCE_COLUMNS = [
    "claim",
    "annotator",
    "response_id",
    "system",
    "domain",
    "passage",
    "judgement",
    "source_type",
    "useful",
]


def _answerable_assignments(study: Study, *, include_screened_out: bool = False) -> QuerySet[Assignment]:
    """The assignments whose answers analysis counts: not skipped, and not by crowd participants who
    withdrew or (unless ``include_screened_out``) were screened out (annotation.crowd.selectors;
    the report says how many)."""
    rows = Assignment.objects.filter(study=study).exclude(status=Assignment.Status.SKIPPED).order_by()
    excluded = excluded_annotator_ids(study, include_screened_out=include_screened_out)
    return rows.exclude(annotator_id__in=excluded) if excluded else rows


def _annotations(study: Study, *, include_screened_out: bool = False) -> QuerySet[Annotation]:
    """The labels analysis counts: the answers of ``_answerable_assignments``."""
    counted = _answerable_assignments(study, include_screened_out=include_screened_out)
    return Annotation.objects.filter(study=study, assignment__in=counted)


@dataclass(frozen=True)
class FrameRead:
    """A ``values_list`` query read as a frame: its column names and which of them are integers."""

    rows: QuerySet
    columns: list[str]
    numbers: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()  # boolean columns
    floats: tuple[str, ...] = ()  # nullable numbers: NULL is NaN
    #: Text columns with few distinct values (labels, systems, domains): one str object per value, not per
    #: row. Why: each value psycopg reads is a str of its own, ~60 bytes; a million-prediction report held
    #: a million copies of "supported" per column.
    repeated: tuple[str, ...] = ()


def read_frames(*reads: FrameRead) -> list[pd.DataFrame]:
    """Each read's rows as a DataFrame: on PostgreSQL one array per column, the reads side by side.

    Why arrays: a 100,000-item study's labels are 300,000 rows; psycopg and the ORM build a Python
    tuple per row and pandas then reads them back, where psycopg's C loaders turn a column's
    array into a list at once (``metaeval.snapshot_reads``, which also runs the reads side by
    side in one snapshot when the caller's transaction allows it). The frame is the same either
    way (text as ``str`` columns); ``numbers`` are the integer columns.
    """
    if connection.vendor != "postgresql":
        frames = [pd.DataFrame.from_records(_fetched(read), columns=read.columns) for read in reads]
        return [
            frame.astype(
                {
                    **dict.fromkeys(read.numbers, np.int64),  # as on PostgreSQL, an empty read's too
                    **dict.fromkeys(read.flags, bool),
                    **dict.fromkeys(read.floats, "float64"),
                }
            )
            for frame, read in zip(frames, reads, strict=True)
        ]
    queries = [snapshot_reads.Query(*read.rows.query.sql_with_params(), width=len(read.columns)) for read in reads]
    return [_frame(columns, read) for columns, read in zip(snapshot_reads.column_lists(queries), reads, strict=True)]


def _fetched(read: FrameRead) -> list[tuple]:
    """The read's rows in one ``fetchall`` of the database cursor (SQLite), the same tuples the queryset gives.

    Why not ``list(read.rows)``: the ORM fetches 100 rows at a time and passes each row through
    its converters (a flag's 0/1 to a bool, which ``read_frames`` does per column): at 300,000 labels
    that was about a third of a big report's label read. The columns read here are integers,
    text and flags, whose values SQLite already returns as the ORM would (flags as 0/1).
    """
    sql, params = read.rows.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _frame(columns: list, read: FrameRead) -> pd.DataFrame:
    values = {
        name: np.asarray(column, dtype=np.int64)
        if name in read.numbers
        else np.asarray(column, dtype=bool)
        if name in read.flags
        else np.asarray([np.nan if value is None else value for value in column], dtype=np.float64)
        if name in read.floats
        else pd.array(_interned(column) if name in read.repeated else column, dtype="str")
        for name, column in zip(read.columns, columns, strict=True)
    }
    return pd.DataFrame(values, columns=read.columns)


def _interned(values: list) -> list:
    """The same values, each distinct one a single object (FrameRead.repeated)."""
    seen: dict = {}
    return [seen.setdefault(value, value) for value in values]


def label_frame(study: Study, *, include_gold: bool = False, include_screened_out: bool = False) -> pd.DataFrame:
    """One row per label: item, annotator pseudonym, canonical label, domain, shown order, ...

    The raw read, for tests and tools: numbers that leave Claimlab read ``metaeval.study_frame``,
    which applies every rule of the study (check items, the gold setting, the reference) to it.
    Items with a gold label are left out unless ``include_gold``.
    In the items' import order, each item's labels by annotator pseudonym: the bootstrap
    resamples items by their place in the table (and annotator pairs are listed by theirs),
    so without an order the same labels read in another order (imported differently, moved
    on disk by an edit, another database's plan) gave slightly different intervals.
    """
    labels, _ = label_and_item_frames(study, include_gold=include_gold, include_screened_out=include_screened_out)
    return labels


def label_and_item_frames(
    study: Study, *, include_gold: bool = False, include_screened_out: bool = False
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``label_frame`` and ``item_frame`` of one read (the report needs both; the items are read for the labels)."""
    rows = label_rows(study, include_screened_out=include_screened_out)
    return (rows if include_gold else rows.without_gold()).frame(), rows.items[ITEM_COLUMNS]


def label_rows(study: Study, *, include_screened_out: bool = False) -> LabelRows:
    """Every answer of the counted participants (gold and check items' too) as codes into the study's items
    and annotators; ``metaeval.study_frame`` applies the study's other rules to it."""
    # Three narrow reads (the answered assignments, their answers, the items) joined and ordered
    # here, not one query joining and sorting every label on the server: at 300,000 labels on
    # PostgreSQL the server's join alone took 0.35 s of a big report's first sections (its sort
    # spilled to disk), where the three scans run side by side (metaeval.snapshot_reads) and
    # numpy joins them in 0.05 s.
    assignments, answers, items = read_frames(
        FrameRead(
            _answerable_assignments(study, include_screened_out=include_screened_out).values_list(
                "pk", "item_id", "annotator_id", "left_system"
            ),
            ["id", "item_id", "annotator_id", "left_system"],
            ("id", "item_id", "annotator_id"),
            repeated=("left_system",),
        ),
        FrameRead(
            Annotation.objects.filter(study=study).order_by().values_list("assignment_id", "label"),
            ["assignment_id", "label"],
            ("assignment_id",),
            repeated=("label",),
        ),
        _item_read(study),
    )
    items = _in_import_order(items)
    labels = _answers_of_assignments(answers, assignments)
    return _labels_of_items(labels, items, pseudonyms(study))


def _answers_of_assignments(answers: pd.DataFrame, assignments: pd.DataFrame) -> pd.DataFrame:
    """Each answer of one of ``assignments`` with its assignment's item, annotator and shown side."""
    at = pd.Index(assignments["id"]).get_indexer(answers["assignment_id"])
    kept = np.flatnonzero(at >= 0)  # not an answer the report counts (skipped, a withdrawn participant's)
    at = at[kept]
    return pd.DataFrame(
        {
            "item_id": assignments["item_id"].to_numpy()[at],
            "annotator_id": assignments["annotator_id"].to_numpy()[at],
            "label": answers["label"].array.take(kept),
            "left_system": assignments["left_system"].array.take(at),
        }
    )


def _item_read(study: Study) -> FrameRead:
    """Every item of the study with its primary key (``id``); ``_in_import_order`` orders them."""
    # ordered by _in_import_order: the server's sort of a 100,000-item study's rows was half of this read
    values = (
        Item.objects.filter(study=study)
        .order_by()
        .values_list("pk", "external_id", "domain", "response_id", "system", "gold_label", "position", "is_check")
    )
    return FrameRead(
        values,
        ["id", *ITEM_COLUMNS, "is_check"],
        ("id", "position"),
        ("is_check",),
        repeated=("domain", "response_id", "system", "gold_label"),
    )


def _in_import_order(items: pd.DataFrame) -> pd.DataFrame:
    """The item rows by position, then primary key (the order items were imported in)."""
    order = np.lexsort((items["id"].to_numpy(), items["position"].to_numpy()))
    return items.take(order).reset_index(drop=True)


def _labels_of_items(labels: pd.DataFrame, items: pd.DataFrame, names: Pseudonyms) -> LabelRows:
    """``labels`` as codes into ``items`` and their annotators' names, in ``label_frame``'s order.

    A label whose item is not among ``items`` (an item imported between the two reads) is left
    out: the study's fingerprint has changed with it, so the next report counts it.
    """
    place = pd.Index(items["id"]).get_indexer(labels["item_id"])  # each label's item's place in import order
    kept_rows = np.flatnonzero(place >= 0)
    place = place[kept_rows]
    user_ids, annotator_of = np.unique(labels["annotator_id"].to_numpy()[kept_rows], return_inverse=True)
    annotator_names = [names[int(user_id)] for user_id in user_ids]
    # each item's labels by name (a former member's `user-<id>`), then by user id
    by_name = sorted(range(len(user_ids)), key=lambda k: (annotator_names[k], user_ids[k]))
    name_rank = np.empty(len(user_ids), dtype=np.int64)
    name_rank[by_name] = np.arange(len(user_ids))
    order = np.lexsort((name_rank[annotator_of], place))
    label_rows = kept_rows[order]
    return LabelRows(
        items=items,
        place=place[order],
        annotator=name_rank[annotator_of[order]],
        annotator_names=pd.array([annotator_names[k] for k in by_name], dtype="str"),
        label=labels["label"].array.take(label_rows),
        left_system=labels["left_system"].array.take(label_rows),
    )


def item_frame(study: Study) -> pd.DataFrame:
    """Every item of the study: id, domain, response, system, gold label, position."""
    return _in_import_order(read_frames(_item_read(study))[0])[ITEM_COLUMNS]


def _passage_sources(study: Study) -> dict[str, tuple[str, str, str, list[str]]]:
    """Per item id: its domain, response id, system and its passages' source types, in order."""
    return {
        external_id: (
            domain,
            response_id,
            system,
            [p.get("source_type", "") if isinstance(p, dict) else "" for p in (evidence or [])],
        )
        for external_id, domain, response_id, system, evidence in Item.objects.filter(study=study).values_list(
            "external_id", "domain", "response_id", "system", "payload__evidence"
        )
    }


def annotator_conditions(study: Study) -> dict[str, str]:
    """Each member's between-subject condition by pseudonym ("" for those who never claimed an item)."""
    return dict(StudyMember.objects.filter(study=study).values_list("pseudonym", "condition"))


def answer_times(study: Study, *, include_screened_out: bool = False) -> pd.DataFrame:
    """item (external id), annotator (pseudonym), active_ms of every answer (None where the page sent none)."""
    names = pseudonyms(study)
    stored = (
        _annotations(study, include_screened_out=include_screened_out)
        .order_by()
        .values_list("assignment__item__external_id", "assignment__annotator_id", "active_ms")
    )
    return pd.DataFrame(
        [(item, names[user_id], active_ms) for item, user_id, active_ms in stored],
        columns=["item", "annotator", "active_ms"],
    )


def question_answer_frame(study: Study, *, include_screened_out: bool = False) -> pd.DataFrame:
    """One row per annotation that answered the study's extra questions: item (external id), annotator
    (pseudonym), answers (as stored, per system). The study frame keeps only the labels it counts."""
    names = pseudonyms(study)
    stored = (
        _annotations(study, include_screened_out=include_screened_out)
        .exclude(question_answers={})
        .order_by()
        .values_list("assignment__item__external_id", "assignment__annotator_id", "question_answers")
    )
    rows = [(item, names[user_id], answers) for item, user_id, answers in stored]
    return pd.DataFrame(rows, columns=["item", "annotator", "answers"])


def evidence_frame(
    study: Study, *, include_screened_out: bool = False, leave_out_items: Collection[str] = ()
) -> tuple[pd.DataFrame, int]:
    """One row per readable evidence judgement, with the passage's source type.

    Returns the frame and the number of stored judgement entries that could
    not be read (unknown verdict, bad passage index, or a passage the item
    does not have); those are counted, never guessed. ``leave_out_items`` (external ids:
    the check items, ``metaeval.study_frame``) are not read at all.
    """
    names = pseudonyms(study)
    stored = list(
        _annotations(study, include_screened_out=include_screened_out)
        .filter(~Q(evidence_judgements=[]))
        .exclude(assignment__item__external_id__in=list(leave_out_items))
        .order_by()
        .values_list("assignment__item__external_id", "assignment__annotator_id", "evidence_judgements")
    )
    # The passages' source types only when there are judgements: reading every item's evidence
    # (a JSON document each) took over a second of a 100,000-item report that had none.
    items = _passage_sources(study) if stored else {}
    records: list[tuple] = []
    unreadable = 0
    for external_id, user_id, entries in stored:
        domain, response_id, system, types = items[external_id]
        judgements, bad = read_judgements(entries if isinstance(entries, list) else [])
        unreadable += bad
        for j in judgements:
            if j.passage >= len(types):
                unreadable += 1
                continue
            records.append(
                (
                    external_id,
                    names[user_id],
                    response_id or external_id,
                    system,
                    domain,
                    j.passage,
                    j.judgement,
                    types[j.passage] or "(none)",
                    j.useful,
                )
            )
    return pd.DataFrame.from_records(records, columns=EVIDENCE_COLUMNS), unreadable


def report_fingerprint(study: Study) -> str:
    """A short hash that changes whenever anything a report reads changes.

    The chart ETags and the report cache (``metaeval.reporting.cache``) are keyed by it,
    so nothing stale is ever served as current. Counts catch deletions, the latest
    ``updated_at`` catches inserts, replacements and edits (every write path sets it),
    pseudonyms catch renames. Every annotation counts (skipped ones and crowd participants'
    too: which of them a report leaves out follows from the assignments' and participants'
    states, both in the key), so one key serves every ``include_screened_out`` option.
    Participants' statuses are counted because their services change them by UPDATE
    (no ``updated_at``); adjudications feed the reference labels and the adjudication section.
    """
    # Constant time in the study's size (a warm report page at 100,000 items is mostly this):
    # the labels' part is annotation.progress.fingerprint.label_state (maintained counters and
    # one step down a (study, updated_at) index each), shared with the progress page's cache.
    annotations, answered, items = label_state(study)
    names = sorted(StudyMember.objects.filter(study=study).values_list("user_id", "pseudonym", "is_active"))
    participants = sorted(
        Participant.objects.filter(study=study).order_by().values_list("status").annotate(n=Count("pk"), ids=Sum("pk"))
    )
    adjudications = Adjudication.objects.filter(study=study).aggregate(
        n=Count("pk"), ids=Sum("pk"), last=Max("updated_at")
    )
    # the predictions by their verifiers' versions, moved by every write of them (one row per
    # verifier, not a pass over a million predictions: verifiers/prediction_version.py)
    verifiers = sorted(
        Verifier.objects.filter(study=study).values_list("pk", "name", "updated_at", "predictions_version")
    )
    # which items are checks (Item.is_check follows the link's lists by UPDATE, no updated_at) and the
    # study's rules the study frame applies (metaeval.study_frame), whatever path changed them
    checks = list(ParticipantLink.objects.filter(study=study).values_list("qualification_items", "attention_items"))
    rules = (bool(study.gold_in_agreement), bool(study.checks_in_agreement), str(study.reference_rule))
    key = repr(
        (
            study.pk,
            study.updated_at,
            checks,
            rules,
            annotations,
            answered,
            items,
            names,
            participants,
            adjudications,
            verifiers,
        )
    )
    return hashlib.sha256(key.encode()).hexdigest()[:32]
