"""A small client for notebooks: a study's annotations, items and report through the REST API, as pandas.

Needs only the standard library and pandas (no Django), so it runs in any
notebook that can import ``metaeval`` (a checkout on ``sys.path``)::

    from metaeval.client import Claimlab
    from metaeval import stats

    lab = Claimlab("http://127.0.0.1:8000", token="...")   # a token from /accounts/tokens/
    labels = lab.labels("factcheck-gpt")                   # item, annotator, label, ..., reference_label
    kappa = stats.fleiss_kappa(stats.build_table(labels, lab.study("factcheck-gpt")["labels"]))

``labels`` are the labels the report's agreement counts and each item's reference label by the
study's rule, both computed by the server as for the report, so statistics on it equal the
report's; docs/notebooks.md has more.
"""

from __future__ import annotations

import io
import json
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["Claimlab", "ClaimlabError", "LABEL_TABLE_COLUMNS", "PPI_ITEM_COLUMNS"]

#: ``labels``' columns: the server's study frame table (metaeval.study_frame.TABLE_COLUMNS; no Django here).
LABEL_TABLE_COLUMNS = [
    "item",
    "annotator",
    "label",
    "domain",
    "gold_label",
    "in_agreement",
    "reference_label",
    "reference_source",
]
#: ``ppi_items``' columns: the server's labelled-items download (metaeval.reporting.ppi.ITEM_COLUMNS; no Django here).
PPI_ITEM_COLUMNS = [
    "verifier",
    "item",
    "system",
    "domain",
    "response_id",
    "has_reference",
    "claim",
    "response",
    "reference_label",
    "prediction",
]


class ClaimlabError(RuntimeError):
    """The server refused a request; ``status`` is the HTTP status and the message the API's ``detail``."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.detail = detail


class Claimlab:
    """One server and one API token (``Authorization: Token <key>``)."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 60.0, poll_seconds: float = 2.0) -> None:
        if not token:
            raise ValueError("a token is needed: create one at /accounts/tokens/ or POST /api/auth/token/")
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.poll_seconds = poll_seconds

    # --- HTTP -------------------------------------------------------------------------------------

    def _request(
        self, method: str, path: str, params: dict[str, Any] | None = None, *, body: dict[str, Any] | None = None
    ) -> bytes:
        url = path if path.startswith("http") else f"{self.base_url}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        headers = {"Authorization": f"Token {self.token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.read()
        except urllib.error.HTTPError as exc:
            text = exc.read().decode("utf-8", "replace")
            try:
                detail = json.loads(text).get("detail", text)
            except (json.JSONDecodeError, AttributeError):
                detail = text[:500]
            raise ClaimlabError(exc.code, str(detail)) from None

    def _json(
        self, method: str, path: str, params: dict[str, Any] | None = None, *, body: dict[str, Any] | None = None
    ) -> Any:
        return json.loads(self._request(method, path, params, body=body))

    # --- reads ------------------------------------------------------------------------------------

    def study(self, slug: str) -> dict[str, Any]:
        """The study's settings (labels, systems, annotators per item, ...)."""
        return self._json("GET", f"/api/studies/{slug}/")

    def report(self, slug: str, *, by_domain: bool = False, binary: bool = False) -> dict[str, Any]:
        """The study's report JSON (the same numbers as the report page)."""
        params = {"by_domain": str(by_domain).lower(), "binary": str(binary).lower()}
        return self._json("GET", f"/api/studies/{slug}/report", params)

    def ppi_items(
        self,
        slug: str,
        *,
        reference: str | None = None,
        include_screened_out: bool = False,
        ppi_labelled_share: float | None = None,
    ) -> pd.DataFrame:
        """Which claims the report's prediction-powered estimates counted as human-labelled: one row per
        verifier and claim with its item, system, domain, response_id, has_reference, ``claim`` (labelled /
        unlabelled / no prediction: its part in the share supported and FActScore), ``response`` (its
        response's part in F1@K), and the reference_label and prediction used (None: none).

        The options are the report's (``reference`` rule, ``include_screened_out``, ``ppi_labelled_share``),
        so the counts equal the report's ``ppi`` section asked with the same ones. From
        ``GET /api/studies/{slug}/report/ppi-items?format=jsonl``."""
        params: dict[str, Any] = {"format": "jsonl", "include_screened_out": str(include_screened_out).lower()}
        if reference is not None:
            params["reference"] = reference
        if ppi_labelled_share is not None:
            params["ppi_labelled_share"] = str(ppi_labelled_share)
        text = self._request("GET", f"/api/studies/{slug}/report/ppi-items", params)
        rows = [json.loads(line) for line in text.decode("utf-8").splitlines() if line.strip()]
        frame = pd.DataFrame(rows, columns=PPI_ITEM_COLUMNS).astype({"has_reference": bool})
        for column in ("reference_label", "prediction"):
            frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
        return frame

    def leaderboard(self) -> pd.DataFrame:
        """The verifier leaderboard of your studies: one row per verifier (rank, mean, studies) and one
        column per study with its balanced accuracy; the intervals stay in ``leaderboard_json()``."""
        board = self.leaderboard_json()
        rows = [
            {
                "rank": row["rank"],
                "verifier": row["verifier"],
                "mean": row["mean"],
                "n_studies": row["n_studies"],
                **{study: (row["cells"].get(study) or {}).get("value") for study in board["columns"]},
            }
            for row in board["rows"]
        ]
        return pd.DataFrame(rows, columns=["rank", "verifier", "mean", "n_studies", *board["columns"]])

    def leaderboard_json(self) -> dict[str, Any]:
        """``GET /api/leaderboard`` as it is: cells with intervals, pending studies, the rule."""
        return self._json("GET", "/api/leaderboard")

    def plan(self, **inputs: Any) -> dict[str, Any]:
        """``GET /api/plan`` (e.g. ``plan(kind="verification", width=0.05, share=0.4, sensitivity=0.9,
        specificity=0.8)`` for the human labels needed with and without a verifier's predictions)."""
        return self._json("GET", "/api/plan", {key: str(value) for key, value in inputs.items()})

    def items(self, slug: str) -> pd.DataFrame:
        """Every item: item, domain, response_id, system, gold_label, payload (all pages of the item list)."""
        rows: list[dict[str, Any]] = []
        page: str | None = f"/api/studies/{slug}/items/"
        while page:
            answer = self._json("GET", page)
            rows += answer["results"]
            page = answer.get("next")
        frame = pd.DataFrame(rows, columns=["id", "domain", "response_id", "system", "gold", "payload"])
        return frame.rename(columns={"id": "item", "gold": "gold_label"})

    def annotations(self, slug: str) -> pd.DataFrame:
        """One row per annotation, the export's columns (docs/formats.md).

        A study too big to stream is exported in the background: the client
        starts the job, waits for it and downloads the file.
        """
        try:
            text = self._request("GET", f"/api/studies/{slug}/annotations/export", {"format": "jsonl"})
        except ClaimlabError as exc:
            if exc.status != 400 or "too many to stream" not in exc.detail:
                raise
            text = self._background_export(slug)
        return pd.read_json(io.BytesIO(text), lines=True, dtype=False) if text.strip() else pd.DataFrame()

    def question_answers(self, slug: str) -> pd.DataFrame:
        """The study's extra questions' answers as ``metaeval.stats.questions`` reads them: one row per
        answer, question and target ("" for the item, a system for a list, "<system>#<claim index>" for
        a claim), with the answer's item, annotator, label and (a study with conditions) condition.

        From the export (its ``q_<key>`` columns), so every answer is there, the report's rules aside.
        """
        from metaeval.stats.questions import long_answers  # numpy and scipy, but no Django

        questions = self.study(slug).get("questions") or []
        annotations = self.annotations(slug)
        carried = [column for column in ("label", "condition") if column in annotations.columns]
        columns = ["item", "annotator", *carried, "question", "target", "value"]
        if not questions or annotations.empty:
            return pd.DataFrame(columns=columns)
        stored = annotations[["item", "annotator", *carried]].copy()
        stored["answers"] = [
            {
                question["key"]: row.get(f"q_{question['key']}")
                for question in questions
                if f"q_{question['key']}" in row
            }
            for row in annotations.to_dict("records")
        ]
        return long_answers(stored, questions)

    def hf_dataset(self, slug: str, folder: str | Path) -> Path:
        """The study as a Hugging Face dataset, unzipped into ``folder`` (new or empty): the parquet files
        under ``data/<config>/`` and the dataset card README.md, as ``manage.py export_dataset`` writes them.

        The server writes it in the background (``POST /api/studies/{slug}/exports {"format": "hf"}``);
        the client waits for the job and downloads the zip. Load it with
        ``datasets.load_dataset(str(folder), "items")`` or ``pandas.read_parquet(folder / "data" / "items")``.
        """
        target = Path(folder)
        if target.exists() and (not target.is_dir() or any(target.iterdir())):
            raise ValueError(f"{target} exists and is not an empty folder; choose a new folder")
        archive = self._background_export(slug, "hf")
        target.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(io.BytesIO(archive)) as files:
            for name in files.namelist():  # the server's own names; refuse any that would leave the folder
                if name.startswith("/") or ".." in Path(name).parts:
                    raise ClaimlabError(500, f"the dataset zip holds an unsafe name: {name!r}")
            files.extractall(target)
        return target

    def _background_export(self, slug: str, file_format: str = "jsonl") -> bytes:
        job = self._json("POST", f"/api/studies/{slug}/exports", body={"format": file_format})
        while job["status"] not in ("succeeded", "failed"):
            if job.get("stuck"):
                raise ClaimlabError(503, "the export is stuck: no background worker is running it")
            time.sleep(self.poll_seconds)
            job = self._json("GET", f"/api/studies/{slug}/exports/{job['id']}")
        if job["status"] != "succeeded":
            raise ClaimlabError(500, f"the export failed: {job.get('error') or 'no reason given'}")
        return self._request("GET", job["download_url"])

    def labels(
        self,
        slug: str,
        *,
        include_gold_items: bool | None = None,
        reference: str | None = None,
        include_screened_out: bool = False,
    ) -> pd.DataFrame:
        """The labels the report counts, as a long table for ``metaeval.stats``: item, annotator, label,
        domain, gold_label, in_agreement, reference_label and reference_source.

        Computed by the server from the same study frame as the report (``metaeval.study_frame``), so
        statistics on it equal the report's: the same participants, check items and gold rule, and each
        item's ``reference_label`` by the study's reference rule (adjudications included), or by
        ``reference`` when given (None where the rule gives none). ``include_gold_items`` None keeps the
        labels the report's agreement counts (gold items by the study's setting); True all, False none.
        """
        params: dict[str, Any] = {"include_screened_out": str(include_screened_out).lower()}
        if include_gold_items is not None:
            params["include_gold_items"] = str(include_gold_items).lower()
        if reference is not None:
            params["reference"] = reference
        answer = self._json("GET", f"/api/studies/{slug}/report/labels", params)
        frame = pd.DataFrame(answer["columns"], columns=LABEL_TABLE_COLUMNS)
        frame = frame.astype({"item": str, "annotator": str, "label": str, "domain": str, "gold_label": str})
        frame["in_agreement"] = frame["in_agreement"].astype(bool)
        for column in ("reference_label", "reference_source"):
            frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
        frame.attrs["reference_rule"] = answer["reference_rule"]
        return frame
