from django.apps import AppConfig


class MetaevalConfig(AppConfig):
    """Analysing labels: agreement, verifiers, factuality scores, reports."""

    name = "metaeval"
    verbose_name = "Meta-evaluation"
    default_auto_field = "django.db.models.BigAutoField"
