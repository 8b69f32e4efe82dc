"""DRF serializers: shapes of the API, no business logic."""

from __future__ import annotations

from django.urls import reverse
from rest_framework import serializers

from annotation.lib.strict import StrictSerializer
from annotation.models import ExportJob, ImportJob
from annotation.transfer.adapters import SOURCES
from annotation.transfer.adapters.source_labels import DEFAULT as SOURCE_LABEL_DEFAULT
from annotation.transfer.adapters.source_labels import DESCRIPTIONS as SOURCE_LABELS


def from_field() -> serializers.ChoiceField:
    """The `from` choice of the import routes: a pipeline whose own file this is (docs/importing.md)."""
    return serializers.ChoiceField(
        choices=list(SOURCES),
        required=False,
        help_text="The file is this pipeline's own output, not Claimlab's format (docs/importing.md); "
        "imported during the request, up to IMPORT_FROM_UPLOAD_MAX_BYTES.",
    )


class ImportUploadSerializer(StrictSerializer):
    file = serializers.FileField(help_text="JSON Lines (.jsonl) or CSV (.csv), UTF-8; or a pipeline's own file.")
    format = serializers.ChoiceField(choices=["jsonl", "csv"], required=False, help_text="Default: from the file name.")
    update = serializers.BooleanField(required=False, default=False, help_text="Replace entries whose id exists.")
    pair = serializers.FileField(
        required=False, help_text="With from=veriscore into a preference study: the second extractor's claims file."
    )
    systems = serializers.CharField(
        required=False,
        default="",
        max_length=400,
        help_text="With `from`: the two extractors' names (A,B), or the model that wrote the responses.",
    )

    source_labels = serializers.CharField(
        required=False,
        max_length=20,
        help_text="With `from`, importing items whose file holds the source's own labels: "
        + "; ".join(f"`{name}`: {text}" for name, text in SOURCE_LABELS.items())
        + f". Default `{SOURCE_LABEL_DEFAULT}`; another value is refused naming these.",
    )

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        fields["from"] = from_field()  # a Python keyword: declared here, not as a class attribute
        return fields


class ImportErrorSerializer(serializers.Serializer):
    line = serializers.IntegerField(allow_null=True)
    field = serializers.CharField(allow_null=True)
    message = serializers.CharField()


class ImportJobSerializer(serializers.ModelSerializer):
    errors = ImportErrorSerializer(many=True, read_only=True)
    notes = serializers.SerializerMethodField(
        help_text="Imports `from` a pipeline's file: what was skipped or recorded beside the rows."
    )

    class Meta:
        model = ImportJob
        fields = [
            "id",
            "what",
            "file_name",
            "file_format",
            "update_existing",
            "status",
            "created",
            "updated",
            "error_count",
            "errors",
            "notes",
            "created_at",
            "finished_at",
            "stuck",
        ]

    def get_notes(self, job: ImportJob) -> list[str]:
        return list(getattr(job, "notes", []))

    stuck = serializers.SerializerMethodField(
        help_text="Unfinished with no sign of life from a worker for ten minutes: no worker is running it."
    )

    def get_stuck(self, job: ImportJob) -> bool:
        return job.looks_stuck()


class FailedImportSerializer(ImportJobSerializer):
    """An import that changed nothing: the job with its errors, in the one error shape too (`detail`, `code`),
    so a client reads every 400 of the API the same way."""

    detail = serializers.SerializerMethodField()
    code = serializers.SerializerMethodField(help_text="invalid")

    class Meta(ImportJobSerializer.Meta):
        fields = ["detail", "code", *ImportJobSerializer.Meta.fields]

    def get_detail(self, job: ImportJob) -> str:
        return f"Nothing was imported ({job.error_count} problem(s)): `errors` name line and field."

    def get_code(self, job: ImportJob) -> str:
        return "invalid"


class ExportRequestSerializer(StrictSerializer):
    format = serializers.ChoiceField(
        choices=ExportJob.Format.choices,
        default="csv",
        help_text="csv / jsonl: the annotations, one row each (docs/formats.md). hf: the study as a Hugging Face "
        "dataset, a zip of the parquet files and the dataset card that `manage.py export_dataset` writes "
        "(docs/reports.md); `rows` counts its annotations. predictions-csv / predictions-jsonl: the verifiers' "
        "predictions, one row each (docs/formats.md); `rows` counts them.",
    )
    license = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=64,
        default="",
        help_text="hf only: the dataset card's licence, a Hugging Face Hub identifier such as cc-by-4.0 or mit "
        "(SPDX ids in any case are accepted); empty: other.",
    )


class ExportJobSerializer(serializers.ModelSerializer):
    format = serializers.CharField(source="file_format", read_only=True)
    download_url = serializers.SerializerMethodField(
        help_text="Set once the file is ready (and until a newer export replaces it)."
    )

    class Meta:
        model = ExportJob
        fields = [
            "id",
            "format",
            "license",
            "status",
            "rows",
            "error",
            "created_at",
            "finished_at",
            "download_url",
            "stuck",
        ]
        read_only_fields = fields

    stuck = serializers.SerializerMethodField(
        help_text="Still queued or running ten minutes on: no worker is running it; start a new export."
    )

    def get_stuck(self, job: ExportJob) -> bool:
        return job.looks_stuck()

    def get_download_url(self, job: ExportJob) -> str | None:
        if job.status != ExportJob.Status.SUCCEEDED or not job.file_path:
            return None
        return reverse("api-export-download", args=[job.study.slug, job.pk])
