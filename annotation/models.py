"""Tables of the annotation side (docs/architecture.md, Data model).

Invariants that matter for honest numbers (one label per annotator per item,
never more than N slots per item, answers stored in system space) are database
constraints, so that they hold even when application code races.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils import timezone

from annotation.lib import randomisation


def new_seed() -> int:
    """A random 62-bit study seed (fits a signed 64-bit column on every database)."""
    return secrets.randbits(62)


class AdjudicationRule(models.TextChoices):
    """Which items a study's adjudication queue holds."""

    NO_UNANIMITY = "no_unanimity", "Items whose annotators do not all agree"
    NO_MAJORITY = "no_majority", "Items without a strict majority label"
    FLAGGED = "flagged", "Items an annotator flagged"
    AUDIT = "audit", "A random share of labelled items (audit)"


class ReferenceRule(models.TextChoices):
    """Where an item's reference label (what verifiers are scored against) comes from."""

    GOLD = "gold", "Gold labels"
    ADJUDICATED = "adjudicated", "Adjudicated labels"
    ADJUDICATED_ELSE_MAJORITY = "adjudicated_else_majority", "Adjudicated, else the annotators' majority"
    MAJORITY = "majority", "The annotators' strict majority"
    DAWID_SKENE = "dawid_skene", "A Dawid-Skene model of the annotators' labels"


class Study(models.Model):
    class Kind(models.TextChoices):
        PREFERENCE = "preference", "Pairwise preference"
        VERIFICATION = "verification", "Claim verification"

    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        OPEN = "open", "Open"
        PAUSED = "paused", "Paused"
        CLOSED = "closed", "Closed"
        ARCHIVED = "archived", "Archived"

    class ExactNPer(models.TextChoices):
        ITEM = "item", "N per item, across conditions"
        CONDITION = "condition", "N per item in each condition"

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    instructions = models.TextField(blank=True, help_text="Markdown; rendered sanitised.")
    labels = models.JSONField(default=list, help_text="Canonical labels, in order.")
    label_aliases = models.JSONField(
        default=dict, blank=True, help_text="Raw label -> canonical label, e.g. {'yes': 'factual'}."
    )
    binary_map = models.JSONField(default=dict, blank=True, help_text="Canonical label -> 'positive' or 'negative'.")
    systems = models.JSONField(default=list, blank=True, help_text="Preference studies: the two systems, A then B.")
    annotators_per_item = models.PositiveSmallIntegerField(default=3)
    seed = models.BigIntegerField(default=new_seed)
    evidence_judgements = models.BooleanField(
        default=False, help_text="Verification: ask for a judgement per evidence passage."
    )
    justification_required = models.BooleanField(default=False)
    tie_allowed = models.BooleanField(default=True)
    both_bad_allowed = models.BooleanField(default=False)
    irrelevant_in_credibility = models.BooleanField(
        default=False, help_text="Count 'irrelevant' evidence in the credibility denominator."
    )
    submit_on_label = models.BooleanField(
        default=False,
        help_text=(
            "Workbench: the label key also submits when nothing else is asked for (no required "
            "justification, every evidence passage judged), so a label is one keystroke."
        ),
    )
    checks_in_agreement = models.BooleanField(
        default=False,
        help_text=(
            "Include the labels that items used as attention or qualification checks got as ordinary items "
            "(before they became checks) in agreement and the other analyses; off: checks only score people."
        ),
    )
    gold_in_agreement = models.BooleanField(
        default=True,
        help_text=(
            "Include items with a gold label in agreement, preference analysis and disagreements "
            "(annotators labelled them like any other item); off: they only score annotators."
        ),
    )
    abstained_responses = models.JSONField(
        default=list,
        blank=True,
        help_text="Responses that abstained (no claims), as {response_id, system, domain}: imported from "
        "FActScore/VeriScore/SAFE files so the report's respond ratio counts them.",
    )
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.DRAFT)
    adjudication_rule = models.CharField(
        max_length=16,
        choices=AdjudicationRule.choices,
        default=AdjudicationRule.NO_UNANIMITY,
        help_text="Which items go to the adjudication queue (annotation/selectors/adjudication.py).",
    )
    adjudication_audit_share = models.FloatField(
        default=0.1, help_text="Audit rule: the share of labelled items drawn (seeded by the study's seed)."
    )
    adjudication_shows_systems = models.BooleanField(
        default=False, help_text="Preference: show adjudicators which system wrote which list."
    )
    adjudication_shows_verifiers = models.BooleanField(
        default=False, help_text="Show adjudicators the verifiers' predictions on the item (off: they are not swayed)."
    )
    reference_rule = models.CharField(
        max_length=28,
        choices=ReferenceRule.choices,
        default=ReferenceRule.ADJUDICATED_ELSE_MAJORITY,
        help_text="Where the report's reference label of an item comes from (verifier agreement).",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    questions = models.JSONField(
        default=list,
        db_default=[],
        blank=True,
        help_text="Extra questions asked with each answer (annotation/questions/definitions.py), checked and complete.",
    )
    questionnaires = models.JSONField(
        default=dict,
        db_default={},
        blank=True,
        help_text="A pre-study and a post-study questionnaire and a comprehension quiz: annotation/questions/questionnaires.py.",
    )
    training = models.JSONField(
        default=list,
        db_default=[],
        blank=True,
        help_text="Training items shown first with feedback, each {item (a gold item's id), explanation}.",
    )
    conditions = models.JSONField(
        default=list,
        db_default=[],
        blank=True,
        help_text="Between-subject conditions, each {key, verifier}: annotation/conditions/definitions.py.",
    )
    exact_n_per = models.CharField(
        max_length=10,
        choices=ExactNPer.choices,
        default=ExactNPer.ITEM,
        db_default=ExactNPer.ITEM,  # the release that runs during `migrate` creates studies without it
        help_text="With conditions: N annotators per item across conditions (item), or N per item in each "
        "condition (condition: every item is seen N times in every condition).",
    )
    adaptive_min_n = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        help_text="Adaptive overlap: the annotators every item gets (n_min); more, up to N, only while their "
        "answers do not reach `adaptive_agreement` in agreement (workbench/adaptive.py). Empty: N for every item.",
    )
    adaptive_agreement = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        help_text="Adaptive overlap: the number of matching answers that close an item (k); e.g. 2 of 2 or 3.",
    )
    source_labels = models.JSONField(
        default=list,
        db_default=[],  # the release that runs during `migrate` creates studies without it
        blank=True,
        help_text="How the labels that came with items imported from a pipeline's file were taken, one entry per "
        "pipeline and choice: {from, as: 'gold' (the items' gold labels only) or 'annotator' (an imported "
        "annotator's labels, one slot each), annotators} (annotation/adapters/source_labels.py).",
    )

    # Set on instances by the code that fetched them, never stored: declarations only, not
    # database fields, present only on studies that came through that code. (Values added
    # with .annotate() are typed by django-stubs' WithAnnotations instead: the plugin rejects
    # an annotation named like an attribute the model declares.)
    member_role: str | None  # access.py: the user's membership role, None for a non-member
    user_role: str  # access.py (and selectors.studies_with_role): the role the user acts in, staff as researcher
    counts: dict[str, int]  # api.StudyDetail, for researchers: selectors.study_counts
    domains: list[dict[str, Any]]  # api.StudyDetail, for researchers: selectors.items_by_domain

    class Meta:
        ordering = ["-created_at", "slug"]
        verbose_name_plural = "studies"
        constraints = [
            models.CheckConstraint(condition=Q(annotators_per_item__gte=1), name="study_annotators_per_item_positive"),
            models.CheckConstraint(condition=Q(kind__in=["preference", "verification"]), name="study_kind_valid"),
            models.CheckConstraint(condition=Q(exact_n_per__in=["item", "condition"]), name="study_exact_n_per_valid"),
            models.CheckConstraint(
                condition=Q(adaptive_min_n__isnull=True, adaptive_agreement__isnull=True)
                | Q(
                    adaptive_min_n__isnull=False,
                    adaptive_agreement__isnull=False,
                    adaptive_min_n__gte=1,
                    adaptive_min_n__lt=F("annotators_per_item"),
                    adaptive_agreement__gte=2,
                    adaptive_agreement__lte=F("annotators_per_item"),
                ),
                name="study_adaptive_overlap_valid",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["draft", "open", "paused", "closed", "archived"]), name="study_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(adjudication_audit_share__gt=0) & Q(adjudication_audit_share__lte=1),
                name="study_audit_share_in_range",
            ),
        ]

    def __str__(self) -> str:
        return self.slug

    @property
    def slots_per_item(self) -> int:
        """Answers an item takes in all: N, or N in each condition when exact N holds per condition."""
        if self.exact_n_per == self.ExactNPer.CONDITION and self.conditions:
            return self.annotators_per_item * len(self.conditions)
        return self.annotators_per_item

    @property
    def is_adaptive(self) -> bool:
        """Adaptive overlap: items take n_min to N annotators (workbench/adaptive.py)."""
        return self.adaptive_min_n is not None

    @property
    def unopened_slots(self) -> int:
        """The slots a new item starts with counted as taken: N - n_min with adaptive overlap, else 0."""
        return self.annotators_per_item - self.adaptive_min_n if self.adaptive_min_n is not None else 0

    @property
    def is_preference(self) -> bool:
        return self.kind == self.Kind.PREFERENCE


class StudyChange(models.Model):
    """One setting of a study changed after annotators started: who, when, from what to what.

    Before the first annotation a study is still being designed and its
    settings change freely; afterwards every change is kept here, so a report
    can say which instructions the labels were collected under.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="changes")
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    changed_at = models.DateTimeField(auto_now_add=True)
    field = models.CharField(max_length=64)
    old_value = models.JSONField(null=True, blank=True)
    new_value = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["study", "-changed_at", "-id"]

    def __str__(self) -> str:
        return f"{self.study_id}: {self.field} at {self.changed_at:%Y-%m-%d %H:%M}"


class StudyMember(models.Model):
    class Role(models.TextChoices):
        RESEARCHER = "researcher", "Researcher"
        ANNOTATOR = "annotator", "Annotator"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="members")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="study_memberships")
    role = models.CharField(max_length=16, choices=Role.choices)
    pseudonym = models.CharField(max_length=100, help_text="What exports and reports call this annotator.")
    is_external = models.BooleanField(default=False, help_text="An identity whose labels were imported, not a login.")
    is_active = models.BooleanField(
        default=True,
        help_text="Deactivated: no longer in the study (cannot open, claim or submit); labels stay under the pseudonym.",
    )
    deactivated_at = models.DateTimeField(null=True, blank=True)
    condition = models.CharField(
        max_length=32,
        blank=True,
        default="",
        db_default="",
        help_text="The study's between-subject condition this person works in, fixed at their first claim.",
    )
    can_adjudicate = models.BooleanField(
        default=False,
        help_text="May resolve disagreements (researchers always may); an adjudicator need not see reports.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "role", "pseudonym"]
        constraints = [
            models.UniqueConstraint(fields=["study", "user"], name="member_unique_per_study"),
            models.UniqueConstraint(fields=["study", "pseudonym"], name="member_pseudonym_unique"),
            models.CheckConstraint(condition=Q(role__in=["researcher", "annotator"]), name="member_role_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.study.slug}:{self.pseudonym} ({self.role})"


class Item(models.Model):
    """One unit to label. `payload` holds the kind-specific display data.

    Verification: {"claim", "context", "evidence": [{"text", "title", "url", "source_type"}]}.
    Preference: {"source", "question", "lists": {system: [claim, ...]}}.
    """

    # No index of its own: every index below starts with study (item_study_recent serves the report's fingerprint).
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="items", db_index=False)
    external_id = models.CharField(max_length=200)
    position = models.PositiveIntegerField(default=0, help_text="Order in which it was imported.")
    domain = models.CharField(max_length=100, blank=True, default="")
    summary = models.CharField(
        max_length=300, blank=True, default="", help_text="The claim or source, shortened, for lists."
    )
    payload = models.JSONField(default=dict)
    response_id = models.CharField(max_length=200, blank=True, default="")
    system = models.CharField(max_length=200, blank=True, default="")
    gold_label = models.CharField(max_length=100, blank=True, default="")
    gold_raw = models.CharField(max_length=100, blank=True, default="")
    slots_taken = models.PositiveSmallIntegerField(
        default=0, help_text="Slots handed out so far; bumped by a conditional UPDATE."
    )
    n_answers = models.PositiveSmallIntegerField(
        default=0,
        db_default=0,  # the imports' raw INSERTs leave it out
        help_text="Answers (annotations) on the item, kept with the study's counters (services/counters.py).",
    )
    claim_rank = models.BigIntegerField(
        default=0,
        db_default=0,  # the release serving during `migrate` inserts items without it
        help_text=(
            "Where the item stands among items equally far along when fresh slots are handed out: a keyed "
            "hash of (study seed, item), so the order across the study is a random permutation "
            "(randomisation.claim_rank)."
        ),
    )
    is_check = models.BooleanField(
        default=False,
        db_default=False,  # the imports' raw INSERTs leave it out
        help_text="Used as an attention or qualification check (ParticipantLink): never handed out as an item.",
    )
    closed_after = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        help_text="Adaptive overlap: the answers after which the item closed, its rule met (null: open, or it "
        "takes N). Its unopened slots then count as taken (workbench/adaptive.py).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["study", "position", "id"]
        indexes = [
            models.Index(fields=["study", "domain"], name="item_study_domain"),
            models.Index(fields=["study", "position"], name="item_study_position"),
            # the claim's walk (workbench/claim_order.py): items that are no checks, most slots taken first, then by random rank
            models.Index(fields=["study", "is_check", "slots_taken", "claim_rank"], name="item_study_claim_order"),
            models.Index(fields=["study", "updated_at"], name="item_study_recent"),
            # the progress page's "in progress" items: a few answers, or a slot taken and none yet
            models.Index(fields=["study", "n_answers", "slots_taken"], name="item_study_answers"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["study", "external_id"], name="item_external_id_unique"),
            models.CheckConstraint(condition=~Q(external_id=""), name="item_external_id_not_empty"),
        ]

    def __str__(self) -> str:
        return f"{self.study_id}:{self.external_id}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Draw the claim rank of a new item saved one by one (the imports stage theirs in bulk)."""
        if self._state.adding and not self.claim_rank and self.external_id:
            self.claim_rank = randomisation.claim_rank(self.study.seed, self.external_id)
        super().save(*args, **kwargs)

    def claim_lists(self) -> list[tuple[str, list[str]]]:
        """Preference: (system, claims) in the study's declared order.

        Never rely on the key order of `payload["lists"]`: PostgreSQL's jsonb
        does not keep it.
        """
        lists = self.payload.get("lists", {})
        return [(system, lists[system]) for system in self.study.systems if system in lists]


class Assignment(models.Model):
    """A slot: one annotator's turn on one item.

    `max_slots` copies the study's N when the slot is made, so that "slot < N"
    is a row-level CHECK the database enforces. A skipped assignment gives its
    slot back (slot = NULL) but keeps (item, annotator) taken, so nobody is
    served the same item twice.
    """

    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        SUBMITTED = "submitted", "Submitted"
        SKIPPED = "skipped", "Skipped"

    # No index of its own: every index below starts with study (assignment_study_recent serves the fingerprint).
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="assignments", db_index=False)
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="assignments")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="assignments")
    slot = models.PositiveSmallIntegerField(null=True, blank=True)
    max_slots = models.PositiveSmallIntegerField()
    queue_position = models.BigIntegerField(
        default=0, help_text="Keyed-hash order of this item in the annotator's queue."
    )
    left_system = models.CharField(
        max_length=200, blank=True, default="", help_text="Preference: system shown as List 1."
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACTIVE)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    flagged = models.BooleanField(default=False)
    flag_reason = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    # Set by access.access_assignment (the user's membership role in the assignment's study,
    # None for a non-member); declaration only, not a database field.
    member_role: str | None

    class Meta:
        ordering = ["study", "annotator", "queue_position"]
        indexes = [
            models.Index(fields=["study", "annotator", "status"], name="assignment_queue"),
            models.Index(fields=["study", "status", "lease_expires_at"], name="assignment_leases"),
            models.Index(fields=["study", "updated_at"], name="assignment_study_recent"),
            # Only the active ones (a few per annotator), for a claim's read of own and expired leases:
            # the planner takes it even with statistics from before the study's first claim (a new study,
            # or the load benchmark), where it would otherwise step through all the study's assignments.
            models.Index(
                fields=["study", "lease_expires_at"], condition=models.Q(status="active"), name="assignment_active"
            ),
            # Only the flagged ones (few): the progress page counts and lists them live, where a
            # count over the study's assignments grew with the study (issue 15).
            models.Index(fields=["study", "updated_at"], condition=models.Q(flagged=True), name="assignment_flagged"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["item", "annotator"], name="assignment_once_per_annotator"),
            models.UniqueConstraint(fields=["item", "slot"], name="assignment_slot_unique"),
            models.CheckConstraint(
                condition=Q(slot__isnull=True) | Q(slot__lt=F("max_slots")),
                name="assignment_slot_below_n",
            ),
            models.CheckConstraint(
                condition=Q(status="skipped") | Q(slot__isnull=False),
                name="assignment_holds_slot_unless_skipped",
            ),
            models.CheckConstraint(
                condition=~Q(status="active") | Q(lease_expires_at__isnull=False),
                name="assignment_active_has_lease",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["active", "submitted", "skipped"]),
                name="assignment_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.item} slot {self.slot} ({self.status})"


#: The largest Annotation.active_ms every database stores (PositiveIntegerField: a signed 32-bit column).
MAX_ACTIVE_MS = 2**31 - 1

#: The fields that make up an answer; a change to any of them is a revision.
ANSWER_FIELDS = (
    "label",
    "raw_label",
    "preferred_system",
    "strength",
    "choice",
    "justification",
    "evidence_judgements",
    "question_answers",
)


class Annotation(models.Model):
    """The current answer of an assignment, in system space.

    `label` is canonical (for preference studies the 5-point ordinal label,
    where a/b are the study's declared systems, never screen positions);
    `raw_label` and `choice` keep what was actually given or clicked.
    """

    class Strength(models.TextChoices):
        NONE = "", "None (tie)"
        STRONG = "strong", "Strong"
        SLIGHT = "slight", "Slight"

    class Source(models.TextChoices):
        WEB = "web", "Web"
        API = "api", "API"
        IMPORT = "import", "Import"

    assignment = models.OneToOneField(Assignment, on_delete=models.CASCADE, related_name="annotation")
    # The assignment's study, copied: the report's data fingerprint (metaeval.selectors.report_fingerprint)
    # reads a study's annotations from one index instead of joining every assignment of the study.
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="+", db_index=False)
    label = models.CharField(max_length=100)
    raw_label = models.CharField(max_length=200, blank=True, default="")
    preferred_system = models.CharField(max_length=200, blank=True, default="")
    strength = models.CharField(max_length=8, choices=Strength.choices, blank=True, default="")
    choice = models.CharField(max_length=32, blank=True, default="", help_text="Raw screen choice.")
    justification = models.TextField(blank=True, default="")
    evidence_judgements = models.JSONField(default=list, blank=True)
    # The answers to the study's extra questions, in system space (annotation/questions/answers.py).
    question_answers = models.JSONField(default=dict, db_default={}, blank=True)
    active_ms = models.PositiveIntegerField(null=True, blank=True)
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.WEB)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    # Set by selectors.item_annotations (who made it, by pseudonym); declaration only, not a database field.
    pseudonym: str

    class Meta:
        ordering = ["assignment_id"]
        indexes = [
            models.Index(fields=["study", "updated_at", "id"], name="annotation_study_fingerprint"),
            # The labels made here (not imported), by time: the progress page's throughput reads the
            # last hour's and the first and latest through it (issue 35: not every label).
            models.Index(fields=["study", "created_at"], condition=~Q(source="import"), name="annotation_made_here"),
        ]
        constraints = [
            models.CheckConstraint(condition=~Q(label=""), name="annotation_label_not_empty"),
            models.CheckConstraint(
                condition=Q(strength="", preferred_system="")
                | (Q(strength__in=["strong", "slight"]) & ~Q(preferred_system="")),
                name="annotation_strength_iff_preferred",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.assignment_id}: {self.label}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Copy the assignment's study when the caller did not (the services always do)."""
        if self.study_id is None and self.assignment_id is not None:
            self.study_id = self.assignment.study_id
        super().save(*args, **kwargs)

    def snapshot(self) -> dict:
        """The answer as a plain dict, as kept in revisions."""
        return {name: getattr(self, name) for name in ANSWER_FIELDS}


class AnnotationRevision(models.Model):
    """One change to an annotation: what it was, what it became, and when."""

    annotation = models.ForeignKey(Annotation, on_delete=models.CASCADE, related_name="revisions")
    old_value = models.JSONField(null=True, blank=True)
    new_value = models.JSONField()
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    changed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["annotation", "changed_at", "id"]

    def __str__(self) -> str:
        return f"revision of {self.annotation_id} at {self.changed_at:%Y-%m-%d %H:%M}"


#: The fields that make up an adjudication; a change to any of them is a revision.
ADJUDICATION_FIELDS = ("label", "preferred_system", "strength", "note", "guidelines_unclear")


class Adjudication(models.Model):
    """One adjudicator's final label for an item, beside (never instead of) its annotations.

    Two adjudicators may each give one; where they differ the item has no
    adjudicated label (adjudication/selectors.py). Preference labels are in
    system space, like annotations.
    """

    class Source(models.TextChoices):
        WEB = "web", "Web"
        API = "api", "API"
        IMPORT = "import", "Import"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="adjudications")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="adjudications")
    adjudicator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="adjudications")
    label = models.CharField(max_length=100)
    preferred_system = models.CharField(max_length=200, blank=True, default="")
    strength = models.CharField(max_length=8, blank=True, default="")
    note = models.TextField(blank=True, default="")
    guidelines_unclear = models.BooleanField(default=False)
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.WEB)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["item", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["item", "adjudicator"], name="adjudication_once_per_adjudicator"),
            models.CheckConstraint(condition=~Q(label=""), name="adjudication_label_not_empty"),
            models.CheckConstraint(
                condition=Q(strength="", preferred_system="")
                | (Q(strength__in=["strong", "slight"]) & ~Q(preferred_system="")),
                name="adjudication_strength_iff_preferred",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.item}: adjudicated {self.label}"

    def snapshot(self) -> dict:
        """The adjudication as a plain dict, as kept in revisions."""
        return {name: getattr(self, name) for name in ADJUDICATION_FIELDS}


class AdjudicationRevision(models.Model):
    """One change to an adjudication: what it was, what it became, when and by whom."""

    adjudication = models.ForeignKey(Adjudication, on_delete=models.CASCADE, related_name="revisions")
    old_value = models.JSONField(null=True, blank=True)
    new_value = models.JSONField()
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    changed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["adjudication", "changed_at", "id"]

    def __str__(self) -> str:
        return f"revision of adjudication {self.adjudication_id} at {self.changed_at:%Y-%m-%d %H:%M}"


class StagedItem(models.Model):
    """One parsed row of an item import on its way in (transfer/item_staging.py).

    Not a table of the database: each import creates its own TEMPORARY table
    of this shape, private to its connection and gone with it, so a killed
    import leaves nothing behind and writing it never takes the database's
    write lock. The model only gives bulk.insert_rows the columns and their
    conversions. `new_rank` orders new items (their position is the study's
    last position plus it); `target` is the item an update replaces.
    """

    line = models.PositiveIntegerField()
    new_rank = models.PositiveIntegerField(null=True)
    target = models.IntegerField(null=True)
    external_id = models.CharField(max_length=200)
    claim_rank = models.BigIntegerField()
    domain = models.CharField(max_length=100)
    summary = models.CharField(max_length=300)
    payload = models.JSONField()
    response_id = models.CharField(max_length=200)
    system = models.CharField(max_length=200)
    gold_label = models.CharField(max_length=100)
    gold_raw = models.CharField(max_length=100)

    class Meta:
        managed = False
        db_table = "claimlab_staged_item"

    def __str__(self) -> str:
        return f"staged {self.external_id} (line {self.line})"


class StagedAnnotation(models.Model):
    """One parsed label of an annotation import on its way in (transfer/annotation_staging.py).

    Like StagedItem: the shape of a private TEMPORARY table, not a table of
    the database. Each row becomes a submitted Assignment and its Annotation.
    """

    line = models.BigIntegerField()
    item_id = models.IntegerField()
    annotator_id = models.IntegerField()
    slot = models.PositiveSmallIntegerField()
    left_system = models.CharField(max_length=200)
    queue_position = models.BigIntegerField()
    label = models.CharField(max_length=100)
    raw_label = models.CharField(max_length=200)
    preferred_system = models.CharField(max_length=200)
    strength = models.CharField(max_length=8)
    choice = models.CharField(max_length=32)
    justification = models.TextField()
    evidence_judgements = models.JSONField()
    active_ms = models.PositiveIntegerField(null=True)

    class Meta:
        managed = False
        db_table = "claimlab_staged_annotation"

    def __str__(self) -> str:
        return f"staged label of item {self.item_id} (line {self.line})"


class JobStatus(models.TextChoices):
    """Where a background job (an import, an export) stands."""

    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


class BackgroundJob(models.Model):
    """What an import and an export job share: where they stand, who asked, when."""

    Status = JobStatus

    status = models.CharField(max_length=10, choices=JobStatus.choices, default=JobStatus.QUEUED)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="Last sign of life of the worker running the job (a killed worker stops it)."
    )
    attempts = models.PositiveSmallIntegerField(default=0, help_text="Times a worker has started the job.")
    worker = models.CharField(
        max_length=100,
        blank=True,
        default="",
        help_text="The registered worker (WorkerHeartbeat) running the job; when it is gone, any worker re-queues it.",
    )

    #: Queued this long: no worker took the job (the page says so).
    STUCK_AFTER = timedelta(minutes=10)

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=JobStatus.values), name="%(class)s_status_valid"),
        ]

    def looks_stuck(self, now: datetime | None = None) -> bool:
        """No live worker holds it: running for a worker that is gone (WorkerHeartbeat.lost_ids), or
        running without a heartbeat for JOB_STALE_SECONDS, or queued for STUCK_AFTER. A worker
        re-queues a running one within seconds (annotation/transfer/services/recovery.py)."""
        now = now or timezone.now()
        if self.status == JobStatus.RUNNING:
            if self.worker and self.worker in WorkerHeartbeat.lost_ids([self.worker], now=now):
                return True
            silent_since = self.heartbeat_at or self.created_at
            return now - silent_since > timedelta(seconds=settings.JOB_STALE_SECONDS)
        return self.status == JobStatus.QUEUED and now - self.created_at > self.STUCK_AFTER


class ImportJob(BackgroundJob):
    """An uploaded file waiting to be, or having been, imported.

    Small uploads are imported during the request; big ones by a background
    task. Either way the outcome, with its line-numbered errors, is kept here.
    """

    class What(models.TextChoices):
        ITEMS = "items", "Items"
        ANNOTATIONS = "annotations", "Annotations"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="import_jobs")
    what = models.CharField(max_length=16, choices=What.choices)
    file_name = models.CharField(max_length=255)
    file_path = models.CharField(max_length=500, blank=True, default="")
    file_format = models.CharField(max_length=8)
    update_existing = models.BooleanField(default=False)
    created = models.PositiveIntegerField(default=0)
    updated = models.PositiveIntegerField(default=0)
    errors = models.JSONField(default=list, blank=True)
    error_count = models.PositiveIntegerField(default=0)

    # Set by adapters/uploads.py on the job it has just run, never stored: what the import
    # skipped or recorded beside its rows (cancelled annotations, abstentions), for that answer only.
    notes: list[str]

    class Meta(BackgroundJob.Meta):
        constraints = [
            models.CheckConstraint(condition=Q(what__in=["items", "annotations"]), name="importjob_what_valid"),
            *BackgroundJob.Meta.constraints,
        ]

    def __str__(self) -> str:
        return f"{self.what} import {self.file_name} ({self.status})"


class ExportJob(BackgroundJob):
    """An annotation export (or, `hf`, the study as a Hugging Face dataset zip; `predictions-csv` /
    `predictions-jsonl`, its verifiers' predictions) written to a file by a background task.

    Studies with more annotations than EXPORT_INLINE_MAX_ROWS are not exported
    inside a request (long work never runs there); the file waits
    under var/exports until a newer export of the same study and format
    replaces it.
    """

    class Format(models.TextChoices):
        CSV = "csv", "CSV"
        JSONL = "jsonl", "JSON Lines"
        #: Built by metaeval (annotation/lib/export_formats.py): a zip of the dataset folder
        #: `manage.py export_dataset --format hf` writes (parquet files and the dataset card).
        HF = "hf", "Hugging Face dataset (zip)"
        #: Built by metaeval too (metaeval/verifiers/prediction_export.py): the study's verifier predictions.
        PREDICTIONS_CSV = "predictions-csv", "Predictions (CSV)"
        PREDICTIONS_JSONL = "predictions-jsonl", "Predictions (JSON Lines)"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="export_jobs")
    file_format = models.CharField(max_length=20, choices=Format.choices)
    rows = models.PositiveIntegerField(
        default=0, help_text="Rows written: annotations, or predictions for a predictions-* export."
    )
    file_path = models.CharField(
        max_length=500, blank=True, default="", help_text="Empty until written, or once replaced."
    )
    error = models.TextField(blank=True, default="")
    license = models.CharField(
        max_length=64,
        blank=True,
        default="",
        db_default="",
        help_text="hf: the dataset card's licence (an SPDX id, metaeval/dataset_export/licenses.py); empty: the default.",
    )

    class Meta(BackgroundJob.Meta):
        constraints = [
            models.CheckConstraint(
                condition=Q(file_format__in=["csv", "jsonl", "hf", "predictions-csv", "predictions-jsonl"]),
                name="exportjob_format_valid",
            ),
            *BackgroundJob.Meta.constraints,
        ]

    def __str__(self) -> str:
        return f"{self.file_format} export of {self.study_id} ({self.status})"


class Invite(models.Model):
    """A link that lets people join a study (and, when not logged in, create an account first).

    Only the SHA-256 of the token is stored (like accounts.ApiToken): the clear link exists
    only in the answer that created it. `uses` is bumped by a conditional UPDATE
    (members/invites.py), so a 1-use invite admits one person even when two sign up at once;
    the CHECK constraint refuses more uses than `max_uses` whatever the code does.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="invites")
    token_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=16, help_text="The token's first characters, to tell invites apart.")
    role = models.CharField(max_length=16, choices=StudyMember.Role.choices, default=StudyMember.Role.ANNOTATOR)
    max_uses = models.PositiveIntegerField()
    uses = models.PositiveIntegerField(default=0)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(max_uses__gte=1), name="invite_max_uses_positive"),
            models.CheckConstraint(condition=Q(uses__lte=F("max_uses")), name="invite_uses_within_max"),
            models.CheckConstraint(condition=Q(role__in=["researcher", "annotator"]), name="invite_role_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.study_id}: invite {self.prefix}… ({self.uses}/{self.max_uses})"

    def state(self, now: datetime | None = None) -> str:
        """active / revoked / expired / used up: what a list shows and why a link is refused."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at <= (now or timezone.now()):
            return "expired"
        return "used up" if self.uses >= self.max_uses else "active"


class InviteSignup(models.Model):
    """One account created through an invite, with the client address: sign-ups are throttled per
    address (members/invites.py), and a researcher can see who came in through which link."""

    invite = models.ForeignKey(Invite, on_delete=models.CASCADE, related_name="signups")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    ip_address = models.GenericIPAddressField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["ip_address", "created_at"], name="invitesignup_ip_time")]

    def __str__(self) -> str:
        return f"sign-up through invite {self.invite_id} at {self.created_at:%Y-%m-%d %H:%M}"


class ParticipantLink(models.Model):
    """A study's link for crowd participants (Prolific or any panel): one per study.

    The token is part of a public URL pasted into a panel, so it is kept in clear;
    rotating it makes the old link stop working. Participants who arrive through it
    are identified by the panel's ID in the URL (`pid_param`), never by a password.
    """

    study = models.OneToOneField(Study, on_delete=models.CASCADE, related_name="participant_link")
    token = models.CharField(max_length=64, unique=True)
    enabled = models.BooleanField(default=False)
    max_participants = models.PositiveIntegerField(null=True, blank=True, help_text="Empty: no cap.")
    pid_param = models.CharField(max_length=64, default="PROLIFIC_PID")
    study_param = models.CharField(max_length=64, blank=True, default="STUDY_ID")
    session_param = models.CharField(max_length=64, blank=True, default="SESSION_ID")
    consent = models.TextField(blank=True, default="", help_text="Markdown; must be accepted before anything else.")
    items_per_participant = models.PositiveIntegerField(default=10)
    budget_minutes = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="A time budget instead of (or beside) the item quota: the session completes after the item "
        "during which the participant's active time reaches it. Empty: none.",
    )
    qualification_items = models.JSONField(default=list, blank=True, help_text="External ids of gold items.")
    qualification_pass = models.PositiveIntegerField(default=0, help_text="Correct answers needed to pass.")
    attention_items = models.JSONField(default=list, blank=True, help_text="External ids of gold items.")
    attention_every = models.PositiveIntegerField(default=0, help_text="A check after every k items; 0: none.")
    attention_fail_limit = models.PositiveIntegerField(default=2, help_text="Failed checks that screen out.")
    time_limit_minutes = models.PositiveIntegerField(default=60)
    code_completed = models.CharField(max_length=64, blank=True, default="")
    code_screened_out = models.CharField(max_length=64, blank=True, default="")
    code_timed_out = models.CharField(max_length=64, blank=True, default="")
    redirect_url = models.CharField(
        max_length=500,
        blank=True,
        default="",
        help_text="With {code}, e.g. https://app.prolific.com/submissions/complete?cc={code}",
    )
    pay_per_hour = models.DecimalField(max_digits=8, decimal_places=2, default=0)
    currency = models.CharField(
        max_length=3, default="GBP", db_default="GBP", help_text="ISO 4217 code of the pay, e.g. GBP, USD, EUR."
    )

    class PayBasis(models.TextChoices):
        ACTIVE = "active", "Active time on items and checks"
        WALL = "wall", "Wall time from arrival to the end (consent, instructions, questionnaires included)"

    pay_basis = models.CharField(
        max_length=8, choices=PayBasis.choices, default=PayBasis.ACTIVE, db_default=PayBasis.ACTIVE
    )
    code_full = models.CharField(
        max_length=64,
        blank=True,
        default="",
        db_default="",
        help_text="The code shown to arrivals after the cap (no places left), e.g. Prolific's 'NOPLACES'.",
    )
    prolific_study_id = models.CharField(
        max_length=64, blank=True, default="", db_default="", help_text="The study's id on Prolific."
    )
    prolific_token_encrypted = models.TextField(
        blank=True,
        default="",
        db_default="",
        editable=False,
        help_text="The researcher's Prolific API token, Fernet-encrypted (annotation/lib/keystore.py); never shown.",
    )
    rotated_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(pay_basis__in=["active", "wall"]), name="participant_link_pay_basis"),
        ]

    def __str__(self) -> str:
        return f"participant link of {self.study_id} ({'on' if self.enabled else 'off'})"


class ProlificCall(models.Model):
    """One request Claimlab made to Prolific's API for a study, and its answer: the audit trail of
    approvals, rejections and bonuses (annotation/crowd/prolific*.py). The token is never stored here."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="prolific_calls")
    made_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    at = models.DateTimeField(default=timezone.now)
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=300)
    request_body = models.JSONField(null=True, blank=True)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Null: no answer (network error).")
    response_body = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    duration_ms = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["study", "-at", "-id"]
        indexes = [models.Index(fields=["study", "at"], name="prolific_call_study_at")]

    def __str__(self) -> str:
        return f"{self.method} {self.path} -> {self.status_code}"


class Participant(models.Model):
    """A person who came through a study's participant link, bound to their panel ID.

    Their labels are made by `member` (an annotator identity whose user cannot log
    in), so assignment, N per item and reports treat them like any annotator. The
    panel ID is shown to researchers only; everything else uses the pseudonym.
    """

    class Status(models.TextChoices):
        CONSENT = "consent", "Consent"
        INSTRUCTIONS = "instructions", "Instructions"
        QUALIFYING = "qualifying", "Qualifying"
        WORKING = "working", "Working"
        COMPLETED = "completed", "Completed"
        SCREENED_OUT = "screened_out", "Screened out"
        TIMED_OUT = "timed_out", "Timed out"
        WITHDRAWN = "withdrawn", "Withdrawn"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="participants")
    member = models.OneToOneField(StudyMember, on_delete=models.CASCADE, related_name="participant")
    panel_id = models.CharField(max_length=64)
    panel_study_id = models.CharField(max_length=64, blank=True, default="")
    panel_session_id = models.CharField(max_length=64, blank=True, default="")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.CONSENT)
    checks_passed = models.PositiveIntegerField(default=0)
    checks_failed = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    consented_at = models.DateTimeField(null=True, blank=True)
    last_seen_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    withdrawn_at = models.DateTimeField(null=True, blank=True)

    ENDED = ("completed", "screened_out", "timed_out", "withdrawn")

    class Meta:
        ordering = ["study", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "panel_id"], name="participant_panel_id_unique"),
            models.CheckConstraint(
                condition=Q(
                    status__in=[
                        "consent",
                        "instructions",
                        "qualifying",
                        "working",
                        "completed",
                        "screened_out",
                        "timed_out",
                        "withdrawn",
                    ]
                ),
                name="participant_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.study_id}: participant {self.member_id} ({self.status})"

    @property
    def ended(self) -> bool:
        return self.status in self.ENDED


class ParticipantCheck(models.Model):
    """A participant's answer to a qualification or attention-check item: kept, marked, scored against gold.

    Not an Assignment: checks take no slot, so they never count towards N per item.
    """

    class Kind(models.TextChoices):
        QUALIFICATION = "qualification", "Qualification"
        ATTENTION = "attention", "Attention check"

    participant = models.ForeignKey(Participant, on_delete=models.CASCADE, related_name="checks")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    label = models.CharField(max_length=100)
    correct = models.BooleanField()
    active_ms = models.PositiveIntegerField(null=True, blank=True)
    answered_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["participant", "answered_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["participant", "item"], name="participant_check_once"),
            models.CheckConstraint(condition=Q(kind__in=["qualification", "attention"]), name="participant_check_kind"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} check of participant {self.participant_id}: {'pass' if self.correct else 'fail'}"


class QuestionnaireResponse(models.Model):
    """One person's answers to one of the study's questionnaires (pre, post) or one attempt at its quiz.

    Kept per person, exported under their pseudonym; a quiz attempt records whether it passed.
    """

    class Kind(models.TextChoices):
        PRE = "pre", "Pre-study questionnaire"
        QUIZ = "quiz", "Comprehension quiz"
        POST = "post", "Post-study questionnaire"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="questionnaire_responses")
    respondent = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    attempt = models.PositiveSmallIntegerField(default=1)
    answers = models.JSONField(default=dict)
    passed = models.BooleanField(null=True, blank=True, help_text="A quiz attempt: every answer right.")
    answered_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["study", "respondent", "answered_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "respondent", "kind", "attempt"], name="questionnaire_response_once"
            ),
            models.CheckConstraint(condition=Q(kind__in=["pre", "quiz", "post"]), name="questionnaire_response_kind"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} of {self.respondent_id} in study {self.study_id} (attempt {self.attempt})"


class TrainingAnswer(models.Model):
    """An annotator's answer to a training item (Study.training): scored against gold and shown with feedback.

    Not an Assignment: training takes no slot and no answer of it reaches agreement or any other
    number of the study's labels (training items are marked like checks, Item.is_check); it is
    reported per annotator as training accuracy.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="training_answers")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    label = models.CharField(max_length=100)
    answer = models.JSONField(default=dict, help_text="The whole answer as given (system space).")
    correct = models.BooleanField()
    active_ms = models.PositiveIntegerField(null=True, blank=True)
    answered_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["study", "annotator", "answered_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "annotator", "item"], name="training_answer_once"),
        ]

    def __str__(self) -> str:
        return f"training answer of {self.annotator_id} on {self.item_id}: {'right' if self.correct else 'wrong'}"


class DomainCount(models.Model):
    """Items and items with a gold label of one (study, domain): what the pages show without counting items.

    Maintained by `services/counters.py` in the transaction of every write that adds or
    changes items (imports, study copies); `manage.py recount_study` recomputes it.
    Written only by imports, never by annotators, so it is no hot row.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="domain_counts")
    domain = models.CharField(max_length=100, blank=True, default="")
    items = models.PositiveIntegerField(default=0)
    gold = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["study", "domain"]
        constraints = [models.UniqueConstraint(fields=["study", "domain"], name="domain_count_unique")]

    def __str__(self) -> str:
        return f"{self.study_id}:{self.domain or '-'}: {self.items} items"


class AnnotatorCount(models.Model):
    """Annotations one annotator gave on items of one domain, the items their answers completed, and
    what the progress page's annotator table shows of them (issue 35: read here, not from every label).

    One row per (study, annotator, domain) so that annotators submitting at once each
    update their own row and never wait on a shared one. `complete` counts the items
    that reached N labels with an answer counted in this row: the study's items with
    all N labels are the sum over its rows (no single row means anything alone).
    The others are per annotator once summed over domains (progress/counters.py keeps them):
    answers with an active time, abstaining, on gold items and right there, imported; skips
    pressed and leases that ran out (progress/selectors.pressed_skip, TIMED_OUT) on the domain's items.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="annotator_counts")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    domain = models.CharField(max_length=100, blank=True, default="")
    # Database defaults: each counting INSERT names only the columns it adds to.
    annotations = models.PositiveIntegerField(default=0, db_default=0)
    complete = models.IntegerField(default=0, db_default=0)
    timed = models.PositiveIntegerField(default=0, db_default=0)
    abstained = models.PositiveIntegerField(default=0, db_default=0)
    gold_n = models.PositiveIntegerField(default=0, db_default=0)
    gold_correct = models.PositiveIntegerField(default=0, db_default=0)
    imported = models.PositiveIntegerField(default=0, db_default=0)
    skipped = models.PositiveIntegerField(default=0, db_default=0)
    timed_out = models.PositiveIntegerField(default=0, db_default=0)

    class Meta:
        ordering = ["study", "user", "domain"]
        constraints = [models.UniqueConstraint(fields=["study", "user", "domain"], name="annotator_count_unique")]

    def __str__(self) -> str:
        return f"{self.study_id}:{self.user_id}:{self.domain or '-'}: {self.annotations} annotations"


class ActiveTimeBucket(models.Model):
    """How many of one annotator's answers in a study took an active time in one bucket of the
    sketch (lib/active_time_sketch.py): the progress page's medians, within 1/128, from these rows.

    One row per (study, annotator, bucket): a submit adds to its own annotator's rows only (no hot
    row); the study's median merges every annotator's. Kept by progress/counters.py with the answers.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    bucket = models.SmallIntegerField()
    labels = models.PositiveIntegerField(default=0, db_default=0)

    class Meta:
        ordering = ["study", "user", "bucket"]
        constraints = [models.UniqueConstraint(fields=["study", "user", "bucket"], name="active_time_bucket_unique")]

    def __str__(self) -> str:
        return f"{self.study_id}:{self.user_id}: bucket {self.bucket}: {self.labels}"


class WorkerHeartbeat(models.Model):
    """A running background worker (`manage.py worker`, either task backend), as it last said.

    Each worker registers at start and stamps `last_seen` every few seconds from a side thread;
    the jobs, verifier runs and report builds it takes record its `id`. A worker is gone when
    its process is dead on this host (same host name and process namespace, pid not alive, or
    its pid taken by a newer worker), when it is silent for WORKER_LOST_SECONDS elsewhere, or when its row is
    missing; any worker then re-queues what it held (annotation/lib/job_runs.py).
    """

    id = models.CharField(primary_key=True, max_length=100)
    host = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    last_seen = models.DateTimeField()

    #: Silence after which a worker on another host counts as gone (beats come every second).
    LOST_AFTER = timedelta(seconds=6)

    class Meta:
        ordering = ["host", "started_at"]

    def __str__(self) -> str:
        return f"worker {self.id} on {self.host} (pid {self.pid}), last seen {self.last_seen:%Y-%m-%d %H:%M:%S}"

    @classmethod
    def lost_after(cls) -> timedelta:
        return timedelta(seconds=getattr(settings, "WORKER_LOST_SECONDS", cls.LOST_AFTER.total_seconds()))

    @classmethod
    def lost_ids(cls, ids: Iterable[str], *, now: datetime | None = None) -> set[str]:
        """Which of these worker ids belong to no live worker."""
        wanted = {worker_id for worker_id in ids if worker_id}
        if not wanted:
            return set()
        rows = {row.id: row for row in cls.objects.filter(pk__in=wanted)}
        dead = cls.dead_ids(now=now)
        return {worker_id for worker_id in wanted if worker_id not in rows or worker_id in dead}

    @classmethod
    def dead_ids(cls, *, now: datetime | None = None) -> set[str]:
        """The registered workers that are gone (see the class)."""
        now = now or timezone.now()
        here = this_host()
        dead: set[str] = set()
        by_pid: dict[int, list[WorkerHeartbeat]] = {}
        for row in cls.objects.all():
            if row.host != here:
                if now - row.last_seen > cls.lost_after():
                    dead.add(row.id)
            elif not pid_alive(row.pid):
                dead.add(row.id)
            else:
                by_pid.setdefault(row.pid, []).append(row)
        for rows in by_pid.values():  # a pid reused (a restarted container): only the newest worker owns it
            rows.sort(key=lambda row: row.started_at)
            dead.update(row.id for row in rows[:-1])
        return dead


def this_host() -> str:
    """This host as the registry names it: its host name, and its process-id namespace where Linux
    tells it (two containers sharing a host name do not see each other's processes)."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return socket.gethostname()
    return f"{socket.gethostname()} {namespace}"[:255]


def pid_alive(pid: int) -> bool:
    """Whether a process with this id runs on this host (a zombie counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class AccountOrigin(models.Model):
    """Which study made an account, and how: the one thing that lets its researchers reset its password.

    Written when the account is created for a study (a sign-up through the study's invite, or
    `add_members` making a missing account); never for an account that existed before, nor for a
    crowd participant's internal account. It outlives the membership (removing the member does not
    give the study a claim on an account it did not make, nor take the claim away), and goes with
    the account or the study. members/membership.password_reset_refusal reads it.
    """

    class How(models.TextChoices):
        INVITE = "invite", "signed up through the study's invite"
        ADDED = "added", "created when a researcher added the username"

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="origin")
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="created_accounts")
    how = models.CharField(max_length=16, choices=How.choices)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["study", "created_at", "id"]
        constraints = [models.CheckConstraint(condition=Q(how__in=["invite", "added"]), name="origin_how_valid")]

    def __str__(self) -> str:
        return f"user {self.user_id} made by study {self.study_id} ({self.how})"


class PasswordReset(models.Model):
    """One password reset from a study's members page or API: who reset whose account, when, from where.

    Kept when the membership is removed, the account or the researcher deleted (the usernames are
    copied), so the operator can always see it (read-only in the admin); a line in the study's
    change log (StudyChange, field `password_reset`) says the same on the settings page.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="password_resets")
    researcher = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    researcher_username = models.CharField(max_length=150)
    account = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    account_username = models.CharField(max_length=150)
    pseudonym = models.CharField(max_length=100, blank=True, default="")
    ip_address = models.GenericIPAddressField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.researcher_username} reset {self.account_username} in study {self.study_id} at {self.created_at:%Y-%m-%d %H:%M}"
