"""Reads about how far a study's annotation has come.

For researchers (the study's progress page): per-annotator numbers and quality
(done, skipped, flagged, median active time, gold accuracy), per-item slot
status with active leases, and flagged items with their reasons. For the
annotator: their own assignment, fetched through them.

Every function issues a fixed number of queries, whatever the size of the
study: aggregates are grouped in the database, never computed per row. The
annotator table (`label_quality`) and the throughput (`label_rate`) read counter
rows and bounded index ranges, not every label (issue 35); the progress page
still keeps them in the cache per state of the labels (progress/cache.py).
"""

# Every read of the annotation app that is more than `obj.field`.

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeAlias, TypedDict

from django.contrib.auth.models import User
from django.db.models import (
    Count,
    ExpressionWrapper,
    F,
    IntegerField,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
)
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.lib.active_time_sketch import RELATIVE_ERROR, merged
from annotation.lib.active_time_sketch import median as sketch_median
from annotation.lib.pseudonyms import pseudonyms, unknown_pseudonym
from annotation.models import (
    ActiveTimeBucket,
    Annotation,
    AnnotatorCount,
    Assignment,
    Item,
    Participant,
    Study,
    StudyMember,
)
from annotation.vocab import ABSTAIN_LABELS as VOCAB_ABSTAIN_LABELS

if TYPE_CHECKING:  # django-stubs-ext is a development dependency
    from django_stubs_ext import WithAnnotations
from annotation.models import DomainCount

Status = Assignment.Status

# What an assignment closed as skipped (slot freed, never served to its annotator again) was, told
# apart by what is stored (issue 29, finding 8: progress counts what people did):
#
# - a skip the annotator pressed (workbench/services.skip): the lease is cleared;
# - a lease that ran out and was taken over (assignment_sql.close_expired), or that had run out when
#   the study closed: the lease is kept, and it ended before the row was closed (`updated_at`);
# - given back on the annotator's behalf, which they did not do: a live lease closed when the study
#   closed, or when a member was deactivated, removed or made a researcher (members/membership.
#   free_leases), keeps its lease, still running when the row was closed; and every skip of a crowd
#   participant, who has no skip button: the items given back when their session ended (the one on
#   screen and the one fetched ahead) and items met earlier as a check. An item fetched ahead and
#   released by the page (assignment_sql.delete_unseen_ahead) leaves no row at all.


def _participant_users(study: Study) -> QuerySet[Participant, Any]:
    """The user ids of the study's crowd participants (a subquery)."""
    return Participant.objects.filter(study=study).values("member__user_id")


def pressed_skip(study: Study) -> Q:
    """A skip its annotator pressed: closed with the lease cleared, by someone who has a skip button."""
    return Q(status=Status.SKIPPED, lease_expires_at__isnull=True) & ~Q(annotator_id__in=_participant_users(study))


#: A lease that ran out: closed after its expiry (taken over, or the study closed over it).
TIMED_OUT = Q(status=Status.SKIPPED, lease_expires_at__lt=F("updated_at"))

#: Participants shown as having left: their labels are out of analysis (metaeval.selectors), and the
#: progress page marks them so.
LEFT_STUDY: dict[str, str] = {
    Participant.Status.WITHDRAWN: "withdrawn",
    Participant.Status.SCREENED_OUT: "screened out",
}


# --- the annotator's own ------------------------------------------------------


def own_assignment(user: User, study: Study, assignment_id: int) -> Assignment | None:
    """One of the user's assignments in this study (with item and answer), or None."""
    assignment = (
        Assignment.objects.filter(study=study, annotator=user, pk=assignment_id)
        .select_related("item", "annotation")
        .first()
    )
    if assignment is not None:
        assignment.study = study  # display_payload reads the study; spare a query
    return assignment


# --- per annotator --------------------------------------------------------------


@dataclass
class AnnotatorRow:
    """One annotator's numbers in a study (shown by pseudonym only)."""

    user_id: int
    pseudonym: str
    is_external: bool = False
    #: A crowd participant who left ("withdrawn", "screened out"): marked, their labels out of analysis.
    left_study: str = ""
    done: int = 0
    skipped: int = 0
    timed_out: int = 0
    active: int = 0
    flagged: int = 0
    timed: int = 0
    median_active_ms: float | None = None
    gold_n: int = 0
    gold_correct: int = 0
    labelled: int = 0
    abstained: int = 0
    alerts: list[str] = field(default_factory=list)

    @property
    def abstain_share(self) -> float | None:
        """Share of the annotator's labels that are "both bad" / "inconclusive"; None without labels."""
        return self.abstained / self.labelled if self.labelled else None

    @property
    def abstain_percent(self) -> float | None:
        share = self.abstain_share
        return None if share is None else 100 * share

    @property
    def median_seconds(self) -> float | None:
        return None if self.median_active_ms is None else self.median_active_ms / 1000

    @property
    def gold_share(self) -> float | None:
        """Share of gold items labelled as the gold says; None when the annotator met no gold item."""
        return self.gold_correct / self.gold_n if self.gold_n else None

    @property
    def gold_percent(self) -> float | None:
        share = self.gold_share
        return None if share is None else 100 * share


#: The table's numbers read from the counters (`label_quality`), the rest being live (`annotator_rows`).
LABEL_FIELDS = ("skipped", "timed_out", "timed", "median_active_ms", "gold_n", "gold_correct", "labelled", "abstained")


@dataclass
class LabelQuality:
    """The part of the annotator table read from the counters, as plain data (it is cached).

    `annotators`: user id -> LABEL_FIELDS; `study_median_ms`: the median active time over
    every timed label, which the speeder alert compares against.
    """

    annotators: dict[int, dict[str, float | int | None]]
    study_median_ms: float | None


def annotator_quality(study: Study) -> list[AnnotatorRow]:
    """Per annotator: done, skipped, timed out, active, flagged, median active time, gold accuracy.

    Read now from the counters (`label_quality`); the progress page serves the same rows from a
    cache (progress/cache.py).
    """
    return annotator_rows(study, label_quality(study))


def annotator_rows(study: Study, quality: LabelQuality) -> list[AnnotatorRow]:
    """The annotator table: `quality`'s numbers with the live ones, and the alerts they raise.

    Four queries whose cost does not grow with the study's labels: the members (with the status
    of those who are crowd participants, live: one who withdrew or was screened out is marked),
    done from the counter rows (progress/counters.py; every answer ends its assignment as
    submitted), open now from the active assignments (a partial index) and flagged from the
    flagged ones (another). Anyone holding assignments appears, including imported identities and
    former members (as `user-<id>`, as in the export).
    """
    rows: dict[int, AnnotatorRow] = {
        user_id: AnnotatorRow(
            user_id=user_id,
            pseudonym=pseudonym,
            is_external=external,
            left_study=LEFT_STUDY.get(participant_status or "", ""),
        )
        for user_id, pseudonym, external, participant_status in StudyMember.objects.filter(
            study=study, role=StudyMember.Role.ANNOTATOR
        ).values_list("user_id", "pseudonym", "is_external", "participant__status")
    }

    def row(user_id: int) -> AnnotatorRow:
        if user_id not in rows:
            rows[user_id] = AnnotatorRow(user_id=user_id, pseudonym=unknown_pseudonym(user_id))
        return rows[user_id]

    done = AnnotatorCount.objects.filter(study=study).values("user_id").annotate(n=Sum("annotations")).order_by()
    for entry in done:
        if entry["n"]:
            row(entry["user_id"]).done = entry["n"]
    for field_name, rows_counted in (
        ("active", Assignment.objects.filter(study=study, status=Status.ACTIVE)),
        ("flagged", Assignment.objects.filter(study=study, flagged=True)),
    ):
        for user_id, n in (
            rows_counted.order_by().values("annotator_id").annotate(n=Count("pk")).values_list("annotator_id", "n")
        ):
            setattr(row(user_id), field_name, n)
    for user_id, numbers in quality.annotators.items():
        target = row(user_id)
        for name in LABEL_FIELDS:
            setattr(target, name, numbers[name])
    ordered = sorted(rows.values(), key=lambda entry: (entry.is_external, entry.pseudonym))
    for annotator in ordered:
        annotator.alerts = quality_alerts(annotator, quality.study_median_ms)
    return ordered


def no_label_fields() -> dict[str, float | int | None]:
    """LABEL_FIELDS of an annotator without labels: zero counts, no median."""
    numbers: dict[str, float | int | None] = dict.fromkeys(LABEL_FIELDS, 0)
    numbers["median_active_ms"] = None
    return numbers


def label_quality(study: Study) -> LabelQuality:
    """Per annotator: skipped, timed out, timed and labelled answers, abstentions, gold accuracy,
    median active time; and the study's median active time.

    Two queries over counter rows (progress/counters.py, quality_counters.py: kept by every write
    in its transaction), whose cost grows with the annotators and domains, not the labels (issue 35):
    the sums per annotator, and the active-time sketch's buckets (lib/active_time_sketch.py). The
    medians are the sketch's, within `SKETCH_ERROR` (1/128) of the exact ones, relative; the rest
    is exact. `tally.label_quality_from_rows` computes the same from every label (the tests' reference).
    Skipped counts the skips pressed and timed out the leases that ran out, not what was given back
    on the annotator's behalf (`pressed_skip`, `TIMED_OUT`).
    """
    numbers: dict[int, dict[str, float | int | None]] = defaultdict(no_label_fields)
    sums = (
        AnnotatorCount.objects.filter(study=study)
        .order_by()
        .values("user_id")
        .annotate(
            skipped_n=Sum("skipped"),
            timed_out_n=Sum("timed_out"),
            timed_n=Sum("timed"),
            labelled=Sum("annotations"),
            abstained_n=Sum("abstained"),
            gold=Sum("gold_n"),
            right=Sum("gold_correct"),
        )
    )
    for entry in sums:
        if entry["labelled"] or entry["skipped_n"] or entry["timed_out_n"]:
            numbers[entry["user_id"]].update(
                skipped=entry["skipped_n"],
                timed_out=entry["timed_out_n"],
                timed=entry["timed_n"],
                labelled=entry["labelled"],
                abstained=entry["abstained_n"],
                gold_n=entry["gold"],
                gold_correct=entry["right"],
            )
    sketches: dict[int, dict[int, int]] = defaultdict(dict)
    for user_id, bucket, labels in ActiveTimeBucket.objects.filter(study=study, labels__gt=0).values_list(
        "user_id", "bucket", "labels"
    ):
        sketches[user_id][bucket] = labels
    for user_id, sketch in sketches.items():
        numbers[user_id]["median_active_ms"] = sketch_median(sketch)
    study_median = sketch_median(merged(sketches.values()))
    return LabelQuality(annotators=dict(numbers), study_median_ms=study_median)


# --- alerts -------------------------------------------------------------------------

#: Labels that decline to decide: a high share of them may mean an annotator avoids hard items (vocab.ABSTAIN_LABELS).
ABSTAIN_LABELS = VOCAB_ABSTAIN_LABELS
#: How far a median active time shown may be from the exact one, relative (the sketch's; stated on the page).
SKETCH_ERROR = RELATIVE_ERROR
SKETCH_ERROR_TEXT = f"{SKETCH_ERROR:.2%} (1/{round(1 / SKETCH_ERROR)})"
#: A likely speeder: median active time below this share of the study's median ...
SPEEDER_RATIO = 1 / 3
#: ... over at least this many timed labels (fewer say little about a habit).
SPEEDER_MIN_LABELS = 10
#: Low gold accuracy: below this share correct ...
LOW_GOLD_ACCURACY = 0.6
#: ... on at least this many gold items.
LOW_GOLD_MIN_ITEMS = 5

SPEEDER_RULE = (
    f"median active time below one third of the study's median, over at least {SPEEDER_MIN_LABELS} timed labels"
)
LOW_GOLD_RULE = f"gold accuracy below {LOW_GOLD_ACCURACY:.0%} on at least {LOW_GOLD_MIN_ITEMS} gold items"


def quality_alerts(row: AnnotatorRow, study_median_ms: float | None) -> list[str]:
    """Why this annotator's answers deserve a look (SPEEDER_RULE, LOW_GOLD_RULE); empty when none applies."""
    alerts = []
    if (
        study_median_ms
        and row.median_active_ms is not None
        and row.timed >= SPEEDER_MIN_LABELS
        and row.median_active_ms < SPEEDER_RATIO * study_median_ms
    ):
        alerts.append(
            f"likely speeder: median {row.median_active_ms / 1000:.1f} s per item, "
            f"study median {study_median_ms / 1000:.1f} s"
        )
    share = row.gold_share
    if share is not None and row.gold_n >= LOW_GOLD_MIN_ITEMS and share < LOW_GOLD_ACCURACY:
        alerts.append(f"low gold accuracy: {row.gold_correct} of {row.gold_n} ({share:.0%})")
    return alerts


# --- per item -------------------------------------------------------------------

#: Filters of the per-item table: name -> what it shows.
ITEM_STATES = {
    "": "all items",
    "open": "in progress",
    "complete": "complete",
    "untouched": "not started",
    "flagged": "flagged",
}


class SlotCounts(TypedDict):
    """What `items_with_slots` adds to each item: its assignments by state (the submitted ones are its answers)."""

    n_skipped: int
    n_timed_out: int
    n_active: int
    n_flagged: int


ItemWithSlots: TypeAlias = "WithAnnotations[Item, SlotCounts]"


def _assignments_of_item(condition: Q) -> Coalesce:
    """How many of the outer item's assignments meet `condition` (0 when none)."""
    matching = (
        Assignment.objects.filter(condition, item_id=OuterRef("pk"))
        .order_by()
        .values("item_id")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(matching), 0)


#: A filter of the per-item table matching at most this many items reads them through its own index
#: and sorts them, instead of walking the import order (`items_with_slots`).
FEW_MATCHING_ITEMS = 20_000


def items_with_slots(study: Study, state: str = "", *, matching: int | None = None) -> QuerySet[ItemWithSlots]:
    """The study's items in import order with their slot counts (paginate this).

    `state` narrows them (`_in_state`): "open", "complete", "untouched", "flagged". `matching`: how
    many items the filter keeps (`items_in_state`). When they are few, the import order is asked
    for as an expression the (study, position) index cannot give: PostgreSQL otherwise walks that
    index through every item to find a few (issue 35: 0.8 s for the items in progress of a
    1,000,000-item study with none), and now reads the few through the (study, answers, slots)
    index and sorts them. The order is the same.
    """
    # Answers are the item's own count (Item.n_answers); the rest counted per item by correlated subqueries, not by grouping a join of every item with its
    # assignments: the database counts for the 50 rows of the page only, and the paginator's
    # COUNT reads the items alone (the grouped join took 0.3 s per view at 100,000 items).
    items = (
        Item.objects.filter(study=study)
        .annotate(
            n_skipped=_assignments_of_item(pressed_skip(study)),
            n_timed_out=_assignments_of_item(TIMED_OUT),
            n_active=_assignments_of_item(Q(status=Status.ACTIVE)),
            n_flagged=_assignments_of_item(Q(flagged=True)),
        )
        .only(
            "pk",
            "external_id",
            "domain",
            "summary",
            "slots_taken",
            "n_answers",
            "closed_after",
            "gold_label",
            "position",
        )
        .order_by("position", "pk")
    )
    if not state:
        return items
    items = items.filter(_in_state(study, state))
    if matching is not None and matching <= FEW_MATCHING_ITEMS:
        items = items.order_by(ExpressionWrapper(F("position") + 0, output_field=IntegerField()), "pk")
    return items


def _in_state(study: Study, state: str) -> Q:
    """The items a filter of the per-item table keeps, by their answer and slot counts (indexed with the study).

    "open": some answers but fewer than N, or none yet and a slot taken; "complete": N answers (or, with
    adaptive overlap, closed by its rule); "untouched": neither an answer nor a slot taken (an adaptive
    study's items count their unopened slots as taken: workbench/adaptive.py); "flagged": a flagged assignment.
    """
    n, unopened = study.slots_per_item, study.unopened_slots
    if state == "open":
        answered, claimed = _open_parts(study)
        return answered | claimed
    if state == "complete":
        return Q(n_answers__gte=n) | Q(closed_after__isnull=False) if unopened else Q(n_answers__gte=n)
    if state == "untouched":
        return Q(n_answers=0, slots_taken=unopened)
    if state == "flagged":
        # through the partial index of flagged assignments: time that grows with the flags, not the items
        return Q(pk__in=Assignment.objects.filter(study=study, flagged=True).values("item_id"))
    raise ValueError(f"no item filter {state!r}")


def _open_parts(study: Study) -> tuple[Q, Q]:
    """The items under way, in two disjoint parts: some answers but fewer than N; none yet and a slot taken."""
    n, unopened = study.slots_per_item, study.unopened_slots
    open_only = Q(closed_after__isnull=True) if unopened else Q()
    return Q(n_answers__gt=0, n_answers__lt=n) & open_only, Q(n_answers=0, slots_taken__gt=unopened) & open_only


def items_in_state(study: Study, state: str, *, complete: int | None = None) -> int:
    """How many items `items_with_slots(study, state)` lists: through the (study, answers, slots) index.

    `complete`: the study's complete items from its counters (`study_counts`), which the page has
    already read; the complete items are then not counted again. The others are counted in time
    that grows with what they count: the items under way, not started, or flagged.
    """
    if state == "complete" and complete is not None:
        return complete
    if state == "open":
        # Each part on its own is a range of the (study, answers, slots) index; PostgreSQL reads their OR as
        # a filter over every item of the study instead (45 ms at a million items, issue 35).
        return sum(Item.objects.filter(Q(study=study) & part).count() for part in _open_parts(study))
    return Item.objects.filter(Q(study=study) & _in_state(study, state)).count()


@dataclass
class Lease:
    pseudonym: str
    expires_at: datetime | None
    expired: bool


@dataclass
class ItemSlots:
    item: ItemWithSlots
    slots: int
    leases: list[Lease] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.item.n_answers >= self.slots or self.item.closed_after is not None

    @property
    def taken(self) -> int:
        """Slots in use: answers and leases out (an adaptive item's counter also counts slots not opened)."""
        return self.item.n_answers + len(self.leases)


def item_slot_status(study: Study, items: Iterable[ItemWithSlots], *, now: datetime | None = None) -> list[ItemSlots]:
    """Slot status of a page of items (from `items_with_slots`), with their active leases: two queries."""
    now = now or timezone.now()
    items = list(items)  # read twice
    ids = [item.pk for item in items]
    leases: dict[int, list[Lease]] = defaultdict(list)
    if ids:
        names = pseudonyms(study)
        active = (
            Assignment.objects.filter(item_id__in=ids, status=Status.ACTIVE)
            .order_by("lease_expires_at", "pk")
            .values_list("item_id", "annotator_id", "lease_expires_at")
        )
        for item_id, annotator_id, expires_at in active:
            leases[item_id].append(Lease(names[annotator_id], expires_at, expires_at is not None and expires_at < now))
    return [ItemSlots(item=item, slots=study.slots_per_item, leases=leases[item.pk]) for item in items]


# --- flags ------------------------------------------------------------------------


@dataclass
class Flag:
    external_id: str
    pseudonym: str
    reason: str
    status: str
    when: datetime


def flagged(study: Study, *, limit: int = 100) -> tuple[list[Flag], int]:
    """The latest flagged assignments (item, who, why, status) and how many there are in all.

    Both read the partial index of the flagged assignments: they cost what the flags do, not the study.
    """
    flags = Assignment.objects.filter(study=study, flagged=True)
    total = flags.count()
    if not total:
        return [], 0
    names = pseudonyms(study)
    rows = flags.order_by("-updated_at", "-pk").values_list(
        "item__external_id", "annotator_id", "flag_reason", "status", "updated_at"
    )[:limit]
    return [
        Flag(external_id, names[annotator_id], reason, status, when)
        for external_id, annotator_id, reason, status, when in rows
    ], total


# --- throughput -------------------------------------------------------------------


@dataclass
class Throughput:
    """Labels per hour made here (web and API; imported labels are not collection speed) and an ETA.

    The ETA divides the labels still missing by the last hour's rate: the
    pace of the people working now, not of the study's first day.
    """

    last_hour: int
    collected: int
    first: datetime | None
    last: datetime | None
    remaining: int

    @property
    def overall_per_hour(self) -> float | None:
        """Labels per hour from the first label to the latest; None before two labels an instant apart."""
        if self.first is None or self.last is None or self.last <= self.first:
            return None
        return self.collected / ((self.last - self.first).total_seconds() / 3600)

    @property
    def eta(self) -> timedelta | None:
        """Time to the last missing label at the last hour's rate; None when nothing is missing or nobody works."""
        if self.remaining <= 0 or not self.last_hour:
            return None
        return timedelta(hours=self.remaining / self.last_hour)

    @property
    def eta_note(self) -> str:
        """Why there is no ETA while labels are missing; "" otherwise."""
        return "no estimate: no label in the last hour" if self.remaining > 0 and not self.last_hour else ""

    @property
    def eta_text(self) -> str:
        if self.remaining <= 0:
            return "complete"
        eta = self.eta
        if eta is None:
            return "—"
        minutes = max(1, round(eta.total_seconds() / 60))
        if minutes < 120:
            return f"about {minutes} min"
        hours = minutes / 60
        return f"about {hours:.0f} h" if hours < 48 else f"about {hours / 24:.1f} days"


class LabelRate(TypedDict):
    """What `label_rate` counts of the labels made here, as of `now`."""

    last_hour: int
    collected: int
    first: datetime | None
    last: datetime | None
    #: The oldest of the last hour's labels: until it is an hour old, `last_hour` holds without new labels.
    hour_oldest: datetime | None


def label_rate(study: Study, *, now: datetime) -> LabelRate:
    """Labels made here (not imported) in the hour before `now` and over the study's span.

    Four reads, none of every label (issue 35): how many were made here from the counter rows
    (answers less those imported), the first and the latest made here one step each into the
    index of the labels made here (study, created_at), and the last hour's through the same index
    (their cost grows with the labels of that hour, not with the study).
    """
    made_here = Annotation.objects.filter(study=study).exclude(source=Annotation.Source.IMPORT)
    counted = AnnotatorCount.objects.filter(study=study).aggregate(
        n=Coalesce(Sum("annotations"), 0), imported=Coalesce(Sum("imported"), 0)
    )
    hour = made_here.filter(created_at__gte=now - timedelta(hours=1)).aggregate(
        last_hour=Count("pk"), hour_oldest=Min("created_at")
    )
    times = made_here.order_by().values_list("created_at", flat=True)
    return LabelRate(
        last_hour=hour["last_hour"],
        collected=counted["n"] - counted["imported"],
        first=times.order_by("created_at").first(),
        last=times.order_by("-created_at").first(),
        hour_oldest=hour["hour_oldest"],
    )


def throughput(study: Study, *, expected: int, collected_total: int, now: datetime | None = None) -> Throughput:
    """Labels in the last hour and over the study's span, and what is left of `expected`: one query."""
    rate = label_rate(study, now=now or timezone.now())
    return Throughput(
        last_hour=rate["last_hour"],
        collected=rate["collected"],
        first=rate["first"],
        last=rate["last"],
        remaining=max(0, expected - collected_total),
    )


def annotation_count(study: Study) -> int:
    """The study's answers, from the counter rows (progress/counters.py): constant time whatever its size."""
    return AnnotatorCount.objects.filter(study=study).aggregate(n=Coalesce(Sum("annotations"), 0))["n"]


def item_totals(study: Study) -> tuple[int, int]:
    """(items, items with a gold label) of the study, from the counter rows: constant time whatever its size."""
    totals = DomainCount.objects.filter(study=study).aggregate(
        n=Coalesce(Sum("items"), 0), gold=Coalesce(Sum("gold"), 0)
    )
    return totals["n"], totals["gold"]


def labels_not_needed(study: Study) -> int:
    """Adaptive overlap: the labels the items it closed below N will never ask for (0 in other studies), so
    "labels of expected" shrinks as items close (workbench/adaptive.py)."""
    if not study.is_adaptive:
        return 0
    closed = Item.objects.filter(study=study, closed_after__isnull=False).aggregate(
        n=Coalesce(Count("pk"), 0), answers=Coalesce(Sum("closed_after"), 0)
    )
    return closed["n"] * study.slots_per_item - closed["answers"]


def study_counts(study: Study) -> dict[str, int]:
    """Headline numbers of a study's overview, in four queries whatever the study's size.

    Items and annotations come from the counter rows (progress/counters.py);
    `items_complete` is the items holding all N labels. Annotators and active
    assignments are counted from their rows: they grow with the people at work,
    not with the study (active assignments through the `assignment_leases` index).
    """
    labels = AnnotatorCount.objects.filter(study=study).aggregate(
        n_annotations=Coalesce(Sum("annotations"), 0), n_complete=Coalesce(Sum("complete"), 0)
    )
    items, _gold = item_totals(study)
    annotators = StudyMember.objects.filter(study=study, role=StudyMember.Role.ANNOTATOR).count()
    active = Assignment.objects.filter(study=study, status=Assignment.Status.ACTIVE).count()
    return {
        "items": items,
        "items_complete": labels["n_complete"],
        "annotations": labels["n_annotations"],
        "expected": items * study.slots_per_item - labels_not_needed(study),
        "annotators": annotators,
        "active_assignments": active,
    }
