"""The configuration a run works with, fixed at its start: a later edit of the verifier does not change a running run.

Both the run services (when a run starts) and the dry run (which renders a
prompt without starting anything) read a verifier through ``run_params``.
"""

from __future__ import annotations

from typing import Any

from annotation.errors import ServiceError
from annotation.models import Annotation, Item

from ...models import Verifier
from ..presets.baselines import majority_label

__all__ = ["run_params"]


def run_params(verifier: Verifier) -> dict[str, Any]:
    """The configuration a run works with, fixed at its start (a later edit does not change a running run)."""
    params: dict[str, Any] = {
        "kind": verifier.kind,
        "preset": verifier.preset,
        "model": verifier.model,
        "endpoint": verifier.endpoint,  # an operator endpoint: its URL and key are read when the run happens
        "base_url": verifier.base_url,  # a researcher endpoint (its key stays encrypted on the verifier)
        "temperature": verifier.temperature,
        "max_tokens": verifier.max_tokens,
        "timeout": verifier.timeout,
        "retries": verifier.retries,
        "template": verifier.template,
        "system_prompt": verifier.system_prompt,
        "custom_labels": list(verifier.custom_labels),
        "label_map": dict(verifier.label_map),
        "options": dict(verifier.options),
    }
    if verifier.kind == Verifier.Kind.BASELINE_MAJORITY:
        params.update(_majority(verifier))
    return params


def _majority(verifier: Verifier) -> dict[str, Any]:
    """The study's most frequent human label, or gold label when nobody has labelled anything.

    The same labels the report compares verifiers with: answers on gold
    (quality-control) items and skipped assignments are left out.
    """
    study = verifier.study
    labels = list(
        Annotation.objects.filter(assignment__study=study, assignment__item__gold_label="")
        .exclude(assignment__status="skipped")
        .values_list("label", flat=True)
    )
    source = "human labels"
    if not labels:
        labels = list(Item.objects.filter(study=study).exclude(gold_label="").values_list("gold_label", flat=True))
        source = "gold labels"
    found = majority_label(labels, study.labels)
    if found is None:
        raise ServiceError("the majority baseline needs labels: the study has no human labels and no gold labels yet")
    label, count, total = found
    return {"majority_label": label, "majority_count": count, "majority_total": total, "majority_source": source}
