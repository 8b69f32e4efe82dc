from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    """Collecting labels: studies, items, assignments, annotations, import/export."""

    name = "annotation"
    verbose_name = "Annotation"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from annotation.lib import task_wakeup  # noqa: F401  (connects the receiver that wakes idle workers)
