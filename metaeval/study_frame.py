"""The study frame: the one read of a study's labels that every number leaving Claimlab comes from.

Why one function: the report's tables, its charts, its CSV / LaTeX / JSON, the Hugging Face
export, the notebook client's API and the planning card each read the labels themselves, and each
applied some of the study's rules: a chart without the gold rule counted 72 labels where the
report counted 90 (issue 29). ``study_frame`` applies them all, once:

- **participants**: withdrawn crowd participants' labels are out, screened-out ones too unless
  ``include_screened_out`` (``annotation.lib.analysis_rules.excluded_annotator_ids``); skipped
  assignments carry no answer;
- **checks**: labels that items used as attention or qualification checks (``Item.is_check``) got
  as ordinary items are out unless ``Study.checks_in_agreement``: checks only score people;
- **gold**: ``rows`` / ``labels`` keep gold items' labels (gold accuracy, the reference, the
  scores need them); ``agreed_rows`` / ``agreed`` are what agreement, preference analysis, the
  disagreement list and every chart of them count: gold items only with ``Study.gold_in_agreement``;
- **reference**: one label per item from the report option ``reference`` or ``Study.reference_rule``
  (``metaeval.reference``: gold, majority, Dawid-Skene, adjudications).

The labels stay codes (``LabelRows``) until a reader needs their strings, so the big report's first
sections keep their fast path: every rule above is one numpy selection, no Python work per label.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

import numpy as np
import pandas as pd

from annotation.adjudication.selectors import AdjudicatedLabels, adjudicated_labels
from annotation.models import Study

from . import selectors, stats
from .label_rows import ITEM_COLUMNS, LabelRows
from .reference import Reference, ReferenceInputs, reference_labels, unavailable_rule_reason

__all__ = [
    "FrameOptions",
    "StudyFrame",
    "TABLE_COLUMNS",
    "frame_options",
    "study_frame",
]

#: Whether the report's later sections read the frame's codes (``LabelRows``: its reference table, the
#: aggregation models' encoding, the scores' human verdicts, the disagreement list, the adjudication
#: queue) instead of factorising the laid-out strings again. The two give equal numbers (tests compare
#: whole reports built both ways: tests/metaeval/test_report_shared_codes.py); False only there.
SHARED_CODES = True

#: The columns of ``StudyFrame.label_table`` (what the API's labels endpoint and the notebook client serve).
TABLE_COLUMNS = [
    "item",
    "annotator",
    "label",
    "domain",
    "gold_label",
    "in_agreement",
    "reference_label",
    "reference_source",
]


class _HasFrameOptions(Protocol):
    @property
    def include_screened_out(self) -> bool: ...

    @property
    def reference(self) -> str | None: ...


@dataclass(frozen=True)
class FrameOptions:
    """The report options that decide which labels count and what each item's reference is.

    ``ReportOptions`` carries them (its other options change how numbers are computed, not from
    which labels); every reader passes its options here, so a chart, a download and the client
    asked with the same options read the same labels.
    """

    include_screened_out: bool = False
    reference: str | None = None  # None: the study's own rule (Study.reference_rule)

    def __post_init__(self) -> None:
        reason = unavailable_rule_reason(self.reference) if self.reference is not None else None
        if reason:
            raise ValueError(reason)


def frame_options(options: _HasFrameOptions | None) -> FrameOptions:
    """The frame's part of any options object (``ReportOptions``, ``FrameOptions``); None: the defaults."""
    if options is None:
        return FrameOptions()
    return FrameOptions(include_screened_out=options.include_screened_out, reference=options.reference)


@dataclass(frozen=True)
class StudyFrame:
    """A study's labels under its rules (module docstring), read once, with its reference labels."""

    study: Study
    options: FrameOptions
    rows: LabelRows  # every counted label, gold items' too, in label_frame's order
    n_check_labels_left_out: int  # labels on check items left out (0 with checks_in_agreement)

    # --- which labels --------------------------------------------------------------------------

    @property
    def items(self) -> pd.DataFrame:
        """Every item of the study (check items too: their gold labels are still gold), in import order."""
        return self.rows.items[ITEM_COLUMNS]

    @cached_property
    def _agreed_items(self) -> np.ndarray:
        """One bool per item: its labels count in agreement (the gold rule; check items are out already)."""
        if self.study.gold_in_agreement:
            return np.ones(len(self.rows.items), dtype=bool)
        return (self.rows.items["gold_label"] == "").to_numpy()

    @cached_property
    def in_agreement(self) -> np.ndarray:
        """One bool per label of ``rows``: it counts in agreement."""
        return self._agreed_items[self.rows.place]

    @cached_property
    def agreed_rows(self) -> LabelRows:
        """The labels agreement, preference analysis, disagreements and the charts of them count, as codes."""
        return self.rows.on_items(self._agreed_items)

    @cached_property
    def labels(self) -> pd.DataFrame:
        """``rows`` laid out as ``label_frame``'s frame (the strings: 0.1 s at 300,000 labels)."""
        return self.rows.frame()

    @cached_property
    def agreed(self) -> pd.DataFrame:
        """``agreed_rows`` as a frame: a selection of ``labels``, never a second layout."""
        return self.labels if self._agreed_items.all() else self.labels.loc[self.in_agreement]

    @cached_property
    def check_item_ids(self) -> list[str]:
        """The external ids of the items used as checks."""
        checks = self.rows.check_items()
        return [str(item) for item in self.rows.items["item"].array[checks]]

    def checks_rule(self) -> str | None:
        """The report's sentence on check items, with counts; None for a study without any."""
        n = len(self.check_item_ids)
        if not n:
            return None
        if self.study.checks_in_agreement:
            return (
                f"the {n} item(s) used as attention or qualification checks count like every other item, with "
                "the labels they got as ordinary items (a study setting: checks in agreement)"
            )
        return (
            f"the {n} item(s) used as attention or qualification checks only score people: the "
            f"{self.n_check_labels_left_out} label(s) they got as ordinary items are left out of every number "
            "computed from human labels here"
        )

    # --- reference labels ------------------------------------------------------------------------

    @property
    def rule(self) -> str:
        """The reference rule: the option when given, else the study's."""
        return str(self.options.reference or self.study.reference_rule)

    @cached_property
    def adjudicated(self) -> AdjudicatedLabels:
        """The adjudicated label per item (``annotation.adjudication.selectors``), read once."""
        return adjudicated_labels(self.study)

    @cached_property
    def reference_inputs(self) -> ReferenceInputs:
        """What the reference sources read: every counted label (gold items' too), the items' gold labels."""
        from .reporting.agreement import categories_for  # the reporting package imports this module

        adjudicated = pd.Series(self.adjudicated.labels, dtype=object)
        if not self.study.checks_in_agreement and self.check_item_ids:
            adjudicated = adjudicated[~adjudicated.index.isin(self.check_item_ids)]
        return ReferenceInputs(
            labels=self.labels[["item", "annotator", "label"]],
            items=self.items[["item", "gold_label"]],
            categories=categories_for(self.study),
            adjudicated=adjudicated,
            codes=self.rows if SHARED_CODES else None,  # the same labels as codes: no second factorisation
        )

    @cached_property
    def reference(self) -> Reference:
        """Each item's reference label and its source, by ``rule``."""
        return reference_labels(self.rule, self.reference_inputs)

    def reference_in(self, mapping: Mapping[str, str], categories: list[str]) -> Reference:
        """``rule`` applied to the labels mapped through ``mapping`` (e.g. a preference label to its direction).

        Why: a preference pair needs the item's preferred *system*; the strict majority of the
        5-point labels has none where two annotators prefer A, one strongly and one slightly.
        Every source (gold, adjudicated, majority, Dawid-Skene) reads the mapped labels.
        """
        inputs = self.reference_inputs
        mapped = ReferenceInputs(
            labels=inputs.labels.assign(label=inputs.labels["label"].map(mapping)).dropna(subset=["label"]),
            items=inputs.items.assign(gold_label=inputs.items["gold_label"].map(mapping).fillna("")),
            categories=categories,
            adjudicated=inputs.adjudicated.map(mapping).dropna() if inputs.adjudicated is not None else None,
        )
        return reference_labels(self.rule, mapped)

    def label_table(self, *, include_gold_items: bool | None = None) -> pd.DataFrame:
        """The labels with their item's reference label and its source (``TABLE_COLUMNS``).

        ``include_gold_items`` None: the labels agreement counts (the study's gold rule); True: gold
        items' labels too; False: none of them. What the API's labels endpoint serves.
        """
        labels = self.labels
        if include_gold_items is None:
            keep = self.in_agreement
        elif include_gold_items:
            keep = np.ones(len(labels), dtype=bool)
        else:
            keep = (labels["gold_label"] == "").to_numpy()
        out = labels.loc[keep, ["item", "annotator", "label", "domain", "gold_label"]].reset_index(drop=True)
        out["in_agreement"] = self.in_agreement[keep]
        reference = self.reference
        for column, values in (("reference_label", reference.labels), ("reference_source", reference.source)):
            given = out["item"].map(values).astype(object)
            out[column] = given.where(given.notna(), None)
        return out

    # --- other reads under the same rules -----------------------------------------------------------

    def evidence(self) -> tuple[pd.DataFrame, int]:
        """``selectors.evidence_frame`` of the same participants, check items' judgements left out likewise."""
        left_out = () if self.study.checks_in_agreement else self.check_item_ids
        return selectors.evidence_frame(
            self.study, include_screened_out=self.options.include_screened_out, leave_out_items=left_out
        )

    def question_answers(self) -> pd.DataFrame:
        """The extra questions' answers of the labels agreement counts (``agreed``: the same participants,
        check and gold rules), one row per question and target (``stats.long_answers``), with the
        answer's main label and, for list and claim questions, the system the target is about."""
        questions = self.study.questions
        stored = selectors.question_answer_frame(self.study, include_screened_out=self.options.include_screened_out)
        counted = stored.merge(self.agreed[["item", "annotator", "label"]], on=["item", "annotator"], how="inner")
        long = stats.long_answers(counted, questions)
        long["system"] = long["target"].str.split("#").str[0].where(long["target"] != "", None)
        return long

    def verifier_reference(self) -> tuple[pd.DataFrame, str]:
        """(long table item / annotator / label, a sentence): what verifiers are scored against, by ``rule``.

        The long table the verifiers section reads (it takes
        each item's strict majority of it and the human ceiling from its labels), from this frame:
        human labels are ``agreed`` (the gold, participants and checks rules); adjudicated and
        Dawid-Skene items are one rating each ("adjudicated", "dawid_skene"); gold labels one "gold".
        """
        human = self.agreed[["item", "annotator", "label"]].reset_index(drop=True)
        reference = self.reference

        def rated(source: str, rater: str) -> pd.DataFrame:
            chosen = reference.labels[reference.source == source]
            return pd.DataFrame({"item": chosen.index.astype(str), "annotator": rater, "label": chosen.to_numpy()})

        def gold() -> pd.DataFrame:
            items = self.items.loc[self.items["gold_label"] != ""]
            return pd.DataFrame({"item": items["item"].to_numpy(), "annotator": "gold", "label": items["gold_label"]})

        if self.rule == "gold":
            frame = gold()
            return frame, f"gold labels ({len(frame)} items; reference rule: gold)"
        if self.rule == "dawid_skene":
            frame = rated("dawid_skene", "dawid_skene")
            return frame, f"the most likely label of a Dawid-Skene model of the human labels ({len(frame)} items)"
        adjudicated = rated("adjudicated", "adjudicated")
        if self.rule == "adjudicated":
            return adjudicated, f"adjudicated labels ({len(adjudicated)} items; reference rule: adjudicated)"
        if self.rule == "adjudicated_else_majority" and len(adjudicated):
            rest = human.loc[~human["item"].isin(adjudicated["item"])]
            return pd.concat([adjudicated, rest], ignore_index=True), (
                f"adjudicated labels where given ({len(adjudicated)} items), else the human labels' strict "
                f"majority ({rest['item'].nunique()} items); reference rule: {self.rule}"
            )
        if len(human):
            return human, "human labels (strict majority per item)"
        return gold(), "gold labels (the study has no human labels)"


def study_frame(study: Study, options: _HasFrameOptions | None = None) -> StudyFrame:
    """The study's labels under its rules (module docstring): three narrow reads, then numpy selections.

    ``options``: a ``ReportOptions`` or ``FrameOptions`` (only ``include_screened_out`` and
    ``reference`` matter); None for the study's defaults.
    """
    chosen = frame_options(options)
    read = selectors.label_rows(study, include_screened_out=chosen.include_screened_out)
    rows = read
    if not study.checks_in_agreement:
        rows = read.on_items(~read.check_items())
    return StudyFrame(study, chosen, rows, len(read) - len(rows))
