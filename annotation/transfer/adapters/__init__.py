"""Import adapters: the factuality pipelines' own files (and Label Studio's) as Claimlab records.

One module per pipeline turns its file into Claimlab's item / annotation /
prediction records; service.import_from feeds them to the import services.
docs/importing.md documents every `--from` value and mapping.
"""

from annotation.transfer.adapters.registry import ADAPTERS, SOURCES, get_adapter
from annotation.transfer.adapters.service import import_from

__all__ = ["ADAPTERS", "SOURCES", "get_adapter", "import_from"]
