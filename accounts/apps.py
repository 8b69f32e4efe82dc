from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Logins and API tokens: login throttling (django-axes) and hashed, expiring, revocable tokens."""

    name = "accounts"
    verbose_name = "Accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import receivers  # noqa: F401  (connects the signal receivers)
