"""One rule for control characters in every input (issue 31): NUL is refused, with its line and field; the rest kept.

The rule and why: annotation/lib/formats.py. Every import (items, annotations, adjudications,
predictions; JSON Lines and CSV; every pipeline's own file, JSON Lines or whole JSON) and every
API body (annotation/lib/parsers.py) refuses U+0000 wherever it is, so that what SQLite takes
PostgreSQL takes too; tab, newlines and the other C0 controls are stored as they came.
"""

from __future__ import annotations

import ast
import io
import json
import re
from collections.abc import Callable

import pytest
from django.urls import reverse

from annotation.adjudication.services import import_adjudications
from annotation.errors import ImportFailed
from annotation.lib.formats import NUL_IN_NAME, NUL_REFUSED, RecordError, iter_csv
from annotation.models import Adjudication, Annotation, Item, Study
from annotation.studies.services import create_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from metaeval.models import Prediction, Verifier
from metaeval.verifiers.forms import VerifierForm
from metaeval.verifiers.services import import_predictions
from tests.annotation.transfer.adapters.conftest import refused, sample, stored
from tests.conftest import csv_bytes, verification_item
from tests.support.assignment_study import make_study

pytestmark = pytest.mark.django_db

# --- Claimlab's own formats: every import, JSON Lines (NUL escaped or raw) and CSV --------------------------

Importer = Callable[..., object]
ROUTES: dict[str, tuple[Importer, dict, dict, str]] = {
    # route: (import service, a good record, the bad record, the field holding the NUL)
    "items: claim": (
        import_items,
        verification_item("c-4"),
        verification_item("c-5", claim="A claim\x00."),
        "claim",
    ),
    "items: id": (import_items, verification_item("c-4"), verification_item("c-\x005"), "id"),
    "items: evidence passage": (
        import_items,
        verification_item("c-4"),
        verification_item("c-5", evidence=[{"text": "Sodium.", "title": "T"}, {"text": "sodium. s\x00 end"}]),
        "evidence[1].text",
    ),
    "annotations: justification": (
        import_annotations,
        {"item": "c-1", "annotator": "w3", "label": "supported"},
        {"item": "c-2", "annotator": "w3", "label": "supported", "justification": "Why\x00 not"},
        "justification",
    ),
    "annotations: evidence judgement": (
        import_annotations,
        {"item": "c-1", "annotator": "w3", "label": "supported"},
        {
            "item": "c-2",
            "annotator": "w3",
            "label": "supported",
            "evidence": [{"index": 0, "judgement": "supp\x00ort"}],
        },
        "evidence[0].judgement",
    ),
    "annotations: annotator": (
        import_annotations,
        {"item": "c-1", "annotator": "w3", "label": "supported"},
        {"item": "c-2", "annotator": "w\x003", "label": "supported"},
        "annotator",
    ),
    "adjudications: note": (
        import_adjudications,
        {"item": "c-1", "adjudicator": "rita", "label": "supported"},
        {"item": "c-2", "adjudicator": "rita", "label": "contradicted", "note": "n\x00"},
        "note",
    ),
    "predictions: rationale": (
        import_predictions,
        {"item": "c-1", "verifier": "minicheck", "label": "supported"},
        {"item": "c-2", "verifier": "minicheck", "label": "supported", "rationale": "Because\x00."},
        "rationale",
    ),
    "predictions: label": (
        import_predictions,
        {"item": "c-1", "verifier": "minicheck", "label": "supported"},
        {"item": "c-2", "verifier": "minicheck", "label": "supported\x00"},
        "label",
    ),
}
#: JSON Lines with the NUL as JSON's escape or as a raw byte (invalid JSON, refused all the same); CSV has no escapes.
ENCODINGS = ["jsonl", "jsonl-raw", "csv"]


def file_of(encoding: str, records: list[dict]) -> io.BytesIO:
    if encoding == "csv":
        return csv_bytes(records)
    lines = [json.dumps(record) for record in records]
    if encoding == "jsonl-raw":
        lines = [line.replace("\\u0000", "\x00") for line in lines]
    return io.BytesIO(("\n".join(lines) + "\n").encode())


def everything(study: Study) -> tuple[int, ...]:
    """What an import may write, counted."""
    return (
        Item.objects.filter(study=study).count(),
        Annotation.objects.filter(study=study).count(),
        Adjudication.objects.filter(study=study).count(),
        Prediction.objects.filter(verifier__study=study).count(),
        Verifier.objects.filter(study=study).count(),
    )


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("route", ROUTES)
def test_a_nul_is_refused_by_every_import_naming_line_and_field(loaded_verification_study, route, encoding):
    study = loaded_verification_study
    service, good, bad, field = ROUTES[route]
    before = everything(study)
    with pytest.raises(ImportFailed) as failed:
        service(study=study, stream=file_of(encoding, [good, bad]), fmt=encoding.split("-")[0])
    line = 3 if encoding == "csv" else 2  # a CSV's first line is its header
    assert failed.value.errors == [RecordError(line, NUL_REFUSED, field)]
    assert f"line {line}, field '{field}': contains a NUL character (U+0000), which cannot be stored" in str(
        failed.value
    )
    assert everything(study) == before


@pytest.mark.parametrize("route", ROUTES)
def test_without_the_nul_the_same_records_import(loaded_verification_study, route):
    """The refusals above are the NUL's alone."""
    service, good, bad, _field = ROUTES[route]
    clean = json.loads(json.dumps(bad).replace("\\u0000", ""))
    service(study=loaded_verification_study, stream=file_of("jsonl", [good, clean]), fmt="jsonl")


def test_a_nul_in_json_inside_a_csv_cell_names_the_place_inside_it(verification_study):
    data = b'id,claim,evidence\nc-1,A claim.,"[{""text"": ""ok""}, {""text"": ""s\\u0000""}]"\n'
    with pytest.raises(ImportFailed) as failed:
        import_items(study=verification_study, stream=io.BytesIO(data), fmt="csv")
    assert failed.value.errors == [RecordError(2, NUL_REFUSED, "evidence[1].text")]


@pytest.mark.parametrize(
    ("data", "fmt", "error"),
    [
        (b'{"id": "c-1", "cl\\u0000aim": "A."}\n', "jsonl", RecordError(1, NUL_IN_NAME, "cl\\u0000aim")),
        (b'{"id": "c-1", "claim": "A."}\n{"id": "c-2", "claim": "B."}\x00\n', "jsonl", RecordError(2, NUL_REFUSED)),
        (b"id,cl\x00aim\nc-1,A.\n", "csv", RecordError(1, f"in the CSV header: {NUL_IN_NAME}")),
        (b'id,claim\nc-1,"A claim\nover two lines\x00"\nc-2,B.\n', "csv", RecordError(2, NUL_REFUSED, "claim")),
    ],
    ids=["jsonl field name", "jsonl outside a string", "csv header", "csv multi-line cell"],
)
def test_a_nul_anywhere_else_in_a_file_is_refused_by_line(verification_study, data, fmt, error):
    with pytest.raises(ImportFailed) as failed:
        import_items(study=verification_study, stream=io.BytesIO(data), fmt=fmt)
    assert failed.value.errors == [error]
    assert not Item.objects.exists()


def test_every_bad_line_is_named_not_only_the_first():
    lines = list(iter_csv(io.BytesIO(b"id,claim\nc-1,\x00\nc-2,fine\nc-3,\x00\x00\n")))
    assert [(line, getattr(record, "field", None)) for line, record in lines] == [(2, "claim"), (3, None), (4, "claim")]


# --- the other control characters are kept, on both databases ----------------------------------------------

KEPT = "Page 1.\x0cPage 2: \x1b[1mbold\x1b[0m, a bell \x07, \x01 and \x1f, DEL \x7f,\ta tab and\na new line."


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_tab_newlines_and_the_other_control_characters_are_stored_as_they_came(loaded_verification_study, fmt):
    study = loaded_verification_study
    record = verification_item("c-9", claim=KEPT, evidence=[{"text": KEPT.replace("\n", "\r\n"), "title": "T\x0b"}])
    import_items(study=study, stream=file_of(fmt, [record]), fmt=fmt)
    item = Item.objects.get(study=study, external_id="c-9")
    assert item.payload["claim"] == KEPT
    assert item.payload["evidence"][0]["title"] == "T\x0b"
    if fmt == "jsonl":  # a CSV reader makes a CRLF inside a quoted cell a LF, as spreadsheets write it
        assert item.payload["evidence"][0]["text"] == KEPT.replace("\n", "\r\n")
    import_predictions(
        study=study,
        stream=file_of(fmt, [{"item": "c-9", "verifier": "v", "label": "supported", "rationale": KEPT}]),
        fmt=fmt,
    )
    assert Prediction.objects.get(item__external_id="c-9").rationale == KEPT
    import_annotations(
        study=study,
        stream=file_of(fmt, [{"item": "c-9", "annotator": "w1", "label": "supported", "justification": KEPT}]),
        fmt=fmt,
    )
    assert Annotation.objects.get(assignment__item__external_id="c-9").justification == KEPT


# --- the pipelines' own files: JSON Lines and whole-JSON, each adapter --------------------------------------


def ragas_samples() -> list[dict]:
    text = sample("ragas", "ragas_evaluation_dataset_example_docs_howtos_observability_md_L393-434.txt").read_text()
    return ast.literal_eval(text.split("=", 1)[1].strip())


def ragas_jsonl() -> str:
    return "".join(json.dumps(record) + "\n" for record in ragas_samples())


def ragas_whole_json() -> str:
    """The older RAGAS shape (question, answer, contexts) as one indented JSON array."""
    legacy = [
        {"question": s["user_input"], "answer": s["response"], "contexts": s["retrieved_contexts"]}
        for s in ragas_samples()
    ]
    return json.dumps(legacy, indent=1)


THREE_LABELS = {"labels": ["supported", "not_supported", "irrelevant"]}
ADAPTERS = {
    # name: (command, --from, the file's text, the study's options, more arguments, the key whose value gets the NUL)
    "veriscore claims (JSON Lines)": (
        "import_items",
        "veriscore",
        lambda: sample("veriscore", "veriscore_claims_early_7067724.jsonl").read_text(),
        {},
        [],
        "response",
    ),
    "factscore labelled data (JSON Lines)": (
        "import_items",
        "factscore",
        lambda: sample("factscore", "factscore_labeled_ChatGPT_lines1-3_107.jsonl").read_text(),
        {"labels": ["S", "NS", "IR"], "annotators_per_item": 1},
        ["--systems", "ChatGPT"],
        "text",
    ),
    "safe result (whole JSON), items": (
        "import_items",
        "safe",
        lambda: sample("safe", "safe_result_SKELETON_constructed_from_code.json").read_text(),
        THREE_LABELS,
        [],
        "self_contained_atomic_fact",
    ),
    "safe result (whole JSON), predictions": (
        "import_predictions",
        "safe",
        lambda: sample("safe", "safe_result_SKELETON_constructed_from_code.json").read_text(),
        THREE_LABELS,
        [],
        "annotation",
    ),
    "ragas dataset (JSON Lines)": ("import_items", "ragas", ragas_jsonl, {}, [], "response"),
    "ragas dataset (whole JSON)": ("import_items", "ragas", ragas_whole_json, {}, [], "answer"),
    "factcheck-gpt benchmark (JSON Lines)": (
        "import_items",
        "factcheckgpt",
        lambda: sample("factcheckgpt", "factcheckgpt_benchmark_lines1_94.jsonl").read_text(),
        {"annotators_per_item": 1},
        [],
        "claims",
    ),
    "label studio export (whole JSON)": (
        "import_items",
        "labelstudio",
        lambda: sample("labelstudio", "labelstudio_export_choices_csv_test_history.json").read_text(),
        {"labels": ["Positive", "Negative", "Neutral"]},
        ["--source-labels", "annotator"],
        "text",
    ),
}


def poisoned(text: str, key: str, nul: str) -> tuple[str, int]:
    """The text with `nul` put at the start of the last string value of `key`, and the line it is on."""
    found = list(re.finditer(rf'"{re.escape(key)}"\s*:\s*(\[\s*)?"', text))[-1]
    return text[: found.end()] + nul + text[found.end() :], text.count("\n", 0, found.end()) + 1


@pytest.mark.parametrize("nul", ["\\u0000", "\x00"], ids=["escaped", "raw"])
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_every_adapter_refuses_a_nul_naming_the_line_of_the_source_file(db, tmp_path, adapter, nul):
    command, source, text, options, extra, key = ADAPTERS[adapter]
    study = create_study(slug="nul", name="NUL", kind="verification", **options)
    clean = text()
    text_with_nul, line = poisoned(clean, key, nul)
    path = tmp_path / ("source.jsonl" if "JSON Lines" in adapter else "source.json")
    path.write_text(text_with_nul)
    message = refused(command, "nul", str(path), "--from", source, *extra)
    assert re.search(rf"line {line}(, field '[^']*{re.escape(key)}[^']*')?: {re.escape(NUL_REFUSED)}", message), message
    assert stored(study) == (0, 0, 0)


# --- API bodies: JSON, form and multipart ----------------------------------------------------------------------


def create_study_through_the_api(client, **body):
    data = {"slug": "api-study", "name": "API study", "kind": "verification", **body}
    return client.post(reverse("api-study-list"), data, content_type="application/json")


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"name": "A\x00study"}, "name", NUL_REFUSED),
        ({"instructions": "Read\x00 this."}, "instructions", NUL_REFUSED),
        ({"labels": ["yes", "n\x00o"]}, "labels[1]", NUL_REFUSED),
        ({"label_aliases": {"tr\x00ue": "supported"}}, "label_aliases.tr\\u0000ue", NUL_IN_NAME),
    ],
)
def test_a_json_body_with_a_nul_is_refused_naming_the_field(
    client, researcher, verification_study, body, field, message
):
    client.force_login(researcher)
    response = create_study_through_the_api(client, **body)
    assert response.status_code == 400
    assert response.json() == {
        "detail": f"invalid input: {field}: {message}",
        "code": "invalid",
        "fields": {field: [message]},
    }
    assert not Study.objects.filter(slug="api-study").exists()


def test_a_raw_nul_in_a_json_body_is_refused_the_same_way(client, researcher, verification_study):
    client.force_login(researcher)
    body = b'{"slug": "api-study", "name": "A\x00study", "kind": "verification"}'
    response = client.post(reverse("api-study-list"), body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["fields"] == {"name": [NUL_REFUSED]}


def test_form_and_multipart_bodies_refuse_a_nul_too(client, researcher, verification_study):
    """The token route takes a form too (accounts/api.py): a NUL there is refused naming its field;
    the JSON routes take no form at all (415), so nothing a form says is half-read."""
    token_url = reverse("api-token")
    for body, content_type in (
        ("username=re%00searcher&password=x", "application/x-www-form-urlencoded"),
        (None, None),
    ):
        if body is None:
            response = client.post(token_url, {"username": "re\x00searcher", "password": "x"})
        else:
            response = client.post(token_url, body, content_type=content_type)
        assert response.status_code == 400
        assert response.json()["fields"] == {"username": [NUL_REFUSED]}
    client.force_login(researcher)
    fields = {"slug": "api-study", "name": "A\x00study", "kind": "verification"}
    assert client.post(reverse("api-study-list"), fields).status_code == 415
    assert not Study.objects.filter(slug="api-study").exists()


def test_an_answer_with_a_nul_in_its_justification_is_refused(client):
    study, users = make_study(items=2)
    client.force_login(users[0])
    assignment = client.post(reverse("api-assignment-next", args=[study.slug])).json()["assignment"]["id"]
    response = client.post(
        reverse("api-assignment-submit", args=[assignment]),
        {"label": "supported", "justification": "Because\x00."},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json()["fields"] == {"justification": [NUL_REFUSED]}
    assert not Annotation.objects.exists()


def test_an_import_upload_with_a_nul_in_a_form_field_is_refused(client, loaded_verification_study, researcher):
    client.force_login(researcher)
    upload = io.BytesIO(b'{"item": "c-2", "adjudicator": "rita", "label": "contradicted"}\n')
    upload.name = "adjudications.jsonl"
    url = reverse("api-adjudication-import", args=[loaded_verification_study.slug])
    response = client.post(url, {"file": upload, "format": "json\x00l"})
    assert response.status_code == 400
    assert response.json()["fields"] == {"format": [NUL_REFUSED]}
    assert not Adjudication.objects.exists()


def test_the_import_api_reports_a_nul_in_the_file_by_line(client, loaded_verification_study, researcher):
    client.force_login(researcher)
    upload = io.BytesIO(b'{"item": "c-2", "adjudicator": "rita", "label": "contradicted", "note": "\\u0000"}\n')
    upload.name = "adjudications.jsonl"
    response = client.post(reverse("api-adjudication-import", args=[loaded_verification_study.slug]), {"file": upload})
    assert response.status_code == 400
    assert response.json()["errors"] == [{"line": 1, "field": "note", "message": NUL_REFUSED}]


def test_the_verifier_forms_label_map_refuses_a_nul(db):
    """A page's form: Django's fields refuse NUL in their text; JSON typed into one is checked by the rule."""
    form = VerifierForm(data={"label_map": '{"true\\u0000": "supported"}'})
    assert not form.is_valid()
    assert NUL_IN_NAME in str(form.errors["label_map"])
