from annotation.management.base import ImportCommand
from annotation.transfer.services.item_import import import_items


class Command(ImportCommand):
    help = "Import a study's items from JSON Lines or CSV (all or nothing)."
    noun = "item"
    importer = staticmethod(import_items)
