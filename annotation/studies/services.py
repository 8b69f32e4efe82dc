"""Creating, configuring, running and duplicating studies.

One home for the rules of a study's settings (`_validated_settings`), used when
a study is created and whenever it is edited, so the page, the API and the
command line cannot disagree on what a valid study is.

Lifecycle (docs/architecture.md, Study lifecycle): draft -> open <-> paused ->
closed -> archived. Annotators claim items only while a study is open; a paused
study keeps the leases it handed out (those items can still be answered);
closing releases every lease that holds no answer yet.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.text import slugify

from annotation.adjudication.services import ADJUDICATION_SETTINGS
from annotation.conditions.definitions import parse_conditions
from annotation.conditions.services import forget_conditions
from annotation.crowd.services import mark_training_items
from annotation.errors import ServiceError
from annotation.lib.randomisation import claim_rank
from annotation.members.services import _next_pseudonym
from annotation.models import Annotation, Assignment, Item, Study, StudyChange, StudyMember, new_seed
from annotation.progress.counters import recount_study
from annotation.progress.quality_counters import close_leases
from annotation.questions.definitions import parse_questions
from annotation.questions.questionnaires import parse_questionnaires
from annotation.vocab import BINARY_SIDES, PREFERENCE_BOTH_BAD, PREFERENCE_TIE, default_binary_map, default_labels
from annotation.workbench.adaptive import open_new_items, shift_unopened_slots, unopened_slots

Status = Study.Status

#: The lifecycle: which status may follow which.
TRANSITIONS: dict[str, tuple[str, ...]] = {
    Status.DRAFT: (Status.OPEN, Status.ARCHIVED),
    Status.OPEN: (Status.PAUSED, Status.CLOSED),
    Status.PAUSED: (Status.OPEN, Status.CLOSED),
    Status.CLOSED: (Status.OPEN, Status.ARCHIVED),
    Status.ARCHIVED: (Status.CLOSED,),
}

#: Settings a researcher may change (the slug names the study and never changes).
EDITABLE_FIELDS: tuple[str, ...] = (
    "name",
    "kind",
    "instructions",
    "labels",
    "label_aliases",
    "binary_map",
    "systems",
    "annotators_per_item",
    "seed",
    "evidence_judgements",
    "justification_required",
    "submit_on_label",
    "tie_allowed",
    "both_bad_allowed",
    "irrelevant_in_credibility",
    "gold_in_agreement",
    "checks_in_agreement",
    "questions",
    "conditions",
    "exact_n_per",
    "adaptive_min_n",
    "adaptive_agreement",
    "training",
    "questionnaires",
)

#: Once a study holds an annotation these would change what the stored labels mean
#: (or how items were handed out), so they are refused with the reason.
FROZEN_AFTER_ANNOTATION: dict[str, str] = {
    "kind": "the stored labels belong to the study's kind",
    "labels": "stored labels are canonical labels of the current list",
    "annotators_per_item": "slots were handed out for the current number of annotators per item",
    "systems": "stored preferences name the current systems",
    "seed": "item order and left/right placement were drawn from the current seed",
    "evidence_judgements": "stored answers were collected with the current evidence-judgement setting",
    "tie_allowed": "offering a tie changes the label list the stored answers were given on",
    "both_bad_allowed": "offering 'both bad' changes the label list the stored answers were given on",
    "questions": "stored answers were given to the current questions",
    "conditions": "annotators were assigned the current conditions and answered in them",
    "exact_n_per": "slots were handed out for the current rule of exact N",
    "adaptive_min_n": "items were opened and closed under the current adaptive overlap rule",
    "adaptive_agreement": "items were opened and closed under the current adaptive overlap rule",
    "questionnaires": "people answered the current questionnaires before labelling",
}

#: Frozen as soon as the study has items, because item payloads depend on them.
FROZEN_WITH_ITEMS: dict[str, str] = {
    "kind": "the imported items are of the study's current kind",
    "systems": "the imported items' claim lists are keyed by the current systems",
}


def _validated_labels(kind: str, labels: Sequence[str] | None, both_bad_allowed: bool) -> list[str]:
    chosen = [label.strip() for label in (labels or default_labels(kind)) if label.strip()]
    if len(chosen) < 2:
        raise ServiceError("a study needs at least two labels")
    if len(set(chosen)) != len(chosen):
        raise ServiceError(f"labels must be distinct, got {', '.join(chosen)}")
    if any(len(label) > 100 for label in chosen):
        raise ServiceError("a label is at most 100 characters long")
    if kind == "preference":
        expected = default_labels("preference")
        if any(label not in [*expected, PREFERENCE_BOTH_BAD] for label in chosen):
            raise ServiceError(
                f"preference labels are the ordinal scale {', '.join(expected)} (tie optional); got {', '.join(chosen)}"
            )
        if both_bad_allowed and PREFERENCE_BOTH_BAD not in chosen:
            chosen.append(PREFERENCE_BOTH_BAD)
        if not both_bad_allowed and PREFERENCE_BOTH_BAD in chosen:
            chosen.remove(PREFERENCE_BOTH_BAD)
    return chosen


def _validated_settings(
    *,
    kind: str,
    name: str,
    annotators_per_item: int,
    labels: Sequence[str] | None,
    label_aliases: Mapping[str, str] | None,
    binary_map: Mapping[str, str] | None,
    systems: Sequence[str] | None,
    tie_allowed: bool,
    both_bad_allowed: bool,
    seed: int | None,
) -> dict[str, Any]:
    """Check a study's settings as a whole; the cleaned values, or a ServiceError naming the problem."""
    if kind not in Study.Kind.values:
        raise ServiceError(f"kind must be one of {', '.join(Study.Kind.values)}, got {kind!r}")
    if not name.strip():
        raise ServiceError("a study needs a name")
    if len(name.strip()) > 200:
        raise ServiceError("a study's name is at most 200 characters long")
    if isinstance(annotators_per_item, bool) or not isinstance(annotators_per_item, int):
        raise ServiceError("annotators per item must be a whole number")
    if not 1 <= annotators_per_item <= 100:
        raise ServiceError("annotators per item must be between 1 and 100")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63):
        raise ServiceError("the seed must be a whole number from 0 to 2^63 - 1")
    chosen = _validated_labels(kind, labels, both_bad_allowed)
    if kind == "preference":
        if not tie_allowed and PREFERENCE_TIE in chosen:
            chosen.remove(PREFERENCE_TIE)
        if tie_allowed and PREFERENCE_TIE not in chosen:
            raise ServiceError("a preference study that offers a tie needs the label 'tie'")
    aliases = {str(raw).strip(): str(target).strip() for raw, target in (label_aliases or {}).items()}
    if any(not raw or "\x00" in raw for raw in aliases):
        raise ServiceError("a label alias needs a raw label before the '=' (and no NUL characters)")
    bad_aliases = sorted(target for target in aliases.values() if target not in chosen)
    if bad_aliases:
        raise ServiceError(f"label aliases point at unknown label(s): {', '.join(bad_aliases)}")
    collapse = dict(binary_map) if binary_map else default_binary_map(kind, chosen)
    unknown = sorted(set(collapse) - set(chosen))
    sides = sorted(set(collapse.values()) - set(BINARY_SIDES))
    if unknown or sides:
        raise ServiceError(
            "binary map must send study labels to 'positive' or 'negative'"
            + (f"; unknown label(s): {', '.join(unknown)}" if unknown else "")
            + (f"; unknown side(s): {', '.join(sides)}" if sides else "")
        )
    declared_systems = [system.strip() for system in (systems or []) if system.strip()]
    if declared_systems and (kind != "preference" or len(set(declared_systems)) != 2 or len(declared_systems) != 2):
        raise ServiceError("systems are declared for preference studies only, exactly two distinct names")
    if any(len(system) > 200 for system in declared_systems):
        raise ServiceError("a system name is at most 200 characters long")
    return {
        "kind": kind,
        "name": name.strip(),
        "annotators_per_item": annotators_per_item,
        "labels": chosen,
        "label_aliases": aliases,
        "binary_map": collapse,
        "systems": declared_systems,
    }


#: Longest instructions accepted (Markdown source).
MAX_INSTRUCTIONS = 100_000


def _check_instructions(instructions: Any) -> str:
    if not isinstance(instructions, str):
        raise ServiceError("instructions must be text (Markdown)")
    if len(instructions) > MAX_INSTRUCTIONS:
        raise ServiceError(f"instructions are too long ({len(instructions):,} characters; limit {MAX_INSTRUCTIONS:,})")
    return instructions


#: Slugs that name pages rather than studies (annotation/urls.py).
RESERVED_SLUGS = frozenset({"new", "preview-markdown"})


def _check_slug(slug: str) -> None:
    if not slug or slugify(slug) != slug or len(slug) > 64:
        raise ServiceError(f"{slug!r} is not a valid slug (lowercase letters, digits and hyphens, at most 64)")
    if slug in RESERVED_SLUGS:
        raise ServiceError(f"{slug!r} is reserved for a page; choose another slug")
    if Study.objects.filter(slug=slug).exists():
        raise ServiceError(f"a study with slug {slug!r} already exists")


def _make_researcher(study: Study, user: User | None) -> None:
    """The person who made a study runs it: they become its researcher."""
    if user is None or not user.is_authenticated:
        return
    taken = set(study.members.values_list("pseudonym", flat=True))
    StudyMember.objects.create(
        study=study,
        user=user,
        role=StudyMember.Role.RESEARCHER,
        pseudonym=_next_pseudonym(study, StudyMember.Role.RESEARCHER, taken),
    )


@transaction.atomic
def create_study(
    *,
    slug: str,
    name: str,
    kind: str,
    annotators_per_item: int = 3,
    labels: Sequence[str] | None = None,
    label_aliases: Mapping[str, str] | None = None,
    binary_map: Mapping[str, str] | None = None,
    systems: Sequence[str] | None = None,
    seed: int | None = None,
    instructions: str = "",
    evidence_judgements: bool = False,
    justification_required: bool = False,
    submit_on_label: bool = False,
    tie_allowed: bool = True,
    both_bad_allowed: bool = False,
    irrelevant_in_credibility: bool = False,
    gold_in_agreement: bool = True,
    checks_in_agreement: bool = False,
    questions: Any = None,
    conditions: Any = None,
    exact_n_per: str = Study.ExactNPer.ITEM,
    adaptive_min_n: int | None = None,
    adaptive_agreement: int | None = None,
    training: Any = None,
    questionnaires: Any = None,
    status: str = Study.Status.OPEN,
    created_by: User | None = None,
) -> Study:
    """Create a study, with the kind's default vocabulary unless labels are given.

    `created_by` becomes the study's researcher. The page and the API create
    drafts; the command line and the demo keep `open` so a study made there can
    be annotated at once.
    """
    if kind not in Study.Kind.values:
        raise ServiceError(f"kind must be one of {', '.join(Study.Kind.values)}, got {kind!r}")
    _check_slug(slug)
    if status not in Study.Status.values:
        raise ServiceError(f"status must be one of {', '.join(Study.Status.values)}, got {status!r}")
    if training:
        raise ServiceError("training items are gold items of the study: set them in its settings once its items are in")
    cleaned = _validated_settings(
        kind=kind,
        name=name,
        annotators_per_item=annotators_per_item,
        labels=labels,
        label_aliases=label_aliases,
        binary_map=binary_map,
        systems=systems,
        tie_allowed=tie_allowed,
        both_bad_allowed=both_bad_allowed,
        seed=seed,
    )
    study = Study(
        slug=slug,
        **cleaned,
        instructions=_check_instructions(instructions),
        evidence_judgements=evidence_judgements,
        justification_required=justification_required,
        submit_on_label=submit_on_label,
        tie_allowed=tie_allowed,
        both_bad_allowed=both_bad_allowed,
        irrelevant_in_credibility=irrelevant_in_credibility,
        gold_in_agreement=gold_in_agreement,
        checks_in_agreement=checks_in_agreement,
        questions=parse_questions(questions, kind=kind),
        conditions=_checked_conditions(conditions, kind),
        exact_n_per=_checked_exact_n_per(exact_n_per),
        **_checked_adaptive(
            adaptive_min_n,
            adaptive_agreement,
            n=cleaned["annotators_per_item"],
            per_condition=exact_n_per == Study.ExactNPer.CONDITION and bool(conditions),
        ),
        questionnaires=parse_questionnaires(questionnaires),
        status=status,
        created_by=created_by,
    )
    if seed is not None:
        study.seed = seed
    study.save()
    _make_researcher(study, created_by)
    return study


#: The most training items a study may set (each annotator meets all of them first).
MAX_TRAINING_ITEMS = 20


def _checked_training(raw: Any, study: Study) -> list[dict[str, str]]:
    """Training items as [{item, explanation}]: existing gold items of the study, distinct, at most 20.

    Written as such a list, or as text lines "item id | explanation" (the settings page)."""
    if raw in (None, "", []):
        return []
    if isinstance(raw, str):
        raw = [
            {"item": part.strip(), "explanation": rest.strip()}
            for line in raw.splitlines()
            if line.strip()
            for part, _, rest in [line.partition("|")]
        ]
    if not isinstance(raw, list) or len(raw) > MAX_TRAINING_ITEMS:
        raise ServiceError(f"training must be a list of at most {MAX_TRAINING_ITEMS} {{item, explanation}}")
    entries = []
    for position, entry in enumerate(raw, start=1):
        if (
            not isinstance(entry, Mapping)
            or set(entry) - {"item", "explanation"}
            or not isinstance(entry.get("item"), str)
        ):
            raise ServiceError(f"training item {position}: write {{item: <item id>, explanation: <text>}}")
        explanation = entry.get("explanation") or ""
        if not isinstance(explanation, str) or len(explanation) > MAX_TEXT_EXPLANATION:
            raise ServiceError(
                f"training item {position}: the explanation is text of at most {MAX_TEXT_EXPLANATION} characters"
            )
        entries.append({"item": entry["item"].strip(), "explanation": explanation.strip()})
    ids = [entry["item"] for entry in entries]
    if len(set(ids)) != len(ids):
        raise ServiceError("training items must be distinct")
    gold = dict(Item.objects.filter(study=study, external_id__in=ids).values_list("external_id", "gold_label"))
    missing = [item for item in ids if item not in gold]
    if missing:
        raise ServiceError(
            f"training items must be items of the study (import them first); not found: {', '.join(missing[:5])}"
        )
    without_gold = [item for item in ids if not gold[item]]
    if without_gold:
        raise ServiceError(
            f"training items need a gold label (the feedback shows it); without one: {', '.join(without_gold[:5])}"
        )
    return entries


#: The longest explanation of a training item.
MAX_TEXT_EXPLANATION = 5_000


def _checked_conditions(raw: Any, kind: str) -> list[dict[str, str]]:
    return parse_conditions(raw)


def _checked_exact_n_per(raw: Any) -> str:
    if raw not in Study.ExactNPer.values:
        raise ServiceError(f"exact_n_per must be one of {', '.join(Study.ExactNPer.values)}, got {raw!r}")
    return str(raw)


def _checked_adaptive(min_n: Any, agreement: Any, *, n: int, per_condition: bool) -> dict[str, int | None]:
    """Adaptive overlap's two settings checked together: both empty (N for every item), or n_min from 1
    to N - 1 and k from 2 to N; not with exact N per condition (workbench/adaptive.py counts N per item)."""
    if min_n is None and agreement is None:
        return {"adaptive_min_n": None, "adaptive_agreement": None}
    if min_n is None or agreement is None:
        raise ServiceError(
            "adaptive overlap needs both adaptive_min_n (the annotators every item gets) and adaptive_agreement "
            "(the matching answers that close an item), or neither"
        )
    for name, value in (("adaptive_min_n", min_n), ("adaptive_agreement", agreement)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ServiceError(f"{name} must be a whole number, got {value!r}")
    if not 1 <= min_n < n:
        raise ServiceError(
            f"adaptive_min_n must be from 1 to {n - 1}: below the {n} annotators per item, which is the most an item gets"
        )
    if not 2 <= agreement <= n:
        raise ServiceError(f"adaptive_agreement must be from 2 to {n} (the annotators per item), got {agreement}")
    if per_condition:
        raise ServiceError(
            "adaptive overlap counts annotators per item across conditions; it cannot be combined with exact N "
            "per condition"
        )
    return {"adaptive_min_n": min_n, "adaptive_agreement": agreement}


def has_annotations(study: Study) -> bool:
    return Annotation.objects.filter(assignment__study=study).exists()


def _labels_for_update(current: dict[str, Any], changes: Mapping[str, Any], merged: dict[str, Any]) -> list[str] | None:
    """The label list to validate: as given, the new kind's default, or (preference) the current one
    with 'tie' and 'both bad' following their options."""
    if "labels" in changes:
        return list(changes["labels"] or []) or None
    if merged["kind"] != current["kind"]:
        return None
    labels = list(current["labels"])
    if merged["kind"] == "preference":
        keep = set(labels) | ({PREFERENCE_TIE} if merged["tie_allowed"] else set())
        labels = [label for label in default_labels("preference") if label in keep]
    return labels


def frozen_settings(study: Study) -> dict[str, str]:
    """The settings that can no longer change, each with the reason (for the settings page)."""
    frozen: dict[str, str] = {}
    if has_annotations(study):
        frozen.update(FROZEN_AFTER_ANNOTATION)
    elif Item.objects.filter(study=study).exists():
        frozen.update(FROZEN_WITH_ITEMS)
    return frozen


def _refuse_unsafe_changes(study: Study, current: dict[str, Any], final: dict[str, Any], changed: list[str]) -> None:
    """Refuse, with every reason at once, changes that would change what stored items or labels mean."""
    annotated = has_annotations(study)
    with_items = Item.objects.filter(study=study).exists()
    refusals = []
    for name in changed:
        if name in FROZEN_WITH_ITEMS and with_items:
            refusals.append(f"{name} cannot change once the study has items ({FROZEN_WITH_ITEMS[name]})")
        elif name in FROZEN_AFTER_ANNOTATION and annotated:
            refusals.append(f"{name} cannot change after the first annotation ({FROZEN_AFTER_ANNOTATION[name]})")
    if (
        annotated
        and "label_aliases" in changed
        and not _alias_change_is_additive(current["label_aliases"], final["label_aliases"])
    ):
        refusals.append(
            "label aliases can only be added after the first annotation "
            "(stored raw labels were mapped with the current ones)"
        )
    if refusals:
        raise ServiceError("; ".join(refusals))


def _alias_change_is_additive(old: Mapping[str, str], new: Mapping[str, str]) -> bool:
    return all(new.get(raw) == target for raw, target in old.items())


@transaction.atomic
def update_study(*, study: Study, changes: Mapping[str, Any], user: User | None = None) -> list[StudyChange]:
    """Change a study's settings; the recorded changes (empty before the first annotation).

    Before any annotation everything may change (kind and systems only while
    the study has no items). After it, changes that would change what stored
    labels mean are refused with the reason; the rest are applied and recorded
    with who and when.
    """
    unknown = sorted(set(changes) - set(EDITABLE_FIELDS))
    if unknown:
        raise ServiceError(f"unknown or read-only setting(s): {', '.join(unknown)}")
    given = study
    study = Study.objects.select_for_update().get(pk=study.pk)
    current = {name: getattr(study, name) for name in EDITABLE_FIELDS}
    merged = {**current, **changes}
    cleaned = _validated_settings(
        kind=merged["kind"],
        name=str(merged["name"] or ""),
        annotators_per_item=merged["annotators_per_item"],
        labels=_labels_for_update(current, changes, merged),
        label_aliases=merged["label_aliases"],
        binary_map=merged["binary_map"] if "binary_map" in changes else None,
        systems=merged["systems"],
        tie_allowed=bool(merged["tie_allowed"]),
        both_bad_allowed=bool(merged["both_bad_allowed"]),
        seed=merged["seed"],
    )
    final = {**merged, **cleaned, "instructions": _check_instructions(merged["instructions"])}
    final["questions"] = parse_questions(merged["questions"], kind=final["kind"])
    final["conditions"] = _checked_conditions(merged["conditions"], final["kind"])
    final["exact_n_per"] = _checked_exact_n_per(merged["exact_n_per"])
    final.update(
        _checked_adaptive(
            merged["adaptive_min_n"],
            merged["adaptive_agreement"],
            n=final["annotators_per_item"],
            per_condition=final["exact_n_per"] == Study.ExactNPer.CONDITION and bool(final["conditions"]),
        )
    )
    final["training"] = _checked_training(merged["training"], study)
    final["questionnaires"] = parse_questionnaires(merged["questionnaires"])
    for flag in (
        "evidence_judgements",
        "justification_required",
        "submit_on_label",
        "tie_allowed",
        "both_bad_allowed",
        "irrelevant_in_credibility",
        "gold_in_agreement",
        "checks_in_agreement",
    ):
        if not isinstance(final[flag], bool):
            raise ServiceError(f"{flag} must be true or false")
    if "binary_map" not in changes and final["labels"] == current["labels"]:
        final["binary_map"] = current["binary_map"]
    if final["seed"] is None:
        final["seed"] = current["seed"]
    changed = [name for name in EDITABLE_FIELDS if final[name] != current[name]]
    if not changed:
        return []
    _refuse_unsafe_changes(study, current, final, changed)
    unopened_before = unopened_slots(study)
    annotated = has_annotations(study)
    records = []
    for name in changed:
        setattr(study, name, final[name])
        setattr(given, name, final[name])
        if annotated:
            records.append(
                StudyChange(study=study, changed_by=user, field=name, old_value=current[name], new_value=final[name])
            )
    study.save()
    shift_unopened_slots(study, unopened_before)  # before the first answer: no item decided yet
    if "seed" in changed:
        rank_items(study)
    if "conditions" in changed:
        forget_conditions(study)  # before the first answer: nobody has worked in the old ones
    if "training" in changed:
        # Training items are never handed out as items (marked like checks; leases on them taken back).
        mark_training_items(study, {e["item"] for e in current["training"]}, {e["item"] for e in final["training"]})
    return StudyChange.objects.bulk_create(records)


#: Items whose claim rank is written per statement when a study's seed changes.
RANK_BATCH = 5_000


def rank_items(study: Study) -> None:
    """Draw every item's claim rank again from the study's seed (randomisation.claim_rank).

    Why: the rank is the study's random order of items; a new seed (allowed only before the first
    annotation) draws a new order, as it draws new queue positions and sides.
    """
    rows = Item.objects.filter(study=study).order_by("pk").values_list("pk", "external_id")
    after = 0
    while batch := list(rows.filter(pk__gt=after)[:RANK_BATCH]):
        Item.objects.bulk_update(
            [Item(pk=pk, claim_rank=claim_rank(study.seed, external_id)) for pk, external_id in batch],
            ["claim_rank"],
        )
        after = batch[-1][0]


def _release_open_leases(study: Study) -> int:
    """Close the study's active assignments (none holds an answer) and give their slots back.

    They are closed as a lease that ran out (skipped, slot freed, lease time
    kept as the mark), so a late submit says why it was refused, and the item
    goes to someone else if the study is reopened.
    """
    active = Assignment.objects.filter(study=study, status=Assignment.Status.ACTIVE).values_list("pk", flat=True)
    # leases that had run out count as timed out in the progress counters; the others as neither
    per_item = Counter(item_id for _, item_id in close_leases(list(active), timezone.now()))
    for item_id, count in per_item.items():
        Item.objects.filter(pk=item_id, slots_taken__gte=count).update(slots_taken=F("slots_taken") - count)
    return sum(per_item.values())


def _release_open_leases_now(study: Study) -> None:
    with transaction.atomic():
        if Study.objects.filter(pk=study.pk, status=Status.CLOSED).exists():
            _release_open_leases(study)


@transaction.atomic
def change_status(*, study: Study, status: str, user: User | None = None) -> Study:
    """Move a study along its lifecycle; a move the lifecycle does not allow is refused with the way it goes.

    Closing releases open leases (an item shown but not answered goes back
    into the pool if the study is reopened); pausing keeps them.
    """
    if status not in Study.Status.values:
        raise ServiceError(f"status must be one of {', '.join(Study.Status.values)}, got {status!r}")
    locked = Study.objects.select_for_update().get(pk=study.pk)
    old = locked.status
    if status == old:
        return locked
    if status not in TRANSITIONS[old]:
        allowed = ", ".join(TRANSITIONS[old])
        raise ServiceError(f"the study is {old} and cannot become {status}; from {old} it can become: {allowed}")
    if status == Status.OPEN and not Item.objects.filter(study=locked).exists():
        raise ServiceError("a study needs items before it opens: import some first")
    if status == Status.CLOSED:
        _release_open_leases(locked)
        # A claim that committed after the release above but before this close commits is released
        # here; one committing later sees the close and gives its lease back itself
        # (workbench.services._unless_closed_meanwhile).
        transaction.on_commit(lambda: _release_open_leases_now(locked))
    locked.status = status
    locked.save(update_fields=["status", "updated_at"])
    StudyChange.objects.create(study=locked, changed_by=user, field="status", old_value=old, new_value=status)
    study.status = status
    return locked


def set_study_status(*, study: Study, status: str, user: User | None = None) -> Study:
    """Open, pause, close, reopen or archive a study (along the lifecycle; see `change_status`)."""
    return change_status(study=study, status=status, user=user)


ITEM_COPY_FIELDS = (
    "external_id",
    "position",
    "domain",
    "summary",
    "payload",
    "response_id",
    "system",
    "gold_label",
    "gold_raw",
)


@transaction.atomic
def duplicate_study(
    *, study: Study, slug: str, name: str | None = None, copy_items: bool = False, user: User | None = None
) -> Study:
    """A new draft with the study's settings and instructions (and, on request, its items), e.g. pilot -> main run.

    The copy gets a fresh seed (its annotators are new people), no members but
    the person who made it (as researcher), and no annotations.
    """
    _check_slug(slug)
    copy = create_study(
        slug=slug,
        name=(name or f"{study.name} (copy)")[:200],
        kind=study.kind,
        annotators_per_item=study.annotators_per_item,
        labels=study.labels,
        label_aliases=study.label_aliases,
        binary_map=study.binary_map,
        systems=study.systems,
        seed=new_seed(),
        instructions=study.instructions,
        evidence_judgements=study.evidence_judgements,
        justification_required=study.justification_required,
        submit_on_label=study.submit_on_label,
        tie_allowed=study.tie_allowed,
        both_bad_allowed=study.both_bad_allowed,
        irrelevant_in_credibility=study.irrelevant_in_credibility,
        gold_in_agreement=study.gold_in_agreement,
        checks_in_agreement=study.checks_in_agreement,
        questions=study.questions,
        conditions=study.conditions,
        exact_n_per=study.exact_n_per,
        adaptive_min_n=study.adaptive_min_n,
        adaptive_agreement=study.adaptive_agreement,
        questionnaires=study.questionnaires,
        status=Status.DRAFT,
        created_by=user,
    )
    copied = {name: getattr(study, name) for name in ADJUDICATION_SETTINGS}
    Study.objects.filter(pk=copy.pk).update(**copied)
    for name, value in copied.items():
        setattr(copy, name, value)
    if copy_items:
        source = Item.objects.filter(study=study).order_by("position", "pk").values(*ITEM_COPY_FIELDS).iterator()
        batch: list[Item] = []
        for row in source:
            batch.append(Item(study=copy, claim_rank=claim_rank(copy.seed, row["external_id"]), **row))
            if len(batch) >= 1000:
                Item.objects.bulk_create(batch)
                batch = []
        Item.objects.bulk_create(batch)
        # The copied items carry the gold labels a pipeline's file gave them; labels taken as an
        # annotator's are answers, which a copy does not take along (annotation/transfer/adapters/source_labels.py).
        copy.source_labels = [entry for entry in study.source_labels if entry.get("as") == "gold"]
        copy.save(update_fields=["source_labels"])
        open_new_items(copy)
        recount_study(copy)
    return copy
