"""Issue 35: each verifier's predictions version moves with every write of its predictions, so the report
fingerprint and the verifiers page read one row per verifier instead of every prediction, and still change
exactly when the predictions do (an import, an import that replaces, a run's stored batch)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.models import Count
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.errors import ImportFailed
from annotation.transfer.services.item_import import import_items
from metaeval import selectors
from metaeval.models import Prediction, Verifier
from metaeval.verifiers.runner.orchestration import run_to_completion
from metaeval.verifiers.services import create_verifier, import_predictions
from metaeval.verifiers.services.runs import start_run
from tests.conftest import jsonl, verification_item

pytestmark = pytest.mark.django_db


def predictions(verifier: str, items: range, label: str = "supported") -> list[dict]:
    return [{"item": f"c-{n}", "verifier": verifier, "label": label} for n in items]


def shown_counts(client, slug: str) -> dict[str, int]:
    """n_predictions per verifier name, as the API answers and as the verifiers page shows."""
    api = client.get(reverse("api-verifier-list", args=[slug])).json()
    page = client.get(reverse("verifiers:list", args=[slug])).content.decode()
    counts = {row["name"]: row["n_predictions"] for row in api}
    for name, n in counts.items():
        assert f'<td class="num">{n}</td>' in page, name
    return counts


def counted(study) -> dict[str, int]:
    """n_predictions per verifier name, counted from the rows."""
    rows = Verifier.objects.filter(study=study).annotate(n=Count("predictions")).values_list("name", "n")
    return dict(rows)


def test_every_write_of_predictions_moves_the_fingerprint_and_the_shown_counts(client, researcher, verification_study):
    study = verification_study
    import_items(study=study, stream=jsonl(*(verification_item(f"c-{n}") for n in range(12))), fmt="jsonl")
    client.force_login(researcher)
    seen = [selectors.report_fingerprint(study)]

    def changed() -> None:
        study.refresh_from_db()
        seen.append(selectors.report_fingerprint(study))
        assert seen[-1] != seen[-2], "a write of predictions left the fingerprint as it was"
        assert shown_counts(client, study.slug) == counted(study)

    assert shown_counts(client, study.slug) == counted(study) == {}
    import_predictions(study=study, stream=jsonl(*predictions("gpt", range(5))), fmt="jsonl")
    changed()
    import_predictions(study=study, stream=jsonl(*predictions("gpt", range(5, 9))), fmt="jsonl")  # more, same verifier
    changed()
    version = Verifier.objects.get(study=study, name="gpt").predictions_version
    # the same rows replaced: no count moves, the labels (and so the report) do
    replaced = predictions("gpt", range(3), "contradicted")
    import_predictions(study=study, stream=jsonl(*replaced), fmt="jsonl", update=True)
    changed()
    assert Verifier.objects.get(study=study, name="gpt").predictions_version == version + 1
    baseline = create_verifier(study=study, name="overlap", kind="baseline_overlap")
    changed()  # a new verifier (no predictions yet)
    run_to_completion(start_run(verifier=baseline, enqueue=False))  # a run's stored batches
    changed()
    assert counted(study) == {"gpt": 9, "overlap": 12}
    # nothing written: the same fingerprint, and the counts come from the cache (no pass over predictions)
    with CaptureQueriesContext(connection) as queries:
        assert selectors.report_fingerprint(study) == seen[-1]
        shown_counts(client, study.slug)
    assert not [q["sql"] for q in queries if '"metaeval_prediction"' in q["sql"]]


def test_a_refused_import_moves_no_version(verification_study):
    study = verification_study
    import_items(study=study, stream=jsonl(*(verification_item(f"c-{n}") for n in range(3))), fmt="jsonl")
    import_predictions(study=study, stream=jsonl(*predictions("gpt", range(3))), fmt="jsonl")
    before = (Verifier.objects.get(name="gpt").predictions_version, selectors.report_fingerprint(study))
    with pytest.raises(ImportFailed):
        import_predictions(study=study, stream=jsonl(*predictions("gpt", range(3))), fmt="jsonl")  # no update
    study.refresh_from_db()
    after = (Verifier.objects.get(name="gpt").predictions_version, selectors.report_fingerprint(study))
    assert after == before and Prediction.objects.filter(verifier__name="gpt").count() == 3
