"""Move DRF's clear-text tokens (rest_framework.authtoken, no longer installed) into ApiToken, hashed.

Their keys keep working; the old table is dropped, so no clear-text key stays in the database,
and its migration records are removed (re-adding the app would start from a clean table).
"""

import datetime
import hashlib

from django.db import migrations
from django.utils import timezone
from django.utils.dateparse import parse_datetime


def _aware(value):
    """SQLite hands the raw column back as naive UTC text; PostgreSQL as an aware datetime."""
    moment = parse_datetime(value) if isinstance(value, str) else value
    if moment is None:
        return timezone.now()
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment, datetime.timezone.utc)


def hash_drf_tokens(apps, schema_editor):
    connection = schema_editor.connection
    if "authtoken_token" not in connection.introspection.table_names():
        return
    ApiToken = apps.get_model("accounts", "ApiToken")
    with connection.cursor() as cursor:
        q = connection.ops.quote_name
        cursor.execute(f"SELECT {q('key')}, {q('user_id')}, {q('created')} FROM authtoken_token")
        rows = cursor.fetchall()
    ApiToken.objects.bulk_create(
        ApiToken(
            user_id=user_id,
            name="migrated DRF token",
            key_hash=hashlib.sha256(key.encode("utf-8")).hexdigest(),
            prefix=key[:8],
            created=_aware(created),
        )
        for key, user_id, created in rows
    )
    schema_editor.execute("DROP TABLE authtoken_token")
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM django_migrations WHERE app = %s", ["authtoken"])


class Migration(migrations.Migration):
    dependencies = [("accounts", "0001_api_token")]

    operations = [migrations.RunPython(hash_drf_tokens, migrations.RunPython.noop, elidable=True)]
