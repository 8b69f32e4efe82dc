"""Input that used to crash: deep JSON nesting and long CSV cells are line-numbered errors, never a 500."""

from __future__ import annotations

import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.errors import ImportFailed
from annotation.lib import formats
from annotation.models import Item
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from metaeval.verifiers.services.prediction_import import import_predictions
from tests.conftest import csv_bytes, jsonl, verification_item

pytestmark = pytest.mark.django_db

DEEP = "[" * 10_000 + "]" * 10_000
DEPTH_MESSAGE = f"nested deeper than the limit of {formats.MAX_JSON_DEPTH} levels"


def deep_line(**fields: str) -> str:
    """A JSONL line whose first value is nested 10,000 levels deep."""
    rest = json.dumps(fields)[1:]
    return '{"deep": ' + DEEP + (", " + rest if fields else "}")


def failure_of(call) -> ImportFailed:
    with pytest.raises(ImportFailed) as caught:
        call()
    return caught.value


def test_a_deeply_nested_item_line_is_a_line_numbered_error(verification_study):
    stream = jsonl(verification_item("c-1"), deep_line(id="c-2", claim="x"))
    failure = failure_of(lambda: import_items(study=verification_study, stream=stream, fmt="jsonl"))
    [error] = failure.errors
    assert error.line == 2 and DEPTH_MESSAGE in error.message
    assert not Item.objects.filter(study=verification_study).exists()


def test_deep_json_text_inside_a_field_is_that_fields_error(verification_study, preference_study):
    stream = jsonl(verification_item("c-1", evidence=DEEP))
    failure = failure_of(lambda: import_items(study=verification_study, stream=stream, fmt="jsonl"))
    assert [(e.line, e.field) for e in failure.errors] == [(1, "evidence")]
    assert DEPTH_MESSAGE in failure.errors[0].message
    stream = csv_bytes([{"id": "p-1", "source": "s", "lists": DEEP}])
    failure = failure_of(lambda: import_items(study=preference_study, stream=stream, fmt="csv"))
    assert [(e.line, e.field) for e in failure.errors] == [(2, "lists")]


def test_deeply_nested_annotation_and_prediction_lines_are_errors(loaded_verification_study):
    study = loaded_verification_study
    stream = jsonl({"item": "c-1", "annotator": "w9", "label": "supported"}, deep_line())
    failure = failure_of(lambda: import_annotations(study=study, stream=stream, fmt="jsonl"))
    assert [e.line for e in failure.errors] == [2] and DEPTH_MESSAGE in failure.errors[0].message
    stream = jsonl({"item": "c-1", "annotator": "w9", "label": "supported", "evidence": DEEP})
    failure = failure_of(lambda: import_annotations(study=study, stream=stream, fmt="jsonl"))
    assert [(e.line, e.field) for e in failure.errors] == [(1, "evidence")]
    stream = jsonl(deep_line(item="c-1", verifier="v", label="supported"))
    failure = failure_of(lambda: import_predictions(study=study, stream=stream, fmt="jsonl"))
    assert [e.line for e in failure.errors] == [1] and DEPTH_MESSAGE in failure.errors[0].message


def test_nesting_up_to_the_limit_parses_and_brackets_in_strings_do_not_count():
    limit = formats.MAX_JSON_DEPTH
    assert formats.loads("[" * limit + "]" * limit) is not None
    with pytest.raises(formats.JSONTooDeep):
        formats.loads("[" * (limit + 1) + "]" * (limit + 1))
    assert formats.json_depth(json.dumps({"a": "[[[[{{{{" * 100, "b": [1, {"c": 'ends in ]\\" and "'}]})) == 3


def test_an_api_upload_of_a_deep_line_answers_400_not_500(client, researcher, verification_study):
    client.force_login(researcher)
    upload = SimpleUploadedFile("items.jsonl", (deep_line(id="c-1", claim="x") + "\n").encode())
    response = client.post(reverse("api-item-import", args=["verif"]), {"file": upload})
    assert response.status_code == 400, response.content
    assert response.json()["errors"][0]["line"] == 1


def test_csv_cells_take_as_much_as_a_jsonl_line(verification_study):
    long_claim = "x" * 200_000  # over the csv module's default 131,072
    stream = csv_bytes([{"id": "c-1", "claim": long_claim}])
    assert import_items(study=verification_study, stream=stream, fmt="csv").created == 1
    assert Item.objects.get(study=verification_study).payload["claim"] == long_claim


def test_a_csv_cell_over_the_limit_is_a_clear_error(verification_study):
    # A quoted cell spanning many lines, each under the line limit, but over it in total.
    cell = "\n".join(["y" * 100_000] * 25)
    data = b'id,claim\nc-1,ok\nc-2,"' + cell.encode() + b'"\n'
    failure = failure_of(lambda: import_items(study=verification_study, stream=io.BytesIO(data), fmt="csv"))
    [error] = failure.errors
    assert error.line == 3
    assert f"a cell is longer than the limit of {formats.MAX_LINE_BYTES:,} characters" in error.message
