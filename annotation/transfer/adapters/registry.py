"""The adapters by `--from` name (docs/importing.md lists them with their mappings)."""

from __future__ import annotations

from annotation.errors import ServiceError
from annotation.transfer.adapters.base import Adapter
from annotation.transfer.adapters.factcheckgpt import FactcheckGPTAdapter
from annotation.transfer.adapters.factscore import FActScoreAdapter
from annotation.transfer.adapters.labelstudio import LabelStudioAdapter
from annotation.transfer.adapters.ragas import RagasAdapter
from annotation.transfer.adapters.safe import SafeAdapter
from annotation.transfer.adapters.veriscore import VeriScoreAdapter
from annotation.transfer.adapters.wice import WiCEAdapter

ADAPTERS: dict[str, Adapter] = {
    adapter.name: adapter
    for adapter in (
        VeriScoreAdapter(),
        FActScoreAdapter(),
        SafeAdapter(),
        RagasAdapter(),
        FactcheckGPTAdapter(),
        WiCEAdapter(),
        LabelStudioAdapter(),
    )
}
SOURCES: tuple[str, ...] = tuple(ADAPTERS)


def get_adapter(name: str) -> Adapter:
    """The adapter called `name`, or a ServiceError listing the known ones."""
    adapter = ADAPTERS.get((name or "").strip().lower())
    if adapter is None:
        raise ServiceError(f"no importer for {name!r}; --from takes one of {', '.join(ADAPTERS)}")
    return adapter
