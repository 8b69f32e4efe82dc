"""Reads of the annotation tables that the meta-evaluation needs, as DataFrames.

Each frame is one ``values_list`` query (plus one for pseudonyms), never a
query per item or annotation, so a 100,000-label study loads in well under a
second. Annotators appear by pseudonym only. Labels on skipped assignments
are not answers and are left out.
"""

from __future__ import annotations

import hashlib
import io
from typing import cast

import pandas as pd
from django.db import connection
from django.db.backends.postgresql.operations import DatabaseOperations as PostgresOperations
from django.db.models import CharField, Count, F, FilteredRelation, Max, Q, QuerySet, Sum, Value
from django.db.models.functions import Cast, Coalesce, Concat

from annotation.models import (
    Adjudication,
    Annotation,
    Item,
    Participant,
    Study,
    StudyMember,
)
from annotation.selectors import UNKNOWN_PSEUDONYM_PREFIX, pseudonyms
from annotation.selectors.fingerprint import label_state
from annotation.selectors.participants import excluded_annotator_ids

from .evidence import read_judgements
from .models import Prediction, Verifier

__all__ = [
    "LABEL_COLUMNS",
    "ITEM_COLUMNS",
    "EVIDENCE_COLUMNS",
    "label_frame",
    "item_frame",
    "evidence_frame",
    "pseudonyms",
    "report_fingerprint",
]

LABEL_COLUMNS = [
    "item",
    "annotator",
    "label",
    "domain",
    "left_system",
    "response_id",
    "system",
    "gold_label",
    "position",
]
ITEM_COLUMNS = ["item", "domain", "response_id", "system", "gold_label", "position"]
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


def _annotations(study: Study, *, include_screened_out: bool = False) -> QuerySet[Annotation]:
    """The labels analysis counts: not skipped, and not by crowd participants who withdrew or (unless
    ``include_screened_out``) were screened out (annotation.selectors.participants; the report says how many)."""
    rows = Annotation.objects.filter(assignment__study=study).exclude(assignment__status="skipped")
    excluded = excluded_annotator_ids(study, include_screened_out=include_screened_out)
    return rows.exclude(assignment__annotator_id__in=excluded) if excluded else rows


def _frame(rows: QuerySet, columns: list[str], *, numbers: tuple[str, ...]) -> pd.DataFrame:
    """The rows of a ``values_list`` query as a DataFrame: on PostgreSQL through ``COPY ... TO STDOUT``.

    Why COPY: a 100,000-item study's labels are 300,000 rows; psycopg and the ORM build a Python
    tuple per row and pandas then reads them back (0.45 s of the report's first sections), where
    the server's CSV is parsed by pandas' C reader. The frame is the same either way (strings
    kept as they are: no NA guessing, no number guessing); ``numbers`` are the integer columns.
    """
    if connection.vendor != "postgresql":
        return pd.DataFrame.from_records(list(rows), columns=columns)
    sql, params = rows.query.sql_with_params()
    # compose_sql binds the parameters client side (COPY takes none), quoting them as psycopg does
    query = cast(PostgresOperations, connection.ops).compose_sql(sql, params)
    data = io.BytesIO()
    with connection.cursor() as cursor:
        with cursor.cursor.copy(f"COPY ({query}) TO STDOUT (FORMAT CSV)") as copy:
            for block in copy:
                data.write(block)
    if not data.getbuffer().nbytes:
        return pd.DataFrame.from_records([], columns=columns)
    data.seek(0)
    types = {name: ("int64" if name in numbers else str) for name in columns}
    return pd.read_csv(data, header=None, names=columns, dtype=types, keep_default_na=False, na_filter=False)


def label_frame(study: Study, *, include_gold: bool = False, include_screened_out: bool = False) -> pd.DataFrame:
    """One row per label: item, annotator pseudonym, canonical label, domain, shown order, ...

    Items with a gold label are left out unless ``include_gold``: they are
    quality-control items and do not count towards agreement (issue 3).
    In the items' import order, each item's labels by annotator pseudonym: the bootstrap
    resamples items by their place in the table (and annotator pairs are listed by theirs),
    so without an order the same labels read in another order (imported differently, moved
    on disk by an edit, another database's plan) gave slightly different intervals.
    """
    rows = _annotations(study, include_screened_out=include_screened_out)
    if not include_gold:
        rows = rows.filter(assignment__item__gold_label="")
    # The pseudonym comes with the row (a former member's is `user-<id>`, as `pseudonyms` names them):
    # mapping and sorting 300,000 user ids in Python cost 0.1 s of a big report's first sections.
    member = FilteredRelation(
        "assignment__annotator__study_memberships",
        condition=Q(assignment__annotator__study_memberships__study=study),
    )
    name = Coalesce(
        F("member__pseudonym"), Concat(Value(UNKNOWN_PSEUDONYM_PREFIX), Cast("assignment__annotator_id", CharField()))
    )
    values = (
        rows.annotate(member=member, annotator_name=name)
        .order_by("assignment__item__position", "assignment__item_id", "annotator_name", "assignment__annotator_id")
        .values_list(
            "assignment__item__external_id",
            "annotator_name",
            "label",
            "assignment__item__domain",
            "assignment__left_system",
            "assignment__item__response_id",
            "assignment__item__system",
            "assignment__item__gold_label",
            "assignment__item__position",
        )
    )
    return _frame(values, LABEL_COLUMNS, numbers=("position",))


def item_frame(study: Study) -> pd.DataFrame:
    """Every item of the study: id, domain, response, system, gold label, position."""
    values = (
        Item.objects.filter(study=study)
        .order_by("position", "pk")
        .values_list("external_id", "domain", "response_id", "system", "gold_label", "position")
    )
    return _frame(values, ITEM_COLUMNS, numbers=("position",))


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


def evidence_frame(study: Study, *, include_screened_out: bool = False) -> tuple[pd.DataFrame, int]:
    """One row per readable evidence judgement, with the passage's source type.

    Returns the frame and the number of stored judgement entries that could
    not be read (unknown verdict, bad passage index, or a passage the item
    does not have); those are counted, never guessed.
    """
    names = pseudonyms(study)
    stored = list(
        _annotations(study, include_screened_out=include_screened_out)
        .filter(~Q(evidence_judgements=[]))
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
    # the labels' part is annotation.selectors.fingerprint.label_state (maintained counters and
    # one step down a (study, updated_at) index each), shared with the progress page's cache.
    annotations, answered, items = label_state(study)
    names = sorted(StudyMember.objects.filter(study=study).values_list("user_id", "pseudonym", "is_active"))
    participants = sorted(
        Participant.objects.filter(study=study).order_by().values_list("status").annotate(n=Count("pk"), ids=Sum("pk"))
    )
    adjudications = Adjudication.objects.filter(study=study).aggregate(
        n=Count("pk"), ids=Sum("pk"), last=Max("updated_at")
    )
    predictions = Prediction.objects.filter(verifier__study=study).aggregate(
        n=Count("pk"), ids=Sum("pk"), last=Max("updated_at")
    )
    verifiers = sorted(Verifier.objects.filter(study=study).values_list("pk", "name", "updated_at"))
    key = repr(
        (
            study.pk,
            study.updated_at,
            annotations,
            answered,
            items,
            names,
            participants,
            adjudications,
            predictions,
            verifiers,
        )
    )
    return hashlib.sha256(key.encode()).hexdigest()[:32]
