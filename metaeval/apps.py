from pathlib import Path
from typing import Any

from django.apps import AppConfig


class MetaevalConfig(AppConfig):
    """Analysing labels: agreement, verifiers, factuality scores, reports."""

    name = "metaeval"
    verbose_name = "Meta-evaluation"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Importing the statistics pins pandas' string storage for every frame the app builds.
        # receivers connects them; stats pins pandas' string storage; tasks registers the report's refresh task
        # with the report cache (reporting.cache.register_refresh_task); openapi: strict request bodies as
        # additionalProperties: false in the schema.
        from annotation.lib.export_formats import ExportFormat, register_export_format
        from annotation.lib.suggestions import register_suggestion_source

        from . import openapi, receivers, stats, tasks  # noqa: F401
        from .verifiers.suggestions import prediction_suggestion

        # A study condition's machine suggestion is a verifier's prediction (annotation/lib/suggestions.py).
        register_suggestion_source(prediction_suggestion)
        # The Hugging Face dataset as a background export job (annotation/lib/export_formats.py).
        # Built lazily: pyarrow and the dataset code are imported by the job that needs them.
        register_export_format(
            ExportFormat(
                name="hf",
                title="Hugging Face dataset (zip)",
                suffix="hf-dataset.zip",
                content_type="application/zip",
                build=_write_hf_zip,
            )
        )


def _write_hf_zip(study: Any, path: Path) -> int:
    from .dataset_export.archive import write_hf_zip

    return write_hf_zip(study, path)
