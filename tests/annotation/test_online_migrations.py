"""Indexes added after the first release are built without blocking writes on PostgreSQL.

`manage.py migrate` runs while the previous release serves (docs/deploy.md, "Upgrade"); a plain
CREATE INDEX would hold every submit on the table until the index is built
(annotation/lib/migration_operations.py).
"""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.db import connection

LATER_INDEXES = {
    "0018_recent_indexes_replace_study_indexes": ["assignment_study_recent", "item_study_recent"],
    "0019_active_assignments_index": ["assignment_active"],
    "0020_flagged_assignments_index": ["assignment_flagged"],
    "0021_item_answers": ["item_study_answers"],
    "0022_claim_rank_checks": ["item_study_claim_order"],
    "0036_annotation_made_here": ["annotation_made_here"],
}


def _sql_of(migration: str) -> str:
    out = io.StringIO()
    call_command("sqlmigrate", "annotation", migration, stdout=out)
    return out.getvalue()


@pytest.mark.django_db(transaction=True)  # sqlmigrate of a non-atomic migration, outside a transaction
@pytest.mark.parametrize("migration", sorted(LATER_INDEXES))
def test_each_later_index_is_built_concurrently_on_postgresql_outside_a_transaction(migration):
    sql = _sql_of(migration)
    creates = [line for line in sql.splitlines() if line.startswith("CREATE INDEX")]
    # (SQLite remakes a table for 0018's changed foreign keys, creating its indexes again)
    assert {name for line in creates for name in LATER_INDEXES[migration] if f'"{name}"' in line} == set(
        LATER_INDEXES[migration]
    )
    concurrently = connection.vendor == "postgresql"
    assert all(("CONCURRENTLY" in line) == concurrently for line in creates), creates
    assert "BEGIN;" not in sql  # CONCURRENTLY cannot run in a transaction: the migration is not atomic


@pytest.mark.django_db
def test_the_later_indexes_exist_and_postgresql_can_use_them():
    """A concurrent build that failed leaves an INVALID index behind, which PostgreSQL never uses."""
    names = sorted(name for names in LATER_INDEXES.values() for name in names)
    with connection.cursor() as cursor:
        present = {
            name
            for table in ("annotation_assignment", "annotation_item", "annotation_annotation")
            for name, details in connection.introspection.get_constraints(cursor, table).items()
            if details["index"]
        }
        assert set(names) <= present
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE c.relname = ANY(%s)",
                [names],
            )
            assert dict(cursor.fetchall()) == dict.fromkeys(names, True)
