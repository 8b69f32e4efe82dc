"""The verifier leaderboard across a researcher's studies (issue 33), as LLM-AggreFact tabulates verifiers.

Rows are verifiers by name, columns the verification studies the user reads as a researcher,
each cell the verifier's balanced accuracy against the study's human reference with its interval,
then the mean over the studies a verifier has and a rank by it (``stats.leaderboard``).

Each cell is the number of the study's own current report (its "verifiers" section), read from
the report cache, so the leaderboard and every study's report say the same thing; a study whose
current report is not built yet is listed as pending and its build is queued, never run here.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from annotation.access import Researcher
from annotation.models import Study
from annotation.studies.selectors import studies_with_role
from metaeval import selectors, stats
from metaeval.reporting.cache import cached_current, request_refresh
from metaeval.reporting.options import ReportOptions

__all__ = ["leaderboard_for", "leaderboard_csv_rows", "RULE"]

RULE = (
    "balanced accuracy (mean recall over the reference's classes) of each verifier against each study's human "
    "reference, as the study's report gives it (its 95% interval resamples items); the mean is over the "
    "studies a verifier has, each counting once, and the rank is by that mean"
)


def leaderboard_for(user: User) -> dict[str, Any]:
    """The leaderboard of the verification studies the user reads as a researcher."""
    studies = [
        study
        for study in studies_with_role(user).filter(kind=Study.Kind.VERIFICATION)
        if getattr(study, "user_role", None) == Researcher
    ]
    options = ReportOptions()
    cells: list[dict[str, Any]] = []
    listed, pending = [], []
    for study in studies:
        fingerprint = selectors.report_fingerprint(study)
        report = cached_current(study, options, fingerprint)
        if report is None:
            request_refresh(study, options, fingerprint)
            pending.append({"slug": study.slug, "name": study.name})
            continue
        verifiers = report.get("verifiers") or {}
        if verifiers:
            listed.append({"slug": study.slug, "name": study.name})
        for name, section in verifiers.items():
            accuracy = section.get("balanced_accuracy") or {}
            cells.append(
                {
                    "verifier": name,
                    "study": study.slug,
                    "balanced_accuracy": accuracy,
                    "n_items": accuracy.get("n_items"),
                }
            )
    board = stats.leaderboard(cells) if cells else {"columns": [], "rows": [], "note": None}
    return {**board, "studies": listed, "pending": pending, "rule": RULE}


def leaderboard_csv_rows(board: dict[str, Any]) -> list[list[Any]]:
    """The leaderboard as CSV rows: a header, then one row per verifier (value, low, high per study)."""
    header: list[Any] = ["rank", "verifier", "mean", "n_studies"]
    for study in board["columns"]:
        header += [f"{study}", f"{study}_ci_low", f"{study}_ci_high", f"{study}_n"]
    rows = [header]
    for row in board["rows"]:
        line: list[Any] = [row["rank"], row["verifier"], row["mean"], row["n_studies"]]
        for study in board["columns"]:
            cell = row["cells"].get(study) or {}
            low, high = cell.get("ci") or (None, None)
            line += [cell.get("value"), low, high, cell.get("n_items")]
        rows.append(line)
    return rows
