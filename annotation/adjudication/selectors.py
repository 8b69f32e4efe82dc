"""Reads of adjudication: the queue a study's rule builds, one item as the adjudicator sees it,
and the adjudicated label of each item (what the report's reference rule uses)."""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Count, QuerySet

from annotation.lib.pseudonyms import pseudonyms
from annotation.lib.rawsql import fetch_one, names
from annotation.models import Adjudication, AdjudicationRule, Annotation, Assignment, Item, Study, StudyMember
from annotation.questions.answers import answer_lines


@dataclass
class QueueEntry:
    """One item of the adjudication queue with the labels that put it there."""

    item: str
    domain: str
    labels: dict[str, int]
    adjudications: int
    mine: bool


@dataclass
class AdjudicatedLabels:
    """The adjudicated label per item (external id), and the items whose adjudicators disagree."""

    labels: dict[str, str] = field(default_factory=dict)
    disagreements: list[str] = field(default_factory=list)


def _labels_by_item(study: Study) -> dict[int, list[str]]:
    """Item pk -> the labels of its answered (not skipped) assignments, items in import order."""
    rows = (
        Annotation.objects.filter(assignment__study=study)
        .exclude(assignment__status=Assignment.Status.SKIPPED)
        .order_by("assignment__item__position", "assignment__item_id")
        .values_list("assignment__item_id", "label")
    )
    labels: dict[int, list[str]] = defaultdict(list)
    for item_id, label in rows:
        labels[item_id].append(label)
    return labels


def _audit_rank(seed: int, external_id: str) -> str:
    """A stable pseudo-random rank of an item for the audit draw (same seed, same draw)."""
    return hashlib.sha256(f"{seed}:{external_id}".encode()).hexdigest()


def queue_item_ids(study: Study) -> list[int]:
    """Item pks in the study's adjudication queue under its rule, in import order; one query.

    Only items with at least two labels can lack unanimity or a majority; the
    audit rule draws round(share x labelled items) of the items with a label.
    """
    rule = study.adjudication_rule
    if rule == AdjudicationRule.FLAGGED:
        flagged = (
            Assignment.objects.filter(study=study, flagged=True)
            .order_by("item__position", "item_id")
            .values_list("item_id", flat=True)
        )
        return list(dict.fromkeys(flagged))
    if rule == AdjudicationRule.AUDIT:
        rows = (
            Annotation.objects.filter(assignment__study=study)
            .exclude(assignment__status=Assignment.Status.SKIPPED)
            .order_by("assignment__item__position", "assignment__item_id")
            .values_list("assignment__item_id", "assignment__item__external_id")
        )
        labelled = list(dict.fromkeys(rows))
        size = round(study.adjudication_audit_share * len(labelled))
        drawn = {pk for pk, external_id in sorted(labelled, key=lambda e: _audit_rank(study.seed, e[1]))[:size]}
        return [pk for pk, _ in labelled if pk in drawn]
    chosen = []
    for pk, given in _labels_by_item(study).items():
        if len(given) < 2:
            continue
        counts = Counter(given)
        if rule == AdjudicationRule.NO_MAJORITY:
            if 2 * max(counts.values()) <= len(given):
                chosen.append(pk)
        elif len(counts) > 1:
            chosen.append(pk)
    return chosen


def queue_size(study: Study) -> int:
    """How many items `queue_item_ids` holds, counted by the database.

    Why: the report shows only the number, and listing every label of a study of
    100,000 items into Python for it took over a second of each report build.
    """
    rule = study.adjudication_rule
    answered = Annotation.objects.filter(study=study).exclude(assignment__status=Assignment.Status.SKIPPED)
    if rule == AdjudicationRule.FLAGGED:
        return Assignment.objects.filter(study=study, flagged=True).values("item_id").distinct().count()
    if rule == AdjudicationRule.AUDIT:
        labelled = answered.values("assignment__item_id").distinct().count()
        return round(study.adjudication_audit_share * labelled)
    annotation, assignment = names(Annotation), names(Assignment)
    # Per item, from its per-label counts: no unanimity = more than one label given;
    # no strict majority = the commonest label has at most half of the item's labels.
    lacking = "COUNT(*) > 1" if rule == AdjudicationRule.NO_UNANIMITY else "2 * MAX(votes) <= SUM(votes)"
    per_label = (
        f"SELECT a.{assignment.item} AS item_id, COUNT(*) AS votes FROM {annotation.table} AS n "
        f"JOIN {assignment.table} AS a ON a.{assignment.id} = n.{annotation.assignment} "
        f"WHERE n.{annotation.study} = %s AND a.{assignment.status} <> %s "
        f"GROUP BY a.{assignment.item}, n.{annotation.label}"
    )
    row = fetch_one(
        f"SELECT COUNT(*) FROM (SELECT item_id FROM ({per_label}) AS per_label "
        f"GROUP BY item_id HAVING SUM(votes) >= 2 AND {lacking}) AS queued",
        [study.pk, Assignment.Status.SKIPPED.value],
    )
    return int(row[0]) if row else 0


def adjudication_queue(study: Study, user: User) -> list[QueueEntry]:
    """The queue as a list: each item's label counts, its adjudications, and whether `user` did it."""
    ids = queue_item_ids(study)
    labels = _labels_by_item(study)
    # Read by study, not by `IN (ids)`: a queue can hold more items than one statement can bind.
    adjudications = Adjudication.objects.filter(study=study)
    done: dict[int, int] = Counter(adjudications.values_list("item_id", flat=True))
    mine = set(adjudications.filter(adjudicator=user).values_list("item_id", flat=True))
    meta = {
        pk: (external_id, domain) for pk, external_id, domain in study.items.values_list("pk", "external_id", "domain")
    }
    return [
        QueueEntry(
            item=meta[pk][0],
            domain=meta[pk][1],
            labels=dict(Counter(labels.get(pk, [])).most_common()),
            adjudications=done.get(pk, 0),
            mine=pk in mine,
        )
        for pk in ids
    ]


def next_to_adjudicate(study: Study, user: User, after: str | None = None) -> str | None:
    """The external id of the first queue item `user` has not adjudicated (after `after`, when given)."""
    queue = adjudication_queue(study, user)
    start = 0
    if after is not None:
        start = next((i + 1 for i, entry in enumerate(queue) if entry.item == after), 0)
    for entry in queue[start:] + queue[:start]:
        if not entry.mine:
            return entry.item
    return None


def item_for_adjudication(item: Item) -> dict[str, Any]:
    """What the adjudication page and API show of an item: its content as annotators saw it
    (preference lists as "List 1/2", system names only when the study allows), every
    annotation with pseudonym and, for a preference item, how that annotator saw the lists
    (`seen_frame`: their "List 1" in a note may be the page's List 2), and every adjudication
    so far (two that differ are shown as such)."""
    study = item.study
    names = pseudonyms(study)
    payload = item.payload
    content: dict[str, Any]
    if study.is_preference:
        lists = payload.get("lists", {})
        shown = study.adjudication_shows_systems
        content = {
            "kind": "preference",
            "source": payload.get("source", ""),
            "question": payload.get("question", ""),
            "lists": [
                {"name": system if shown else f"List {n}", "system": system if shown else "", "claims": lists[system]}
                for n, system in enumerate(study.systems, start=1)
                if system in lists
            ],
        }
    else:
        content = {
            "kind": "verification",
            "claim": payload.get("claim", ""),
            "context": payload.get("context", ""),
            "evidence": list(payload.get("evidence", [])),
        }
    annotations = (
        Annotation.objects.filter(assignment__item=item)
        .exclude(assignment__status=Assignment.Status.SKIPPED)
        .select_related("assignment")
        .order_by("assignment__slot", "pk")
    )
    list_name = _list_names(study)
    rows = [
        {
            "annotator": names[a.assignment.annotator_id],
            "label": a.label,
            "preferred": list_name.get(a.preferred_system, ""),
            "strength": a.strength,
            **seen_frame(study, a.assignment.left_system, a.preferred_system),
            "justification": a.justification,
            "evidence_judgements": a.evidence_judgements,
            "questions": answer_lines(study.questions, a.question_answers, list_name) if study.questions else [],
            "active_ms": a.active_ms,
            "flagged": a.assignment.flagged,
            "flag_reason": a.assignment.flag_reason,
        }
        for a in annotations
    ]
    adjudications = [
        {
            "adjudicator": names[adj.adjudicator_id],
            "adjudicator_id": adj.adjudicator_id,
            "label": adj.label,
            "note": adj.note,
            "guidelines_unclear": adj.guidelines_unclear,
            "updated_at": adj.updated_at.isoformat(),
            "revisions": revisions,
        }
        for adj, revisions in _adjudications(item)
    ]
    verdicts = {str(adj["label"]) for adj in adjudications}
    result = {
        "item": item.external_id,
        "domain": item.domain,
        "content": content,
        "annotations": rows,
        "adjudications": adjudications,
        "adjudicators_disagree": len(verdicts) > 1,
        "verifier_predictions": _predictions(item) if study.adjudication_shows_verifiers else [],
    }
    return result


def seen_frame(study: Study, left_system: str, preferred_system: str = "") -> dict[str, Any]:
    """How one annotator saw a preference item, in the adjudicator's frame (issue 29, finding 7).

    Why: the adjudicator's "List 1" is always the study's first system, but an annotator's note
    speaks of the list *they* saw as List 1 (`Assignment.left_system`), which is the other one
    for half of them. So each answer carries `lists_seen` (their List 1 and List 2, as the
    adjudicator calls them: system names only when the study shows them to adjudicators, else
    "List 1/2" of the page), `swapped` (their List 1 is the page's List 2), `frame` (that, said
    in words) and `preferred_as_seen` (the list they chose, as they called it). A blinded study
    never learns a system name from these. Unknown sides (an import without `left_system`) say
    so; a verification study gets empty values.
    """
    systems = list(study.systems)
    if not study.is_preference:
        return {"lists_seen": [], "swapped": None, "frame": "", "preferred_as_seen": ""}
    if len(systems) != 2 or left_system not in systems:
        return {
            "lists_seen": [],
            "swapped": None,
            "frame": "which list they saw as List 1 is not recorded",
            "preferred_as_seen": "",
        }
    order = [left_system] + [system for system in systems if system != left_system]
    names = _list_names(study)
    seen = [names[system] for system in order]
    swapped = left_system != systems[0]
    if study.adjudication_shows_systems:
        frame = f"saw {seen[0]} as their List 1 and {seen[1]} as their List 2"
    elif swapped:
        frame = "saw the lists swapped: their List 1 is List 2 here, and their List 2 is List 1"
    else:
        frame = "saw the lists in the order shown here"
    preferred = f"List {order.index(preferred_system) + 1}" if preferred_system in order else ""
    return {"lists_seen": seen, "swapped": swapped, "frame": frame, "preferred_as_seen": preferred}


def _list_names(study: Study) -> dict[str, str]:
    """System -> what the adjudicator calls it (its name, or "List n" when names are hidden)."""
    if study.adjudication_shows_systems:
        return {system: system for system in study.systems}
    return {system: f"List {n}" for n, system in enumerate(study.systems, start=1)}


def _adjudications(item: Item) -> list[tuple[Adjudication, int]]:
    """The item's adjudications, oldest first, each with its number of revisions."""
    rows = Adjudication.objects.filter(item=item).annotate(n_revisions=Count("revisions")).order_by("created_at", "pk")
    return [(adj, int(getattr(adj, "n_revisions", 0))) for adj in rows]


def _predictions(item: Item) -> list[dict[str, Any]]:
    """Verifier predictions on the item, read through the database table name so that the
    annotation app imports nothing of metaeval (docs/architecture.md, dependency direction)."""
    from django.apps import apps

    try:
        Prediction = apps.get_model("metaeval", "Prediction")
    except LookupError:
        return []
    rows = (
        Prediction.objects.filter(item=item, label__isnull=False)
        .exclude(label="")
        .order_by("verifier__name", "-pk")
        .values_list("verifier__name", "label")
    )
    seen: dict[str, str] = {}
    for name, label in rows:
        seen.setdefault(str(name), str(label))
    return [{"verifier": name, "label": label} for name, label in seen.items()]


def adjudicated_labels(study: Study) -> AdjudicatedLabels:
    """Per item (external id) its adjudicated label: the latest adjudication of each adjudicator,
    and when they do not all give the same label, no label (the item is in `disagreements`)."""
    latest: dict[str, dict[int, str]] = defaultdict(dict)
    rows = (
        Adjudication.objects.filter(study=study)
        .order_by("item__position", "item_id", "updated_at", "pk")
        .values_list("item__external_id", "adjudicator_id", "label")
    )
    for item, adjudicator, label in rows:
        latest[item][adjudicator] = label
    result = AdjudicatedLabels()
    for item, by_adjudicator in latest.items():
        verdicts = set(by_adjudicator.values())
        if len(verdicts) == 1:
            result.labels[item] = verdicts.pop()
        else:
            result.disagreements.append(item)
    return result


def adjudication_summary(study: Study, *, queue: int | None = None) -> dict[str, Any]:
    """The report's adjudication section: items adjudicated, how often two adjudicators agree,
    the share marked "guidelines unclear", and the size of the queue (``queue`` when the caller
    has counted it already, as the report does from its labels)."""
    rows = list(Adjudication.objects.filter(study=study).values_list("item_id", "label", "guidelines_unclear"))
    by_item: dict[int, list[str]] = defaultdict(list)
    for item_id, label, _ in rows:
        by_item[item_id].append(label)
    doubled = [labels for labels in by_item.values() if len(labels) >= 2]
    agreeing = sum(1 for labels in doubled if len(set(labels)) == 1)
    unclear = sum(1 for *_, flag in rows if flag)
    return {
        "rule": study.adjudication_rule,
        "queue": queue_size(study) if queue is None else queue,
        "items_adjudicated": len(by_item),
        "adjudications": len(rows),
        "items_with_two_or_more": len(doubled),
        "adjudicators_agree": agreeing,
        "adjudicator_agreement": agreeing / len(doubled) if doubled else None,
        "guidelines_unclear": unclear,
        "guidelines_unclear_share": unclear / len(rows) if rows else None,
    }


def adjudicator_choices(study: Study) -> QuerySet[StudyMember]:
    """The members "Who adjudicates" offers: active members who log in, never a crowd participant.

    Why: a participant's account cannot log in (crowd/services.py), so the flag would give
    them nothing, and listing them unmarked offered a participant who had withdrawn from the study
    as an adjudicator (issue 29, finding 8). Imported identities and deactivated members are not
    logins in the study either.
    """
    return StudyMember.objects.filter(
        study=study, is_active=True, is_external=False, participant__isnull=True
    ).order_by("role", "pseudonym")
