"""A verifier's prediction as the machine suggestion a study condition shows (annotation/lib/suggestions.py)."""

from __future__ import annotations

from typing import Any

from metaeval.models import Prediction


def prediction_suggestion(study: Any, verifier_name: str, item: Any) -> dict[str, str] | None:
    """The study's verifier of that name: its latest labelled prediction on the item; None when it has none."""
    found = (
        Prediction.objects.filter(verifier__study=study, verifier__name=verifier_name, item=item)
        .exclude(label=None)
        .exclude(label="")
        .order_by("-pk")
        .values_list("label", "rationale")
        .first()
    )
    if found is None:
        return None
    label, rationale = found
    return {
        "label": str(label).replace("_", " "),
        "code": str(label),  # the stored label: a preference study says it in screen terms
        "rationale": rationale or "",
        "verifier": verifier_name,
    }
