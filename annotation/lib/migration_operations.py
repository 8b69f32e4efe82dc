"""Migration operations that leave a serving database writable.

Why: `manage.py migrate` runs while the previous release still serves (docs/deploy.md,
"Upgrade"), and a plain CREATE INDEX on PostgreSQL blocks every write to its table until the
index is built: on a big study's assignment or item table that is every annotator's submit
for seconds to minutes. Django's `AddIndexConcurrently` builds it without that lock but exists
only on PostgreSQL; these operations use it there and a plain `AddIndex` elsewhere (SQLite, where
a migration's write lock is the database's anyway). A migration using them says `atomic = False`.
"""

from __future__ import annotations

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.operations import AddIndex, RemoveIndex
from django.db.migrations.state import ProjectState

__all__ = ["AddIndexWithoutLocking", "RemoveIndexWithoutLocking"]


class AddIndexWithoutLocking(AddIndexConcurrently):
    """`AddIndex` built with CREATE INDEX CONCURRENTLY on PostgreSQL (writes go on meanwhile).

    The migration state is AddIndex's, so swapping one for the other changes no model. If a
    concurrent build fails, PostgreSQL leaves the index INVALID: drop it and migrate again.
    """

    def describe(self) -> str:
        return f"Create index {self.index.name} on {self.model_name} (on PostgreSQL without blocking writes)"

    @staticmethod
    def _built_as(schema_editor: BaseDatabaseSchemaEditor) -> type[AddIndex]:
        return AddIndexConcurrently if schema_editor.connection.vendor == "postgresql" else AddIndex

    def database_forwards(
        self, app_label: str, schema_editor: BaseDatabaseSchemaEditor, from_state: ProjectState, to_state: ProjectState
    ) -> None:
        self._built_as(schema_editor).database_forwards(self, app_label, schema_editor, from_state, to_state)

    def database_backwards(
        self, app_label: str, schema_editor: BaseDatabaseSchemaEditor, from_state: ProjectState, to_state: ProjectState
    ) -> None:
        self._built_as(schema_editor).database_backwards(self, app_label, schema_editor, from_state, to_state)


class RemoveIndexWithoutLocking(RemoveIndexConcurrently):
    """`RemoveIndex` dropped with DROP INDEX CONCURRENTLY on PostgreSQL (writes go on meanwhile)."""

    def describe(self) -> str:
        return f"Remove index {self.name} from {self.model_name} (on PostgreSQL without blocking writes)"

    @staticmethod
    def _built_as(schema_editor: BaseDatabaseSchemaEditor) -> type[RemoveIndex]:
        return RemoveIndexConcurrently if schema_editor.connection.vendor == "postgresql" else RemoveIndex

    def database_forwards(
        self, app_label: str, schema_editor: BaseDatabaseSchemaEditor, from_state: ProjectState, to_state: ProjectState
    ) -> None:
        self._built_as(schema_editor).database_forwards(self, app_label, schema_editor, from_state, to_state)

    def database_backwards(
        self, app_label: str, schema_editor: BaseDatabaseSchemaEditor, from_state: ProjectState, to_state: ProjectState
    ) -> None:
        self._built_as(schema_editor).database_backwards(self, app_label, schema_editor, from_state, to_state)
