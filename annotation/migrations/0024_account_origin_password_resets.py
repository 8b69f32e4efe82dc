# Issue 31, finding 1: which study made an account (a researcher may reset only those passwords),
# and the audit trail of password resets.

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def backfill_invite_origins(apps, schema_editor):
    """Accounts created through an invite's sign-up: the InviteSignup row was written in the
    transaction that created the account, so the study is certain. No other account gets an
    origin (an `add_members` account left no record of being made), so researchers cannot reset
    it; staff still can in the admin."""
    InviteSignup = apps.get_model("annotation", "InviteSignup")
    AccountOrigin = apps.get_model("annotation", "AccountOrigin")
    seen: set[int] = set()
    origins = []
    rows = (
        InviteSignup.objects.filter(user__isnull=False)
        .order_by("created_at", "id")
        .values_list("user_id", "invite__study_id", "created_at")
    )
    for user_id, study_id, created_at in rows.iterator():
        if user_id in seen:
            continue
        seen.add(user_id)
        origins.append(AccountOrigin(user_id=user_id, study_id=study_id, how="invite", created_at=created_at))
    AccountOrigin.objects.bulk_create(origins, batch_size=500)


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0023_study_source_labels"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="AccountOrigin",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "how",
                    models.CharField(
                        choices=[
                            ("invite", "signed up through the study's invite"),
                            ("added", "created when a researcher added the username"),
                        ],
                        max_length=16,
                    ),
                ),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "study",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="created_accounts",
                        to="annotation.study",
                    ),
                ),
                (
                    "user",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="origin",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["study", "created_at", "id"],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(("how__in", ["invite", "added"])), name="origin_how_valid"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="PasswordReset",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("researcher_username", models.CharField(max_length=150)),
                ("account_username", models.CharField(max_length=150)),
                ("pseudonym", models.CharField(blank=True, default="", max_length=100)),
                ("ip_address", models.GenericIPAddressField(blank=True, null=True)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "account",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "researcher",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "study",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="password_resets",
                        to="annotation.study",
                    ),
                ),
            ],
            options={"ordering": ["-created_at", "-id"]},
        ),
        migrations.RunPython(backfill_invite_origins, migrations.RunPython.noop, elidable=True),
    ]
