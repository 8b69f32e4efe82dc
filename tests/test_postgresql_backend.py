"""The PostgreSQL backend's batches fit the 65,535 parameters a statement bound on the server can carry.

Claimlab binds parameters on the server by default (config/settings.py), and Django 5.2 sizes
PostgreSQL batches as if there were no limit: deleting a study of 100,000 items or a
`bulk_create` without a batch size then failed (benchmarks/page_scale.py found it).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from annotation.models import Item
from annotation.studies.services import create_study
from config.postgresql.base import MAX_BOUND_PARAMETERS, DatabaseOperations


def _operations(server_side_binding: bool) -> DatabaseOperations:
    connection = SimpleNamespace(features=SimpleNamespace(uses_server_side_binding=server_side_binding))
    return DatabaseOperations(connection)  # type: ignore[arg-type]  # only its features are read


@pytest.mark.parametrize(("fields", "rows", "expected"), [(6, 100_000, 10_922), (1, 100_000, 65_535), (6, 50, 50)])
def test_batches_fit_the_bound_parameters(fields, rows, expected):
    ops = _operations(server_side_binding=True)
    size = ops.bulk_batch_size(["f"] * fields, range(rows))
    assert size == expected and size * fields <= MAX_BOUND_PARAMETERS


def test_without_server_side_binding_batches_are_djangos():
    assert _operations(server_side_binding=False).bulk_batch_size(["f"] * 6, range(100_000)) == 100_000


@pytest.mark.slow
@pytest.mark.django_db
def test_a_study_with_more_items_than_one_statement_can_bind_is_deleted_whole():
    """Deleting a study collects its 70,000 items and asks for their assignments, annotations... by
    item: with server-side binding one `IN` list of 70,000 ids was more than a statement can carry."""
    study = create_study(slug="many-items", name="Many items", kind="verification")
    Item.objects.bulk_create(Item(study=study, external_id=f"i{n}", position=n) for n in range(70_000))
    study.delete()
    assert not Item.objects.filter(study_id=study.pk).exists()
