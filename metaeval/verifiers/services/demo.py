"""The verifier side of the demo: imported predictions (WiCE's GPT-4 and GPT-3.5) and the two baselines.

``annotation`` loads the demo studies and never imports metaeval, so this
runs after ``manage.py load_demo`` as ``manage.py load_demo_verifiers``. It
is idempotent: predictions are imported only into a study that has no
imported verifier yet, and baselines are created and run only when they have
no predictions. Baselines run here, in process, so the demo needs no worker.
"""

from __future__ import annotations

import json
from pathlib import Path

from annotation.models import Study
from annotation.studies.demo import fixtures_dir

from ...models import Verifier
from ..runner.orchestration import run_to_completion
from .prediction_import import import_predictions
from .runs import start_run
from .verifiers import ensure_baselines

__all__ = ["load_demo_verifiers"]


def load_demo_verifiers(*, directory: Path | None = None) -> list[str]:
    """Import the demo's predictions and run the baselines of every demo verification study; one line per study."""
    directory = directory or fixtures_dir()
    definitions = json.loads((directory / "studies.json").read_text(encoding="utf-8"))
    lines = []
    for definition in definitions:
        slug = definition["slug"]
        study = Study.objects.filter(slug=slug).first()
        if study is None:
            lines.append(f"{slug}: not loaded yet; run manage.py load_demo first")
            continue
        if study.kind != Study.Kind.VERIFICATION:
            continue
        done = []
        if (
            definition.get("predictions")
            and not Verifier.objects.filter(study=study, kind=Verifier.Kind.IMPORTED).exists()
        ):
            with (directory / definition["predictions"]).open("rb") as stream:
                result = import_predictions(study=study, stream=stream, fmt="jsonl")
            names = ", ".join(
                Verifier.objects.filter(study=study, kind=Verifier.Kind.IMPORTED)
                .order_by("name")
                .values_list("name", flat=True)
            )
            done.append(f"imported {result.created} predictions ({names})")
        for baseline in ensure_baselines(study=study):
            if baseline.predictions.exists():
                continue
            run = run_to_completion(start_run(verifier=baseline, enqueue=False))
            done.append(f"{baseline.name} {run.status} on {run.done} items")
        lines.append(f"{slug}: {'; '.join(done) if done else 'verifiers already loaded'}")
    return lines
