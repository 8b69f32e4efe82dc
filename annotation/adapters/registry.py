"""The adapters by `--from` name (docs/importing.md lists them with their mappings)."""

from __future__ import annotations

from ..services.errors import ServiceError
from .base import Adapter
from .factcheckgpt import FactcheckGPTAdapter
from .factscore import FActScoreAdapter
from .labelstudio import LabelStudioAdapter
from .ragas import RagasAdapter
from .safe import SafeAdapter
from .veriscore import VeriScoreAdapter

ADAPTERS: dict[str, Adapter] = {
    adapter.name: adapter
    for adapter in (
        VeriScoreAdapter(),
        FActScoreAdapter(),
        SafeAdapter(),
        RagasAdapter(),
        FactcheckGPTAdapter(),
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
