"""Every write of the annotation app (HackSoft-style services).

Functions are keyword-only, validate their input, and run in one transaction,
so a failure leaves nothing half-written.
"""

from .annotation_import import import_annotations
from .answers import AnswerValues, record_answer
from .errors import ImportFailed, ImportResult, ServiceError
from .item_import import import_items
from .members import add_members, ensure_annotator_identities
from .studies import change_status, create_study, duplicate_study, set_study_status, update_study

__all__ = [
    "AnswerValues",
    "ImportFailed",
    "ImportResult",
    "ServiceError",
    "add_members",
    "change_status",
    "create_study",
    "duplicate_study",
    "ensure_annotator_identities",
    "import_annotations",
    "import_items",
    "record_answer",
    "set_study_status",
    "update_study",
]
