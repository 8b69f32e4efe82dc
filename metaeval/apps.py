from functools import partial
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
                check_options=_hf_options,
            )
        )
        # A verification study's predictions, one row each (verifiers/prediction_export.py): verifier-scale
        # studies hold a million, so always written by a background job.
        for fmt, title, content_type in (
            ("csv", "Predictions (CSV)", "text/csv; charset=utf-8"),
            ("jsonl", "Predictions (JSON Lines)", "application/x-ndjson; charset=utf-8"),
        ):
            register_export_format(
                ExportFormat(
                    name=f"predictions-{fmt}",
                    title=title,
                    suffix=f"predictions.{fmt}",
                    content_type=content_type,
                    build=partial(_write_predictions, fmt),
                    counts="prediction",
                )
            )


def _write_hf_zip(study: Any, path: Path, options: dict[str, str]) -> int:
    from .dataset_export.archive import write_hf_zip

    return write_hf_zip(study, path, license=options.get("license", ""))


def _write_predictions(fmt: str, study: Any, path: Path, options: dict[str, str]) -> int:
    from .verifiers.prediction_export import write_predictions

    return write_predictions(study, fmt, path)


def _hf_options(options: dict[str, str]) -> dict[str, str]:
    """The Hugging Face export's one option: the card's licence, an identifier of the Hub (empty: other)."""
    from .dataset_export.licenses import dataset_license

    unknown = sorted(name for name, value in options.items() if value and name != "license")
    if unknown:
        from annotation.errors import ServiceError

        raise ServiceError(f"the Hugging Face export takes no option {', '.join(unknown)}")
    given = (options.get("license") or "").strip()
    return {"license": dataset_license(given)} if given else {}
