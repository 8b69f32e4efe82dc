"""Tables of the meta-evaluation side: automatic verifiers, their runs and predictions (docs/architecture.md, Data model).

The invariants that keep verifier numbers honest are database constraints,
so they hold even when two workers race on one run:

- a prediction is unique per (verifier, item, cache key): a rerun, or a
  resumed run, can never store the same answer twice;
- a prediction has a label exactly when it has neither an error nor an
  unparseable answer: an unparseable answer can never pass for a label;
- a verifier has at most one active (queued / running / stopping) run.

API keys are never stored: a verifier names the *environment variable* that
holds the key, and the worker reads it when it runs.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from annotation.models import Item, Study


class Verifier(models.Model):
    """An automatic verifier of a study's claims: an LLM preset, a baseline, or predictions made elsewhere."""

    class Kind(models.TextChoices):
        LLM = "llm", "LLM (OpenAI-compatible endpoint)"
        BASELINE_MAJORITY = "baseline_majority", "Baseline: always the majority label"
        BASELINE_OVERLAP = "baseline_overlap", "Baseline: lexical overlap of claim and evidence"
        IMPORTED = "imported", "Imported predictions"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="verifiers")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=24, choices=Kind.choices, default=Kind.LLM)
    preset = models.CharField(max_length=40, blank=True, default="", help_text="Prompt preset id (LLM verifiers).")
    model = models.CharField(max_length=200, blank=True, default="", help_text="Model name sent to the endpoint.")
    endpoint = models.CharField(
        max_length=64,
        blank=True,
        default="",
        help_text="Name of an operator-defined endpoint (CLAIMLAB_ENDPOINTS); empty for a researcher endpoint.",
    )
    base_url = models.CharField(
        max_length=500,
        blank=True,
        default="",
        help_text="Researcher endpoint only: its OpenAI-compatible base URL (must pass the address policy).",
    )
    api_key_encrypted = models.TextField(
        blank=True, default="", editable=False, help_text="Researcher endpoint only: its key, Fernet-encrypted."
    )
    temperature = models.FloatField(default=0.0)
    max_tokens = models.PositiveIntegerField(default=512)
    concurrency = models.PositiveSmallIntegerField(default=8, help_text="Requests in flight at once.")
    timeout = models.FloatField(default=60.0, help_text="Seconds per request attempt.")
    retries = models.PositiveSmallIntegerField(default=2, help_text="Retries per request (429, 5xx, timeouts).")
    template = models.TextField(
        blank=True, default="", help_text="Custom preset: Django template over claim, context, evidence."
    )
    system_prompt = models.TextField(blank=True, default="", help_text="Custom preset: optional system message.")
    custom_labels = models.JSONField(default=list, blank=True, help_text="Custom preset: the labels it answers with.")
    label_map = models.JSONField(
        default=dict, blank=True, help_text="Preset label -> study label, where the study's labels and aliases differ."
    )
    options = models.JSONField(
        default=dict, blank=True, help_text="Baseline options: threshold, positive_label, negative_label."
    )
    price_input_per_1k = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        help_text="Price per 1,000 input tokens (estimates only).",
    )
    price_output_per_1k = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True, help_text="Price per 1,000 output tokens."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    predictions_version = models.PositiveBigIntegerField(
        default=0,
        db_default=0,
        help_text="Goes up by one in the transaction of every write of the verifier's predictions (an import's "
        "switch, a run's stored batch): the report fingerprint and the verifiers page's counts read it instead "
        "of every prediction (issue 35; verifiers/prediction_version.py).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["study", "name"]
        constraints = [
            models.UniqueConstraint(fields=["study", "name"], name="verifier_name_unique_per_study"),
            models.CheckConstraint(condition=~Q(name=""), name="verifier_name_not_empty"),
            models.CheckConstraint(
                condition=Q(kind__in=["llm", "baseline_majority", "baseline_overlap", "imported"]),
                name="verifier_kind_valid",
            ),
            models.CheckConstraint(
                condition=~Q(kind="llm") | (~Q(preset="") & ~Q(model="") & (~Q(endpoint="") | ~Q(base_url=""))),
                name="verifier_llm_has_preset_model_endpoint",
            ),
            models.CheckConstraint(condition=Q(concurrency__gte=1), name="verifier_concurrency_positive"),
            models.CheckConstraint(condition=Q(timeout__gt=0), name="verifier_timeout_positive"),
            models.CheckConstraint(
                condition=Q(temperature__gte=0) & Q(temperature__lte=2), name="verifier_temperature_range"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.study_id}:{self.name}"

    @property
    def has_api_key(self) -> bool:
        """Whether a researcher endpoint key is stored (the key itself is never shown)."""
        return bool(self.api_key_encrypted)

    @property
    def endpoint_label(self) -> str:
        """The endpoint as pages show it: an operator endpoint's name, or the researcher's URL."""
        return self.endpoint or self.base_url

    @property
    def is_baseline(self) -> bool:
        return self.kind in (self.Kind.BASELINE_MAJORITY, self.Kind.BASELINE_OVERLAP)

    @property
    def is_runnable(self) -> bool:
        """Imported verifiers hold predictions made elsewhere: there is nothing to run."""
        return self.kind != self.Kind.IMPORTED


ACTIVE_RUN_STATUSES = ("queued", "running", "stopping")


class VerifierRun(models.Model):
    """One pass of a verifier over (the first `limit` of) a study's items, in chunks.

    `cursor` is the last item id whose chunk finished; a resumed run redoes
    the chunk after it, skipping items that already have a prediction for
    their cache key. `generation` names the current chain of chunk tasks: a
    resume bumps it, and a chunk task of an older generation does nothing.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        STOPPING = "stopping", "Stopping"
        STOPPED = "stopped", "Stopped"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"

    verifier = models.ForeignKey(Verifier, on_delete=models.CASCADE, related_name="runs")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    total = models.PositiveIntegerField(default=0, help_text="Items this run covers.")
    done = models.PositiveIntegerField(default=0, help_text="Items with a prediction (new or cached).")
    errors = models.PositiveIntegerField(default=0, help_text="Predictions of this run that hold an error.")
    unparseable = models.PositiveIntegerField(default=0, help_text="Answers of this run with no readable verdict.")
    cached = models.PositiveIntegerField(default=0, help_text="Items answered before, for the same cache key.")
    tokens_in = models.BigIntegerField(default=0)
    tokens_out = models.BigIntegerField(default=0)
    estimated_cost = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    limit = models.PositiveIntegerField(null=True, blank=True, help_text="Only the first N items.")
    concurrency = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Overrides the verifier's.")
    upto_item = models.BigIntegerField(default=0, help_text="Largest item id the run covers.")
    cursor = models.BigIntegerField(default=0, help_text="Items up to this id are finished.")
    counted_cursor = models.BigIntegerField(default=0, help_text="Cached items up to this id are counted.")
    generation = models.PositiveIntegerField(default=0)
    params = models.JSONField(default=dict, blank=True, help_text="What the run fixed at its start (baselines).")
    error_message = models.TextField(blank=True, default="")
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    worker = models.CharField(
        max_length=100,
        blank=True,
        default="",
        help_text="The registered worker running the current chunk; when it is gone, any worker resumes the run.",
    )
    recoveries = models.PositiveSmallIntegerField(
        default=0, help_text="Times the current chunk was resumed after its worker died (reset when a chunk ends)."
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "heartbeat_at"], name="run_status_heartbeat")]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["queued", "running", "stopping", "stopped", "succeeded", "failed"]),
                name="run_status_valid",
            ),
            models.UniqueConstraint(
                fields=["verifier"], condition=Q(status__in=ACTIVE_RUN_STATUSES), name="run_one_active_per_verifier"
            ),
            models.CheckConstraint(condition=Q(done__lte=F("total")), name="run_done_at_most_total"),
            models.CheckConstraint(condition=Q(cached__lte=F("done")), name="run_cached_at_most_done"),
            models.CheckConstraint(
                condition=Q(concurrency__isnull=True) | Q(concurrency__gte=1), name="run_concurrency_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.verifier} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_RUN_STATUSES

    @property
    def effective_concurrency(self) -> int:
        return self.concurrency or self.verifier.concurrency


class Prediction(models.Model):
    """A verifier's answer on one item, for one cache key (model, prompt, parameters).

    `label` is canonical (one of the study's labels); `raw_label` is what the
    parser or the imported file said; `raw_output` the model's full text.
    A failed call keeps its `error` and has no parse status and no label.
    """

    class ParseStatus(models.TextChoices):
        OK = "ok", "Parsed"
        FALLBACK = "fallback", "Parsed by a looser rule"
        UNPARSEABLE = "unparseable", "Unparseable"
        NONE = "", "Not parsed (the call failed)"

    verifier = models.ForeignKey(Verifier, on_delete=models.CASCADE, related_name="predictions")
    run = models.ForeignKey(VerifierRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="predictions")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="predictions")
    label = models.CharField(max_length=100, null=True, blank=True)
    raw_label = models.CharField(max_length=200, blank=True, default="")
    score = models.FloatField(null=True, blank=True)
    rationale = models.TextField(blank=True, default="")
    raw_output = models.TextField(blank=True, default="")
    parse_status = models.CharField(max_length=12, choices=ParseStatus.choices, blank=True, default="")
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    order_labels = models.JSONField(
        default=list,
        blank=True,
        help_text="Pairwise judges: the verdict of each presentation order (A's list first, then B's), "
        "in system space; null where that order's answer could not be read.",
    )
    cache_key = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["verifier", "item", "id"]
        indexes = [
            models.Index(fields=["verifier", "item"], name="prediction_verifier_item"),
            models.Index(fields=["run", "error"], name="prediction_run"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["verifier", "item", "cache_key"], name="prediction_once_per_cache_key"),
            models.CheckConstraint(condition=~Q(cache_key=""), name="prediction_cache_key_not_empty"),
            models.CheckConstraint(
                condition=Q(parse_status__in=["ok", "fallback", "unparseable", ""]),
                name="prediction_parse_status_valid",
            ),
            # A failed call has no parse status; an answered call has one.
            models.CheckConstraint(
                condition=(Q(error="") & ~Q(parse_status="")) | (~Q(error="") & Q(parse_status="")),
                name="prediction_error_xor_parse_status",
            ),
            # The label is null exactly when the answer is unparseable or the call failed.
            models.CheckConstraint(
                condition=(Q(label__isnull=True) & (Q(parse_status="unparseable") | ~Q(error="")))
                | (Q(label__isnull=False) & ~Q(label="") & Q(error="") & Q(parse_status__in=["ok", "fallback"])),
                name="prediction_label_iff_parsed",
            ),
            models.CheckConstraint(
                condition=Q(score__isnull=True) | Q(score__gte=-1e12) & Q(score__lte=1e12),
                name="prediction_score_finite",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.verifier_id}/{self.item_id}: {self.label or self.parse_status or 'error'}"


class StagedPrediction(models.Model):
    """One parsed row of a prediction import on its way in (verifiers/services/prediction_staging.py).

    Like annotation's StagedItem: the shape of a private TEMPORARY table that each
    import creates (annotation/lib/staging.py), not a table of the database. The
    verifier is named, not referred to: a verifier new to the study is made only
    when the rows go live. `target` is the prediction an update replaces.
    """

    line = models.BigIntegerField()
    target = models.BigIntegerField(null=True)
    verifier_name = models.CharField(max_length=100)
    item_id = models.IntegerField()
    label = models.CharField(max_length=100, null=True)
    raw_label = models.CharField(max_length=200)
    score = models.FloatField(null=True)
    rationale = models.TextField()
    raw_output = models.TextField()
    parse_status = models.CharField(max_length=12)

    class Meta:
        managed = False
        db_table = "claimlab_staged_prediction"

    def __str__(self) -> str:
        return f"staged prediction of {self.verifier_name} (line {self.line})"


class ReportSnapshot(models.Model):
    """A built report, kept so that a page view does not recompute every bootstrap (issue 15 §3).

    Keyed by the study, the report options (``options_key``, a hash of their JSON) and the
    data's fingerprint (``metaeval.selectors.report_fingerprint``): a snapshot is current
    exactly when its fingerprint is the study's fingerprint now. ``report`` is the report
    without its long lists, which live in ``ReportSnapshotPart`` rows, so a page loads only
    the rows it shows. A study keeps only its latest few (``metaeval.reporting.cache``).
    A big study's first report is stored twice while it is built: first its counts and
    agreement sections (``complete`` False, shown on the page only), then whole, in its place.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="report_snapshots")
    options_key = models.CharField(max_length=64)
    fingerprint = models.CharField(max_length=64)
    # JSON text, not a JSONField: PostgreSQL's jsonb reorders keys, and the report's key order is
    # its row order in the CSV and on the page (a cached report must read exactly like a fresh one).
    report = models.TextField(help_text="The report without its long lists (see ReportSnapshotPart), as JSON.")
    computed_at = models.DateTimeField()
    build_seconds = models.FloatField(default=0.0)
    complete = models.BooleanField(
        default=True, help_text="False for the first sections of a report still being built (the page's only)."
    )

    class Meta:
        ordering = ["study", "-computed_at", "-id"]
        indexes = [models.Index(fields=["study", "options_key", "computed_at"], name="report_snapshot_latest")]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "options_key", "fingerprint"], name="report_snapshot_once_per_state"
            ),
        ]

    def __str__(self) -> str:
        return f"report of {self.study_id} at {self.computed_at:%Y-%m-%d %H:%M:%S}"


class ReportSnapshotPart(models.Model):
    """One chunk of a long list of a snapshot (e.g. rows 1,000-1,999 of the disagreements)."""

    snapshot = models.ForeignKey(ReportSnapshot, on_delete=models.CASCADE, related_name="parts")
    section = models.CharField(
        max_length=400, help_text="The list's path in the report, e.g. scores/human/per_response."
    )
    chunk = models.PositiveIntegerField()
    rows = models.TextField(help_text="The chunk's rows as a JSON list (text: key order kept).")

    class Meta:
        ordering = ["snapshot", "section", "chunk"]
        constraints = [
            models.UniqueConstraint(fields=["snapshot", "section", "chunk"], name="report_part_once"),
        ]

    def __str__(self) -> str:
        return f"{self.snapshot_id}: {self.section} #{self.chunk}"


class ReportRefresh(models.Model):
    """The background recomputation asked for a study's report with some options.

    One row per (study, options): a page view that finds only a stale snapshot queues a
    task only when it moves ``fingerprint``/``queued_at`` by a conditional UPDATE, so ten
    reloads queue one task, and a task lost with its worker is queued again after
    ``REPORT_REFRESH_RETRY_SECONDS``.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="report_refreshes")
    options_key = models.CharField(max_length=64)
    options = models.JSONField(help_text="ReportOptions.as_dict(), for the task.")
    fingerprint = models.CharField(max_length=64, help_text="The data state the queued task was asked for.")
    queued_at = models.DateTimeField()
    worker = models.CharField(
        max_length=100, blank=True, default="", help_text="The registered worker building it now; empty when none."
    )
    attempts = models.PositiveSmallIntegerField(default=0, help_text="Builds started since it was last queued.")
    error = models.TextField(blank=True, default="", help_text="Why recovery gave the build up, if it did.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "options_key"], name="report_refresh_once_per_options"),
        ]

    def __str__(self) -> str:
        return f"refresh of {self.study_id} queued {self.queued_at:%Y-%m-%d %H:%M:%S}"
