"""Every write of the verifier side of metaeval (HackSoft-style services).

Keyword-only functions that validate their input and run in one
transaction, so a refused request leaves nothing half-written. The faces
(pages, API, commands, admin) call these and contain no logic of their own.
"""

from .prediction_import import import_predictions
from .runs import resume_stale_runs, start_run, stop_run
from .verifiers import VerifierInvalid, create_verifier, ensure_baselines, update_verifier

__all__ = [
    "VerifierInvalid",
    "create_verifier",
    "ensure_baselines",
    "import_predictions",
    "resume_stale_runs",
    "start_run",
    "stop_run",
    "update_verifier",
]
