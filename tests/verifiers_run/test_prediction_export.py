"""The predictions export (issue 35): every prediction once, in one order, every column as stored; CSV cells made
safe and rows ended in CRLF on both databases (PostgreSQL writes the text itself with COPY, SQLite through the
project's writers: compared value by value), JSON Lines that re-imports as it is, the background job, the
verifiers page and the command."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.urls import reverse

from annotation.errors import ImportFailed
from annotation.models import ExportJob, Item
from annotation.studies.services import create_study
from annotation.transfer.services.export_runner import run_export_job
from metaeval.models import Prediction, Verifier
from metaeval.verifiers import prediction_export
from metaeval.verifiers.prediction_export import EXPORT_COLUMNS, prediction_chunks, write_predictions
from metaeval.verifiers.services import import_predictions
from tests.conftest import jsonl
from tests.verifiers_run.conftest import add_items, claim_item

pytestmark = pytest.mark.django_db

AWKWARD = 'says "so", over\ntwo lines\r\nwith a back\\slash and ünïcode'


@pytest.fixture
def predicted(claims_study):
    """Two imported verifiers on the six claims, plus a failed call and an unparseable answer of a third."""
    add_items(claims_study, [claim_item("=c7", "A claim whose id a spreadsheet would run.")])
    import_predictions(
        study=claims_study,
        fmt="jsonl",
        stream=jsonl(
            *(
                {"item": f"c{n}", "verifier": "gpt-4o", "label": "supported", "score": n / 10, "rationale": f"r{n}"}
                for n in range(1, 7)
            ),
            {"item": "=c7", "verifier": "gpt-4o", "label": "contradicted", "score": 1.0, "rationale": "=SUM(A1:A9)"},
            {"item": "c2", "verifier": "llama", "label": "inconclusive", "rationale": AWKWARD},
            {"item": "c1", "verifier": "llama", "label": "contradicted", "rationale": "-2 points, @someone"},
        ),
    )
    judge = Verifier.objects.create(study=claims_study, name="judge", kind=Verifier.Kind.IMPORTED)
    items = {item.external_id: item for item in Item.objects.filter(study=claims_study)}
    Prediction.objects.create(
        verifier=judge, item=items["c3"], error="timeout after 30 s", cache_key="k1", latency_ms=30000, tokens_in=12
    )
    Prediction.objects.create(
        verifier=judge,
        item=items["c4"],
        parse_status=Prediction.ParseStatus.UNPARSEABLE,
        raw_label="maybe?",
        raw_output="\tI think maybe?",
        cache_key="k1",
        order_labels=["supported", None],
        tokens_in=40,
        tokens_out=3,
    )
    return claims_study


def expected_rows(study) -> list[dict]:
    """Every prediction of the study as stored, in the export's order, read through the ORM."""
    rows = []
    for p in Prediction.objects.filter(verifier__study=study).select_related("item", "verifier").order_by("pk"):
        rows.append(
            {
                "item": p.item.external_id,
                "verifier": p.verifier.name,
                "label": p.label,
                "score": p.score,
                "rationale": p.rationale,
                "raw_label": p.raw_label,
                "parse_status": p.parse_status,
                "error": p.error,
                "latency_ms": p.latency_ms,
                "tokens_in": p.tokens_in,
                "tokens_out": p.tokens_out,
                "order_labels": p.order_labels,
                "raw_output": p.raw_output,
            }
        )
    return rows


def as_csv_cells(row: dict) -> list[str]:
    """What a CSV reader gets back for a stored row: empty for None / "", JSON for the list, formula text quoted."""

    def cell(name: str, value) -> str:
        if value is None or value == "":
            return ""
        if name == "order_labels":
            return json.dumps(value, ensure_ascii=False)
        if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
            return "'" + value
        return str(value)

    return [cell(name, row[name]) for name in EXPORT_COLUMNS]


def csv_rows(data: bytes) -> list[list[str]]:
    text = data.decode("utf-8")
    return list(csv.reader(io.StringIO(text, newline="")))


def normalised(cells: list[list[str]]) -> list[list]:
    """Scores as numbers: PostgreSQL writes 1.0 as "1", Python as "1.0"; the value is the same."""
    at = EXPORT_COLUMNS.index("score")
    return [[float(value) if index == at and value else value for index, value in enumerate(row)] for row in cells]


def test_the_csv_has_every_prediction_once_in_order_with_every_cell_as_stored_and_safe(predicted, tmp_path):
    path = tmp_path / "p.csv"
    assert write_predictions(predicted, "csv", path) == 11
    data = path.read_bytes()
    cells = csv_rows(data)
    assert cells[0] == list(EXPORT_COLUMNS)
    assert normalised(cells[1:]) == normalised([as_csv_cells(row) for row in expected_rows(predicted)])
    # Rows end in CRLF (csvsafe); the LF and CRLF inside the quoted rationale are the rationale's own.
    assert data.count(b"\r\n") == 12 + 1 and data.endswith(b"\r\n")
    assert b'"says ""so"", over\ntwo lines\r\nwith a back\\slash and \xc3\xbcn\xc3\xafcode"' in data
    by_item = {(row[0], row[1]): row for row in cells[1:]}
    assert by_item[("'=c7", "gpt-4o")][4] == "'=SUM(A1:A9)"  # neither the id nor the rationale runs as a formula
    assert by_item[("c1", "llama")][4] == "'-2 points, @someone"
    failed, unparseable = by_item[("c3", "judge")], by_item[("c4", "judge")]
    assert (failed[2], failed[7], failed[8], failed[9]) == ("", "timeout after 30 s", "30000", "12")
    assert (unparseable[5], unparseable[6], unparseable[11], unparseable[12]) == (
        "maybe?",
        "unparseable",
        '["supported", null]',
        "'\tI think maybe?",
    )


def test_the_database_writer_and_the_python_writer_give_the_same_values(predicted):
    """On PostgreSQL the export is COPY's text; the project's writers, run on the same rows, give the same values
    (on SQLite both are the Python writers, and the test checks the chunks against themselves)."""
    for fmt in ("csv", "jsonl"):
        written = b"".join(prediction_chunks(predicted, fmt))
        python = "".join(prediction_export._python_chunks(predicted, fmt)).encode("utf-8")
        if fmt == "csv":
            ours, theirs = csv_rows(written), csv_rows(python)
            assert ours[0] == theirs[0] == list(EXPORT_COLUMNS)
            assert normalised(ours[1:]) == normalised(theirs[1:]) and len(ours) == 12
            assert written.count(b"\r\n") == python.count(b"\r\n")
        else:
            assert [json.loads(line) for line in written.splitlines()] == [
                json.loads(line) for line in python.splitlines()
            ]
    assert connection.vendor in {"postgresql", "sqlite"}


def test_the_json_lines_hold_the_stored_values_and_re_import_as_they_are(predicted, tmp_path):
    path = tmp_path / "p.jsonl"
    write_predictions(predicted, "jsonl", path)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert lines == expected_rows(predicted)
    assert next(line for line in lines if line["verifier"] == "llama" and line["item"] == "c2")["rationale"] == AWKWARD

    copy = create_study(slug="copy", name="Copy", kind="verification", annotators_per_item=1)
    add_items(copy, [claim_item(f"c{n}", f"Claim number {n} holds.") for n in range(1, 7)])
    add_items(copy, [claim_item("=c7", "A claim whose id a spreadsheet would run.")])
    answered = [line for line in lines if line["label"]]
    import_predictions(study=copy, fmt="jsonl", stream=jsonl(*answered))
    kept = ("item", "verifier", "label", "score", "rationale")
    assert [{name: row[name] for name in kept} for row in expected_rows(copy)] == [
        {name: row[name] for name in kept} for row in answered
    ]

    with pytest.raises(ImportFailed) as refused:  # a failed call is not a verdict: told to leave it out
        import_predictions(study=copy, fmt="jsonl", stream=jsonl(*lines), update=True)
    problems = {(error.line, error.field): error.message for error in refused.value.errors}
    failed_line = next(n for n, line in enumerate(lines, start=1) if line["error"])
    assert "failed call or an unparseable answer" in problems[(failed_line, "label")]


def test_a_study_without_predictions_exports_the_header_alone(claims_study, tmp_path):
    path = tmp_path / "none.csv"
    assert write_predictions(claims_study, "csv", path) == 0
    assert csv_rows(path.read_bytes()) == [list(EXPORT_COLUMNS)]
    assert write_predictions(claims_study, "jsonl", tmp_path / "none.jsonl") == 0
    assert (tmp_path / "none.jsonl").read_bytes() == b""


def test_a_failed_write_leaves_the_earlier_file_as_it_was(predicted, tmp_path, monkeypatch):
    path = tmp_path / "p.csv"
    path.write_text("the earlier export")

    def broken(*args, **kwargs):
        yield b"item,verifier\r\n"
        raise OSError("disk full")

    monkeypatch.setattr(prediction_export, "prediction_chunks", broken)
    with pytest.raises(OSError, match="disk full"):
        write_predictions(predicted, "csv", path)
    assert path.read_text() == "the earlier export"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.csv"]


def test_the_verifiers_page_starts_a_background_export_that_downloads_the_same_file(
    client, researcher, predicted, settings, tmp_path
):
    settings.VAR_DIR = tmp_path / "var"
    client.force_login(researcher)
    page = client.get(reverse("verifiers:list", args=[predicted.slug])).content.decode()
    assert 'id="predictions-export-csv"' in page and 'id="predictions-export-jsonl"' in page
    response = client.post(
        reverse("annotation:study_export_request", args=[predicted.slug]), {"format": "predictions-csv"}
    )
    job = ExportJob.objects.get()
    assert response.url == reverse("annotation:export_job", args=[predicted.slug, job.pk])
    run_export_job(job_id=job.pk)
    job.refresh_from_db()
    assert (job.status, job.rows, job.error) == ("succeeded", 11, "")
    shown = client.get(response.url).content.decode()
    assert "Export: Predictions (CSV)" in shown and "11 predictions written" in shown
    download = client.get(reverse("annotation:export_job_download", args=[predicted.slug, job.pk]))
    assert download["Content-Disposition"].endswith(f'filename="{predicted.slug}-predictions.csv"')
    body = b"".join(download.streaming_content)
    assert body == b"".join(prediction_chunks(predicted, "csv"))
    page = client.get(reverse("verifiers:list", args=[predicted.slug])).content.decode()
    assert 'id="predictions-export-predictions-csv-latest"' in page and "11 predictions" in page


def test_the_api_queues_a_predictions_export_and_refuses_an_option_it_does_not_take(client, researcher, predicted):
    client.force_login(researcher)
    url = reverse("api-export-create", args=[predicted.slug])
    refused = client.post(url, {"format": "predictions-jsonl", "license": "mit"}, content_type="application/json")
    assert refused.status_code == 400 and "no option license" in json.dumps(refused.json())
    response = client.post(url, {"format": "predictions-jsonl"}, content_type="application/json")
    assert response.status_code in (201, 202), response.content
    assert response.json()["format"] == "predictions-jsonl"
    assert ExportJob.objects.get().file_format == "predictions-jsonl"


def test_the_command_writes_the_file_and_names_a_format_it_cannot_tell(predicted, tmp_path):
    target = tmp_path / "out.jsonl"
    call_command("export_predictions", predicted.slug, str(target))
    assert [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()] == expected_rows(predicted)
    with pytest.raises(CommandError, match="give --format csv or --format jsonl"):
        call_command("export_predictions", predicted.slug, str(tmp_path / "out.txt"))
    with pytest.raises(CommandError, match="does not exist"):
        call_command("export_predictions", predicted.slug, str(tmp_path / "missing" / "out.csv"))
    call_command("export_predictions", predicted.slug, str(tmp_path / "out.txt"), "--format", "csv")
    assert Path(tmp_path / "out.txt").read_bytes() == b"".join(prediction_chunks(predicted, "csv"))


def test_the_hugging_face_dataset_has_a_predictions_config_with_the_stored_values(predicted, tmp_path):
    import pandas as pd
    import yaml

    from metaeval.dataset_export import write_hf_dataset
    from metaeval.dataset_export.predictions import PREDICTION_SCHEMA

    assert tuple(PREDICTION_SCHEMA.names) == EXPORT_COLUMNS
    result = write_hf_dataset(predicted, tmp_path / "hf")
    assert result.rows["predictions"] == 11
    frame = pd.read_parquet(tmp_path / "hf" / "data" / "predictions")
    read = frame.astype(object).where(frame.notna(), None).to_dict("records")
    expected = expected_rows(predicted)
    for row in expected:
        row["order_labels"] = json.dumps(row["order_labels"], ensure_ascii=False)
    assert [{**row, "latency_ms": row["latency_ms"] and int(row["latency_ms"])} for row in read] == expected
    card = (tmp_path / "hf" / "README.md").read_text(encoding="utf-8")
    header = yaml.safe_load(card.split("---\n")[1])
    info = {entry["config_name"]: entry for entry in header["dataset_info"]}
    assert info["predictions"]["splits"] == [{"name": "train", "num_examples": 11}]
    assert "`predictions`: the study's automatic verifiers' predictions, 11 rows" in card


def test_a_study_without_predictions_has_no_predictions_config(claims_study, tmp_path):
    from metaeval.dataset_export import write_hf_dataset

    result = write_hf_dataset(claims_study, tmp_path / "hf")
    assert "predictions" not in result.rows and not (tmp_path / "hf" / "data" / "predictions").exists()
    assert "predictions" not in (tmp_path / "hf" / "README.md").read_text(encoding="utf-8")


def test_rows_end_in_crlf_whether_or_not_a_quoted_cell_holds_a_line_end():
    """PostgreSQL sends each CSV row as one message ending in LF; only that last LF becomes CRLF."""
    plain = [b"a,1\n", b"b,2\n"]
    assert prediction_export._crlf_rows(plain) == b"a,1\r\nb,2\r\n"
    quoted = [b'a,"two\nlines"\n', b'b,"cr\r\nlf"\n', b"c,3\n"]
    assert prediction_export._crlf_rows(quoted) == b'a,"two\nlines"\r\nb,"cr\r\nlf"\r\nc,3\r\n'


def test_a_write_failing_midway_ends_the_copy_and_leaves_the_connection_usable(predicted, monkeypatch):
    monkeypatch.setattr(prediction_export, "MESSAGES", 1)  # a row per chunk: the COPY is mid-way at the failure
    monkeypatch.setattr(prediction_export, "BATCH", 1)
    monkeypatch.setattr(prediction_export, "WRITE_BYTES", 1)  # written at once: it fails at the first chunk

    class Full(io.BytesIO):
        def write(self, data):
            raise OSError("disk full")

    for fmt in ("csv", "jsonl"):
        with pytest.raises(OSError, match="disk full") as failure:
            prediction_export._write(predicted, fmt, Full())
        # `failure` keeps the traceback, and with it the export's generator, alive (as a job's error log does):
        # on PostgreSQL a COPY left open keeps the connection busy (the next query would wait for ever)
        if connection.vendor == "postgresql":
            from psycopg.pq import TransactionStatus

            assert connection.connection.info.transaction_status != TransactionStatus.ACTIVE
        assert Prediction.objects.filter(verifier__study=predicted).count() == 11
        assert failure.value is not None
