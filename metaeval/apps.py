from django.apps import AppConfig


class MetaevalConfig(AppConfig):
    """Analysing labels: agreement, verifiers, factuality scores, reports."""

    name = "metaeval"
    verbose_name = "Meta-evaluation"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Importing the statistics pins pandas' string storage for every frame the app builds.
        # openapi: strict request bodies as additionalProperties: false in the schema.
        from . import openapi, receivers, stats  # noqa: F401  (stats: pandas' string storage; receivers: connects them)
