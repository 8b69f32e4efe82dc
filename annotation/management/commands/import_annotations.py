from annotation.management.base import ImportCommand
from annotation.transfer.services.annotation_import import import_annotations


class Command(ImportCommand):
    help = "Import labels collected elsewhere; creates the study's annotator identities."
    noun = "annotation"
    update_help = "replace an annotator's existing label on an item"
    importer = staticmethod(import_annotations)
    target = "annotations"
