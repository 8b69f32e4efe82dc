"""import_predictions: README, File formats records, all or nothing, every problem named by line and field."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.errors import ImportFailed, ServiceError
from annotation.studies.services import create_study
from metaeval.models import Prediction, Verifier
from metaeval.verifiers.services import import_predictions
from tests.conftest import csv_bytes, jsonl
from tests.verifiers_run.conftest import llm_verifier

pytestmark = pytest.mark.django_db
GOOD = {
    "item": "c1",
    "verifier": "gpt-4o-veriscore",
    "label": "supported",
    "score": 0.93,
    "rationale": "Result 2 says so.",
}


@pytest.fixture
def aliased_study(claims_study):
    claims_study.label_aliases = {"true": "supported", "false": "contradicted"}
    claims_study.save()
    return claims_study


def test_predictions_create_imported_verifiers_and_map_labels_through_aliases(aliased_study):
    result = import_predictions(
        study=aliased_study,
        fmt="jsonl",
        stream=jsonl(
            GOOD,
            {"item": "c2", "verifier": "gpt-4o-veriscore", "label": "FALSE", "score": 0},
            {"item": "c1", "verifier": "minicheck", "label": " Inconclusive "},
        ),
    )
    assert (result.created, result.updated, result.records) == (3, 0, 3)
    verifiers = {v.name: v for v in Verifier.objects.filter(study=aliased_study)}
    assert {v.kind for v in verifiers.values()} == {"imported"}
    c2 = Prediction.objects.get(verifier=verifiers["gpt-4o-veriscore"], item__external_id="c2")
    assert (c2.label, c2.raw_label, c2.score, c2.parse_status, c2.cache_key) == (
        "contradicted",
        "FALSE",
        0.0,
        "ok",
        "imported",
    )
    c1 = Prediction.objects.get(verifier=verifiers["gpt-4o-veriscore"], item__external_id="c1")
    assert (c1.score, c1.rationale) == (0.93, "Result 2 says so.")
    assert Prediction.objects.get(verifier=verifiers["minicheck"]).score is None


def test_csv_with_text_scores_and_a_bom(claims_study):
    data = csv_bytes(
        [
            {"item": "c3", "verifier": "v", "label": "supported", "score": "0.5"},
            {"item": "c4", "verifier": "v", "label": "inconclusive", "score": ""},
        ]
    )
    result = import_predictions(study=claims_study, stream=io.BytesIO(b"\xef\xbb\xbf" + data.getvalue()), fmt="csv")
    assert result.created == 2
    assert sorted(Prediction.objects.values_list("score", flat=True), key=str) == [0.5, None]


BAD_LINES = [
    ('{"item": "c2", "verifier": "v", "label": "supported"', None, "invalid JSON"),
    ({"item": "c2", "verifier": "v", "label": "supported", "confidence": 0.9}, "confidence", "unknown field"),
    ({"verifier": "v", "label": "supported"}, "item", "is required"),
    ({"item": "nope", "verifier": "v", "label": "supported"}, "item", "no item 'nope' in study 'claims'"),
    ({"item": "c2", "label": "supported"}, "verifier", "is required"),
    ({"item": "c2", "verifier": "v"}, "label", "is required"),
    ({"item": "c2", "verifier": "v", "label": "mostly true"}, "label", "is not one of the study's labels"),
    ({"item": "c2", "verifier": "v", "label": "supported", "score": "high"}, "score", "must be a number"),
    ('{"item": "c2", "verifier": "v", "label": "supported", "score": NaN}', "score", "finite number"),
    ({"item": "c2", "verifier": "v", "label": "supported", "score": True}, "score", "got boolean"),
    ({"item": "c2", "verifier": "v", "label": "supported", "rationale": ["a"]}, "rationale", "must be a string"),
    ({"item": "c2", "verifier": "v" * 101, "label": "supported"}, "verifier", "the limit is 100"),
    (
        {"item": "c1", "verifier": "v", "label": "contradicted"},
        "item",
        "already has a prediction for item 'c1' on line 1",
    ),
    ({"item": "c2", "verifier": "gpt", "label": "supported"}, "verifier", "'gpt' is a llm verifier of this study"),
    ('["c2", "v", "supported"]', None, "expected a JSON object"),
]


@pytest.mark.parametrize(("bad", "field", "says"), BAD_LINES)
def test_a_bad_line_names_line_and_field_and_nothing_is_stored(claims_study, bad, field, says):
    llm_verifier(claims_study, "http://127.0.0.1:9/v1")  # named "gpt"
    before = set(Verifier.objects.values_list("pk", flat=True))
    with pytest.raises(ImportFailed) as failed:
        import_predictions(
            study=claims_study, stream=jsonl({"item": "c1", "verifier": "v", "label": "supported"}, bad), fmt="jsonl"
        )
    errors = failed.value.errors
    assert [(error.line, error.field) for error in errors] == [(2, field)], errors
    assert says in errors[0].message
    assert f"line 2{', field ' + repr(field) if field else ''}: " in str(failed.value)
    assert not Prediction.objects.exists()
    assert set(Verifier.objects.values_list("pk", flat=True)) == before  # not even the verifier of line 1


def test_every_problem_is_reported_at_once(claims_study):
    with pytest.raises(ImportFailed) as failed:
        import_predictions(
            study=claims_study,
            fmt="jsonl",
            stream=jsonl(
                {"item": "x", "verifier": "v", "label": "supported"},
                {"item": "c1", "verifier": "v", "label": "maybe", "score": "?"},
            ),
        )
    assert [(e.line, e.field) for e in failed.value.errors] == [(1, "item"), (2, "label"), (2, "score")]


def test_an_empty_file_is_an_error(claims_study):
    with pytest.raises(ImportFailed, match="the file holds no records"):
        import_predictions(study=claims_study, stream=io.BytesIO(b"\n\n"), fmt="jsonl")


def test_existing_predictions_are_replaced_only_with_update(claims_study):
    import_predictions(study=claims_study, stream=jsonl(GOOD), fmt="jsonl")
    changed = {**GOOD, "label": "contradicted", "score": 0.1}
    with pytest.raises(ImportFailed, match="use --update to replace it"):
        import_predictions(study=claims_study, stream=jsonl(changed), fmt="jsonl")
    assert Prediction.objects.get().label == "supported"
    result = import_predictions(study=claims_study, stream=jsonl(changed), fmt="jsonl", update=True)
    assert (result.created, result.updated) == (0, 1)
    assert (Prediction.objects.get().label, Prediction.objects.get().score) == ("contradicted", 0.1)


def test_only_verification_studies_take_predictions(db):
    study = create_study(slug="pref", name="P", kind="preference")
    with pytest.raises(ServiceError, match="only verification studies"):
        import_predictions(study=study, stream=jsonl(GOOD), fmt="jsonl")


def test_the_command(claims_study, tmp_path):
    good = tmp_path / "predictions.jsonl"
    good.write_text('{"item": "c1", "verifier": "v", "label": "supported"}\n')
    out = io.StringIO()
    call_command("import_predictions", "claims", str(good), stdout=out)
    assert "Imported 1 new and 0 updated prediction(s) into 'claims'" in out.getvalue()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"item": "c2", "verifier": "v", "label": "sorta"}\n')
    with pytest.raises(CommandError, match="line 1, field 'label': 'sorta' is not one of the study's labels"):
        call_command("import_predictions", "claims", str(bad))
    with pytest.raises(CommandError, match="no study 'nope'"):
        call_command("import_predictions", "nope", str(good))
