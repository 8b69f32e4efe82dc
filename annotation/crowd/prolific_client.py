"""A small client of Prolific's public API, for approving, rejecting and bonusing a study's submissions.

Where requests go: only to the operator's ``PROLIFIC_API_URL`` (config/settings.py, default
https://api.prolific.com), never to an address a researcher gives; no redirects are followed and no
proxy or ``.netrc`` from the environment is read. The researcher's API token goes in the header
``Authorization: Token <token>`` and nowhere else: not in a logged body, an error message or a page.

Every request is one **ProlificCall** row (study, who, when, method, path, the JSON body sent,
status, the answer capped at MAX_LOGGED_CHARS, the error, the duration). The row is written before
the request is sent and completed with its answer, so a request whose process died on the way is
still on record (a row with neither status nor error: "no answer recorded"); the bonus services
read those rows to never pay the same participant twice.

Failures are a `ProlificError` with a message for the researcher: Prolific refused (4xx, with
Prolific's own reason), Prolific failed (5xx), an answer that is not JSON, a timeout
(``PROLIFIC_API_TIMEOUT_SECONDS``) or a network failure. The submission list and the submission
transition (documented as idempotent) are tried again on 429, 5xx, timeouts and network failures
(RETRIES times, each try logged); the connection test answers at once; setting up and paying
bonuses are sent once (paying is documented as not idempotent).

The request and answer shapes followed, from Prolific's API reference (docs.prolific.com/api-reference):

- Authentication: header ``Authorization: Token <token>`` ("API Fundamentals").
- ``GET /api/v1/studies/{id}/`` ("Retrieve a study"): the study object; read here: ``id``, ``name``,
  ``status`` (the connection test).
- ``GET /api/v1/studies/{id}/submissions/`` ("List study submissions"): ``{"results": [SubmissionShort]}``,
  each ``{"id", "participant_id", "status", "started_at", "completed_at", "study_code", ...}`` with
  ``status`` one of RESERVED, ACTIVE, TIMED-OUT, AWAITING REVIEW, APPROVED, RETURNED, REJECTED,
  SCREENED OUT (PARTIALLY APPROVED in some workspaces); a ``_links.next.href`` is followed (its path
  only, on the same host) when Prolific pages the list.
- ``POST /api/v1/submissions/{id}/transition/`` ("Approve or reject a submission"):
  ``{"action": "APPROVE"}`` or ``{"action": "REJECT", "message": ..., "rejection_category": ...}``;
  the message is required for a rejection and "must be at least 100 chars long"; the categories are
  REJECTION_CATEGORIES below. The answer is the submission (``id``, ``status``, ...).
- ``POST /api/v1/submissions/bonus-payments/`` ("Set up bonuses"): ``{"study_id", "csv_bonuses"}``
  with one ``<participant_id>,<amount>`` line per bonus, the amount a decimal in the study's currency
  (``4.25``); 201 with ``{"id", "study", "amount", "fees", "vat", "total_amount"}``. It pays nothing.
- ``POST /api/v1/bulk-bonus-payments/{id}/pay/`` ("Pay bonuses"): pays that set asynchronously,
  202 with a JSON string; "not idempotent: sending multiple requests with the same bulk bonus
  payment ID will result in participants being paid multiple times".
- Errors ("API Fundamentals", error codes 400, 401, 404, 405, 422, 429): a JSON object
  ``{"error": {"status", "error_code", "title", "detail", "additional_information"}}`` whose
  ``detail`` is a text, a list or an object of field -> messages; `_reason` reads it (and a
  plain ``{"detail": ...}`` too).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

import httpx2
from django.conf import settings
from django.contrib.auth.models import User

from annotation.errors import ServiceError
from annotation.models import ProlificCall, Study

__all__ = [
    "PROLIFIC_ID",
    "REJECTION_CATEGORIES",
    "MIN_REJECTION_MESSAGE",
    "ProlificClient",
    "ProlificError",
    "SETUP_BONUSES_PATH",
    "pay_path",
]

logger = logging.getLogger(__name__)

API = "/api/v1"
SETUP_BONUSES_PATH = f"{API}/submissions/bonus-payments/"
PAY_PATH = re.compile(r"^/api/v1/bulk-bonus-payments/([A-Za-z0-9_-]{1,64})/pay/$")
#: Prolific's ids (studies, submissions, participants, bulk payments) are 24 hex digits; a little more is let through.
PROLIFIC_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: Prolific's rejection categories (transition-submission: ``rejection_category``), with what they mean.
REJECTION_CATEGORIES: dict[str, str] = {
    "TOO_QUICKLY": "Completed too quickly",
    "TOO_SLOWLY": "Completed too slowly",
    "FAILED_INSTRUCTIONS": "Did not follow the instructions",
    "INCOMP_LONGITUDINAL": "Did not complete a longitudinal study",
    "FAILED_CHECK": "Failed attention checks",
    "LOW_EFFORT": "Low effort",
    "MALINGERING": "Malingering",
    "NO_CODE": "No completion code",
    "BAD_CODE": "Wrong completion code",
    "NO_DATA": "No data",
    "UNSUPP_DEVICE": "Unsupported device",
    "OTHER": "Other",
}
#: "It must be at least 100 chars long" (transition-submission, ``message``).
MIN_REJECTION_MESSAGE = 100
#: What a log row keeps of an answer (and, far larger, of a request body: a bonus CSV is kept whole).
MAX_LOGGED_CHARS = 20_000
MAX_LOGGED_REQUEST_CHARS = 400_000
#: Extra tries of a request that may be repeated, and the first wait between them (doubling).
RETRIES = 2
RETRY_BACKOFF_SECONDS = 0.5
MAX_RETRY_AFTER_SECONDS = 5.0
#: Pages of a submission list followed at most (Prolific's default page is large; this bounds a loop).
MAX_PAGES = 100
MAX_REASON_CHARS = 500
#: The most of one answer Claimlab reads (a page of submissions is far smaller); past it, an error.
MAX_ANSWER_BYTES = 10_000_000
REPEATABLE_STATUS = {429, 500, 502, 503, 504}


def pay_path(bulk_id: str) -> str:
    return f"{API}/bulk-bonus-payments/{quote(bulk_id, safe='')}/pay/"


class ProlificError(ServiceError):
    """A request to Prolific that failed; the message says how, for the researcher, and never holds the token.

    ``kind``: ``refused`` (4xx), ``failed`` (5xx), ``not_json``, ``timeout``, ``network`` or ``shape``
    (JSON, but not what the documentation describes). ``status_code``: Prolific's, when it answered.
    """

    def __init__(self, message: str, *, kind: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status_code = status_code

    @property
    def answered(self) -> bool:
        """Prolific answered with a status (the request reached it); a timeout or network failure did not."""
        return self.status_code is not None


def _flatten(detail: Any) -> str:
    """Prolific's ``detail`` (a text, a list, or field -> messages) as one line."""
    if isinstance(detail, dict):
        return "; ".join(f"{name}: {_flatten(value)}" for name, value in detail.items())
    if isinstance(detail, list):
        return "; ".join(_flatten(value) for value in detail)
    return str(detail)


def _reason(body: Any) -> str:
    """The reason a Prolific error body gives, in one line ('' when it gives none)."""
    if not isinstance(body, dict):
        return body.strip() if isinstance(body, str) else ""
    error = body.get("error")
    if isinstance(error, dict):
        detail, title = error.get("detail"), error.get("title")
        text = _flatten(detail) if detail not in (None, "", [], {}) else str(title or "")
    elif isinstance(error, str):
        text = error
    else:
        text = _flatten(body.get("detail", "")) if body.get("detail") not in (None, "") else ""
    return text[:MAX_REASON_CHARS]


@dataclass
class _Attempt:
    status_code: int | None = None
    body: Any = None
    text: str = ""
    error: ProlificError | None = None
    retry_after: float | None = None


@dataclass
class ProlificClient:
    """Calls to Prolific for one Claimlab study, logged as ProlificCall rows of that study by `made_by`."""

    token: str
    study: Study
    made_by: User | None = None
    base_url: str = field(default_factory=lambda: settings.PROLIFIC_API_URL)
    timeout: float = field(default_factory=lambda: float(settings.PROLIFIC_API_TIMEOUT_SECONDS))
    transport: httpx2.BaseTransport | None = None
    sleep: Callable[[float], None] = time.sleep

    # --- the documented operations --------------------------------------------------------

    def get_study(self, study_id: str) -> dict[str, Any]:
        # Not repeated: it is the connection test, whose researcher wants the answer at once.
        answer = self.call("GET", f"{API}/studies/{_id(study_id, 'study id')}/")
        if not isinstance(answer, dict):
            raise self._shape("the study is not a JSON object")
        return answer

    def study_submissions(self, study_id: str) -> list[dict[str, Any]]:
        """Every submission of the study, following Prolific's pages (their path only, on this host)."""
        first = f"{API}/studies/{_id(study_id, 'study id')}/submissions/"
        path: str | None = first
        results: list[dict[str, Any]] = []
        for _ in range(MAX_PAGES):
            if path is None:
                return results
            answer = self.call("GET", path, repeatable=True)
            page = answer.get("results") if isinstance(answer, dict) else None
            if not isinstance(page, list) or not all(
                isinstance(row, dict) and isinstance(row.get("id"), str) for row in page
            ):
                raise self._shape('the submission list has no "results" list of submissions with an "id"')
            results.extend(page)
            path = _next_path(answer, first)
        raise self._shape(f"the submission list goes on past {MAX_PAGES} pages")

    def transition(self, submission_id: str, body: dict[str, Any]) -> dict[str, Any]:
        path = f"{API}/submissions/{_id(submission_id, 'submission id')}/transition/"
        answer = self.call("POST", path, body, repeatable=True)  # documented as idempotent
        if not isinstance(answer, dict):
            raise self._shape("the transition's answer is not a JSON object")
        return answer

    def approve(self, submission_id: str) -> dict[str, Any]:
        return self.transition(submission_id, {"action": "APPROVE"})

    def reject(self, submission_id: str, *, message: str, category: str) -> dict[str, Any]:
        return self.transition(submission_id, {"action": "REJECT", "message": message, "rejection_category": category})

    def set_up_bonuses(self, study_id: str, csv_bonuses: str, *, row: ProlificCall | None = None) -> dict[str, Any]:
        """A bulk bonus payment (not paid yet); `row`: its log row, written beforehand by the caller."""
        body = {"study_id": _id(study_id, "study id"), "csv_bonuses": csv_bonuses}
        answer = self.call("POST", SETUP_BONUSES_PATH, body, row=row)
        if not isinstance(answer, dict) or not isinstance(answer.get("id"), str) or not PROLIFIC_ID.match(answer["id"]):
            raise self._shape('the bonus set-up answer has no "id"')
        return answer

    def pay_bonuses(self, bulk_id: str) -> Any:
        """Pay a bulk bonus payment: sent once, never repeated (Prolific would pay twice)."""
        return self.call("POST", pay_path(_id(bulk_id, "bulk bonus payment id")))

    # --- one logged request -------------------------------------------------------------

    def begin(self, method: str, path: str, body: dict[str, Any] | None = None) -> ProlificCall:
        """The log row of a request about to be sent (no status, no error yet)."""
        return ProlificCall.objects.create(
            study=self.study,
            made_by=self.made_by,
            method=method,
            path=path[:300],
            request_body=self._loggable(body, MAX_LOGGED_REQUEST_CHARS),
        )

    def call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        repeatable: bool = False,
        row: ProlificCall | None = None,
    ) -> Any:
        """Send one request (tried again when `repeatable` and the failure may pass); its JSON answer."""
        tries = 1 + (RETRIES if repeatable else 0)
        for attempt in range(tries):
            log = row if row is not None and attempt == 0 else self.begin(method, path, body)
            outcome = self._send(method, path, body, log)
            if outcome.error is None:
                return outcome.body
            passing = outcome.error.kind in ("timeout", "network") or outcome.status_code in REPEATABLE_STATUS
            if not passing or attempt == tries - 1:
                raise outcome.error
            wait = RETRY_BACKOFF_SECONDS * 2**attempt
            if outcome.retry_after is not None:
                wait = max(wait, min(outcome.retry_after, MAX_RETRY_AFTER_SECONDS))
            self.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def _send(self, method: str, path: str, body: dict[str, Any] | None, log: ProlificCall) -> _Attempt:
        started = time.monotonic()
        outcome = _Attempt()
        try:
            with httpx2.Client(
                timeout=max(self.timeout, 0.05), follow_redirects=False, trust_env=False, transport=self.transport
            ) as http:
                with http.stream(
                    method,
                    self.base_url + path,
                    json=body,
                    headers={"Authorization": f"Token {self.token}", "Accept": "application/json"},
                ) as response:
                    raw = bytearray()
                    for chunk in response.iter_bytes():
                        raw.extend(chunk)
                        if len(raw) > MAX_ANSWER_BYTES:
                            break
                    text = bytes(raw[:MAX_ANSWER_BYTES]).decode(response.encoding or "utf-8", errors="replace")
            if len(raw) > MAX_ANSWER_BYTES:
                outcome.status_code, outcome.text = response.status_code, text[:MAX_LOGGED_CHARS]
                outcome.error = ProlificError(
                    f"Prolific's answer to {method} {path} is larger than {MAX_ANSWER_BYTES:,} bytes; not read",
                    kind="shape",
                    status_code=response.status_code,
                )
                self._finish(log, outcome, started)
                return outcome
        except httpx2.TimeoutException:
            outcome.error = ProlificError(
                f"Prolific did not answer {method} {path} within {self.timeout:g} s", kind="timeout"
            )
        except httpx2.HTTPError as exc:
            outcome.error = ProlificError(
                f"Prolific could not be reached ({type(exc).__name__}: {self._scrub(str(exc))[:200]})", kind="network"
            )
        else:
            outcome.status_code, outcome.text = response.status_code, text
            outcome.retry_after = _seconds(response.headers.get("Retry-After"))
            try:
                outcome.body = json.loads(text) if text.strip() else None
                parsed = bool(text.strip()) or response.status_code == 204
            except ValueError:
                parsed = False
            outcome.error = self._status_error(method, path, response.status_code, outcome.body, parsed)
        self._finish(log, outcome, started)
        return outcome

    def _status_error(self, method: str, path: str, status: int, body: Any, parsed: bool) -> ProlificError | None:
        where = f"{method} {path}"
        if 200 <= status < 300:
            if parsed:
                return None
            return ProlificError(
                f"Prolific answered {status} to {where} but not with JSON, so its answer could not be read",
                kind="not_json",
                status_code=status,
            )
        reason = self._scrub(_reason(body)) if parsed else "its answer is not JSON"
        said = f": {reason}" if reason else ""
        if 300 <= status < 400:
            return ProlificError(
                f"Prolific answered {status} (a redirect, not followed) to {where}", kind="refused", status_code=status
            )
        if status == 401:
            return ProlificError(
                f"Prolific refused the API token (401){said}. Check the token, or paste a new one",
                kind="refused",
                status_code=status,
            )
        if status == 429:
            return ProlificError(
                f"Prolific asks Claimlab to slow down (429){said}; try again in a minute",
                kind="refused",
                status_code=status,
            )
        if status >= 500:
            return ProlificError(
                f"Prolific failed with a server error ({status}) on {where}{said}; try again later",
                kind="failed",
                status_code=status,
            )
        return ProlificError(f"Prolific refused {where} ({status}){said}", kind="refused", status_code=status)

    def _finish(self, log: ProlificCall, outcome: _Attempt, started: float) -> None:
        log.status_code = outcome.status_code
        if outcome.status_code is not None:
            log.response_body = self._loggable(
                outcome.body if outcome.body is not None or not outcome.text.strip() else {"text": outcome.text},
                MAX_LOGGED_CHARS,
            )
        log.error = str(outcome.error) if outcome.error else ""
        log.duration_ms = int((time.monotonic() - started) * 1000)
        log.save(update_fields=["status_code", "response_body", "error", "duration_ms"])
        logger.info(
            "prolific %s %s -> %s",
            log.method,
            log.path,
            outcome.status_code if outcome.status_code is not None else (outcome.error.kind if outcome.error else "-"),
            extra={"study": self.study.slug, "duration_ms": log.duration_ms},
        )

    # --- keeping the token out of everything written -----------------------------------

    def _scrub(self, text: str) -> str:
        return text.replace(self.token, "[token]") if self.token else text

    def _loggable(self, value: Any, limit: int) -> Any:
        """`value` as a JSON column holds it: the token replaced wherever it appears, cut past `limit` characters."""
        if value is None:
            return None
        text = json.dumps(value, ensure_ascii=False)
        scrubbed = self._scrub(text)
        if len(scrubbed) > limit:
            return {"truncated": True, "chars": len(scrubbed), "text": scrubbed[:limit]}
        if scrubbed == text:
            return value
        try:
            return json.loads(scrubbed)
        except ValueError:
            return {"text": scrubbed}

    def _shape(self, what: str) -> ProlificError:
        return ProlificError(f"Prolific's answer is not as documented: {what}", kind="shape")


def _id(value: str, what: str) -> str:
    if not isinstance(value, str) or not PROLIFIC_ID.match(value):
        raise ServiceError(f"the {what} {value!r} is not a Prolific id (letters, digits, - or _, at most 64)")
    return value


def _seconds(value: str | None) -> float | None:
    try:
        return max(float(value), 0.0) if value else None
    except ValueError:
        return None


def _next_path(answer: dict[str, Any], first: str) -> str | None:
    """The path (and query) of the list's next page, if Prolific gives one for the same list; else None."""
    links = answer.get("_links")
    nxt = links.get("next") if isinstance(links, dict) else None
    href = nxt.get("href") if isinstance(nxt, dict) else nxt
    if not isinstance(href, str) or not href:
        return None
    parts = urlsplit(href)
    if parts.path != first:
        return None
    return parts.path + (f"?{parts.query}" if parts.query else "")
