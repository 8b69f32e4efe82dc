from annotation.management.base import ImportCommand
from metaeval.verifiers.services import import_predictions


class Command(ImportCommand):
    help = (
        "Import verifier predictions made elsewhere ({item, verifier, label, score?, rationale?} per line); "
        "each new verifier name becomes an imported verifier of the study."
    )
    noun = "prediction"
    update_help = "replace a verifier's existing prediction on an item"
    importer = staticmethod(import_predictions)
