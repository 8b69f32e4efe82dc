"""The size of the adjudication queue, counted from the labels the report has already read.

Why: ``annotation.adjudication.selectors.queue_size`` counts it in the database, which
took 0.4 s of a 100,000-item report (a grouping of every label by item and label) for a
number the report's label frame already holds. The frame holds every answer the queue
counts unless some annotators' labels are left out of analysis (withdrawn or screened-out
crowd participants); then, and for the rules that read assignments, the database counts.
"""

from __future__ import annotations

import pandas as pd

from annotation.adjudication.selectors import queue_size
from annotation.lib.analysis_rules import excluded_annotator_ids
from annotation.models import AdjudicationRule, Study
from metaeval.label_rows import LabelRows

from .votes import votes_per_item

__all__ = ["queue_size_with"]


def queue_size_with(study: Study, labels: pd.DataFrame | LabelRows, *, include_screened_out: bool) -> int:
    """How many items the study's adjudication queue holds; ``labels`` is the report's label frame
    (gold items included, read with the same ``include_screened_out``), or its rows as codes
    (``StudyFrame.rows``: the items' codes are the frame's item column factorised, without its strings)."""
    rule = study.adjudication_rule
    if rule == AdjudicationRule.FLAGGED or excluded_annotator_ids(study, include_screened_out=include_screened_out):
        return queue_size(study)
    if not len(labels):
        return 0
    if rule == AdjudicationRule.AUDIT:
        n_items = labels.n_items() if isinstance(labels, LabelRows) else labels["item"].nunique()
        return round(study.adjudication_audit_share * n_items)
    if isinstance(labels, LabelRows):
        votes, _ = votes_per_item(pd.factorize(labels.place)[0], labels.label)
    else:
        votes, _ = votes_per_item(pd.factorize(labels["item"])[0], labels["label"])
    given = votes.sum(axis=1)
    no_majority = 2 * votes.max(axis=1) <= given
    no_unanimity = (votes > 0).sum(axis=1) > 1
    lacking = no_majority if rule == AdjudicationRule.NO_MAJORITY else no_unanimity
    return int((lacking & (given >= 2)).sum())
