from collections.abc import Callable
from functools import partial

from annotation.errors import ImportResult
from annotation.management.base import ImportCommand
from metaeval.verifiers.services import import_predictions


class Command(ImportCommand):
    help = (
        "Import verifier predictions made elsewhere ({item, verifier, label, score?, rationale?} per line, "
        "or --from a pipeline's verification output); each new verifier name becomes an imported verifier "
        "of the study."
    )
    noun = "prediction"
    update_help = "replace a verifier's existing prediction on an item"
    importer = staticmethod(import_predictions)
    target = "predictions"

    def extra_importers(self) -> dict[str, Callable[..., ImportResult]]:
        # A pipeline's verdict outside the study's labels is kept as unparseable, not refused.
        return {"predictions": partial(import_predictions, keep_unparseable=True)}
