"""A local stand-in for Prolific's API on 127.0.0.1, for contract tests: Claimlab never calls the real service.

It follows the request and response shapes of Prolific's API reference (the same ones
annotation/crowd/prolific_client.py names) and checks every request it receives against them: the
``Authorization: Token <token>`` header, the method and path of a documented operation, a JSON body
with the documented fields (a rejection's ``message`` of at least 100 characters and one of
Prolific's ``rejection_category`` values; ``csv_bonuses`` lines of ``<participant_id>,<amount>`` for
participants of the study). What breaks the contract is answered as Prolific would (400 with its error
shape, 401, 404) *and* written to ``problems``, which a test asserts empty: a wrong request fails the
test even when the code under test swallows the error.

``fail(mode, method=..., path=..., times=n)`` makes the next matching requests misbehave:

``400``        Prolific's error shape: ``{"error": {"status": 400, "error_code", "title", "detail", ...}}``
``429``        too many requests, with ``Retry-After: 0``
``500``        a server error with an HTML body (not JSON)
``not-json``   HTTP 200 whose body is HTML
``slow``       answers after ``slow_seconds`` (beyond a short client timeout)
``echo-token`` a 400 whose detail repeats the Authorization header (the token must not reach a log row)

Use: ``with FakeProlific(token="...") as fake: ...`` and point ``PROLIFIC_API_URL`` at ``fake.url``.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import count
from typing import Any
from urllib.parse import urlsplit

CATEGORIES = {
    "TOO_QUICKLY",
    "TOO_SLOWLY",
    "FAILED_INSTRUCTIONS",
    "INCOMP_LONGITUDINAL",
    "FAILED_CHECK",
    "LOW_EFFORT",
    "MALINGERING",
    "NO_CODE",
    "BAD_CODE",
    "NO_DATA",
    "UNSUPP_DEVICE",
    "OTHER",
}
STATUSES = {"RESERVED", "ACTIVE", "TIMED-OUT", "AWAITING REVIEW", "APPROVED", "RETURNED", "REJECTED", "SCREENED OUT"}
ID = r"([0-9a-f]{24})"
AMOUNT = re.compile(r"^\d+(\.\d{1,2})?$")
PAID = "Successfully received bonus payments request. The bonuses will be paid asynchronously."


@dataclass
class Seen:
    """One request as the fake received it."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Any


@dataclass
class Failure:
    mode: str
    method: str | None
    path: str | None
    times: int


@dataclass
class FakeStudy:
    id: str
    name: str
    status: str = "ACTIVE"
    submissions: list[dict[str, Any]] = field(default_factory=list)


def error_body(status: int, detail: Any, title: str = "Invalid request") -> dict[str, Any]:
    """Prolific's error shape."""
    return {
        "error": {
            "status": status,
            "error_code": 140100 if status == 400 else status * 1000,
            "title": title,
            "detail": detail,
            "additional_information": "/api/v1/errors/140100",
            "traceback": None,
        }
    }


class FakeProlific:
    """The server in a daemon thread: ``with FakeProlific(token=...) as fake: fake.url``."""

    def __init__(self, *, token: str, slow_seconds: float = 2.0, page_size: int | None = None) -> None:
        self.token = token
        self.slow_seconds = slow_seconds
        self.page_size = page_size
        self.studies: dict[str, FakeStudy] = {}
        self.bulk: dict[str, dict[str, Any]] = {}
        self.pays: Counter[str] = Counter()
        self.seen: list[Seen] = []
        self.problems: list[str] = []
        self.failures: list[Failure] = []
        self._ids = count(1)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- set-up ----------------------------------------------------------------------------

    def new_id(self) -> str:
        return f"{next(self._ids):024x}"

    def add_study(self, name: str = "A Prolific study", **submissions: str) -> FakeStudy:
        """A study whose submissions are ``participant_id=status`` (``AWAITING REVIEW`` written ``AWAITING_REVIEW``)."""
        study = FakeStudy(id=self.new_id(), name=name)
        for participant, status in submissions.items():
            self.add_submission(study, participant, status.replace("_", " "))
        self.studies[study.id] = study
        return study

    def add_submission(self, study: FakeStudy, participant: str, status: str) -> dict[str, Any]:
        assert status in STATUSES, status
        submission = {
            "id": self.new_id(),
            "participant_id": participant,
            "status": status,
            "started_at": "2026-05-04T10:00:00.000000Z",
            "completed_at": None if status in ("RESERVED", "ACTIVE") else "2026-05-04T10:20:00.000000Z",
            "has_siblings": False,
            "study_code": "DONE123" if status != "ACTIVE" else None,
            "return_requested": None,
        }
        study.submissions.append(submission)
        return submission

    def submission(self, participant: str) -> dict[str, Any]:
        for study in self.studies.values():
            for submission in study.submissions:
                if submission["participant_id"] == participant:
                    return submission
        raise KeyError(participant)

    def fail(self, mode: str, *, method: str | None = None, path: str | None = None, times: int = 1) -> None:
        self.failures.append(Failure(mode=mode, method=method, path=path, times=times))

    def calls(self, method: str, path_part: str = "") -> list[Seen]:
        return [seen for seen in self.seen if seen.method == method and path_part in seen.path]

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeProlific:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                fake._handle(self, "GET")

            def do_POST(self) -> None:
                fake._handle(self, "POST")

            def do_PUT(self) -> None:
                fake._handle(self, "PUT")

            def do_DELETE(self) -> None:
                fake._handle(self, "DELETE")

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-prolific", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> FakeProlific:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # --- requests ---------------------------------------------------------------------------

    def _problem(self, text: str) -> None:
        with self._lock:
            self.problems.append(text)

    def _failure(self, method: str, path: str) -> str | None:
        with self._lock:
            for failure in self.failures:
                if (
                    failure.times > 0
                    and failure.method in (None, method)
                    and (failure.path is None or failure.path in path)
                ):
                    failure.times -= 1
                    return failure.mode
        return None

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        body: Any = None
        headers = {name.lower(): value for name, value in handler.headers.items()}
        if raw:
            if not headers.get("content-type", "").startswith("application/json"):
                self._problem(f"{method} {parts.path}: a body that is not declared JSON")
            try:
                body = json.loads(raw)
            except ValueError:
                self._problem(f"{method} {parts.path}: a body that is not JSON")
        with self._lock:
            self.seen.append(Seen(method, parts.path, parts.query, headers, body))
        auth = headers.get("authorization", "")
        if not auth.startswith("Token "):
            self._problem(f"{method} {parts.path}: no 'Authorization: Token <token>' header (got {auth[:6]!r}...)")
        mode = self._failure(method, parts.path)
        if mode == "slow":
            time.sleep(self.slow_seconds)
        elif mode == "400":
            return self._send(handler, 400, error_body(400, {"study": ["Injected refusal for the test."]}))
        elif mode == "429":
            return self._send(handler, 429, error_body(429, "Request was throttled.", "Too many requests"), retry=True)
        elif mode == "500":
            return self._send_text(handler, 500, "<h1>Server Error (500)</h1>")
        elif mode == "not-json":
            return self._send_text(handler, 200, "<html><body>Down for maintenance</body></html>")
        elif mode == "echo-token":
            return self._send(handler, 400, error_body(400, f"Bad header: {auth}"))
        if auth != f"Token {self.token}":
            return self._send(handler, 401, error_body(401, "Invalid token.", "Unauthorized"))
        status, answer = self._route(method, parts.path, parts.query, body)
        self._send(handler, status, answer)

    def _send(self, handler: BaseHTTPRequestHandler, status: int, body: Any, *, retry: bool = False) -> None:
        data = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        if retry:
            handler.send_header("Retry-After", "0")
        handler.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up waiting ("slow")
            handler.wfile.write(data)

    def _send_text(self, handler: BaseHTTPRequestHandler, status: int, text: str) -> None:
        data = text.encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "text/html")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _route(self, method: str, path: str, query: str, body: Any) -> tuple[int, Any]:
        routes = (
            ("GET", rf"^/api/v1/studies/{ID}/$", self._study),
            ("GET", rf"^/api/v1/studies/{ID}/submissions/$", self._submissions),
            ("POST", rf"^/api/v1/submissions/{ID}/transition/$", self._transition),
            ("POST", r"^/api/v1/submissions/bonus-payments/$", self._set_up_bonuses),
            ("POST", rf"^/api/v1/bulk-bonus-payments/{ID}/pay/$", self._pay),
        )
        for route_method, pattern, answer in routes:
            match = re.match(pattern, path)
            if match and route_method == method:
                return answer(match, query, body)
        self._problem(f"{method} {path}: not a documented operation")
        return 404, error_body(404, "Not found.", "Not found")

    def _refuse(self, what: str, detail: Any) -> tuple[int, Any]:
        self._problem(what)
        return 400, error_body(400, detail)

    def _study(self, match: re.Match, query: str, body: Any) -> tuple[int, Any]:
        study = self.studies.get(match.group(1))
        if study is None:
            return 404, error_body(404, "Study not found.", "Not found")
        return 200, {"id": study.id, "name": study.name, "internal_name": study.name, "status": study.status}

    def _submissions(self, match: re.Match, query: str, body: Any) -> tuple[int, Any]:
        study = self.studies.get(match.group(1))
        if study is None:
            return 404, error_body(404, "Study not found.", "Not found")
        rows = study.submissions
        page = int(dict(part.split("=") for part in query.split("&") if "=" in part).get("page", 1))
        size = self.page_size or max(len(rows), 1)
        chunk = rows[(page - 1) * size : page * size]
        more = page * size < len(rows)
        path = f"/api/v1/studies/{study.id}/submissions/"
        links = {
            "self": {"href": f"https://api.prolific.com{path}?page={page}", "title": "Current"},
            "next": {"href": f"https://api.prolific.com{path}?page={page + 1}" if more else None, "title": "Next"},
        }
        return 200, {"results": chunk, "_links": links, "meta": {"count": len(rows)}}

    def _transition(self, match: re.Match, query: str, body: Any) -> tuple[int, Any]:
        submission = next(
            (row for study in self.studies.values() for row in study.submissions if row["id"] == match.group(1)), None
        )
        if submission is None:
            return 404, error_body(404, "Submission not found.", "Not found")
        if not isinstance(body, dict):
            return self._refuse("transition: no JSON object body", {"action": ["This field is required."]})
        extra = set(body) - {"action", "message", "rejection_category"}
        if extra:
            return self._refuse(f"transition: undocumented fields {sorted(extra)}", {"detail": "Unknown fields."})
        action = body.get("action")
        if action not in ("APPROVE", "REJECT"):
            return self._refuse(f"transition: action {action!r}", {"action": [f'"{action}" is not a valid choice.']})
        if action == "REJECT":
            message = body.get("message")
            if not isinstance(message, str) or len(message) < 100:
                return self._refuse(
                    "transition: a rejection message under 100 characters",
                    {"message": ["Ensure this field has at least 100 characters."]},
                )
            if body.get("rejection_category") not in CATEGORIES:
                return self._refuse(
                    f"transition: rejection_category {body.get('rejection_category')!r}",
                    {"rejection_category": ["Not a valid choice."]},
                )
        elif set(body) != {"action"}:
            return self._refuse("transition: an approval with more than its action", {"detail": "Unexpected fields."})
        if submission["status"] != "AWAITING REVIEW":
            return self._refuse(
                f"transition of a submission that is {submission['status']}",
                [f"Submission status {submission['status']} cannot be transitioned."],
            )
        submission["status"] = "APPROVED" if action == "APPROVE" else "REJECTED"
        answer = {
            "id": submission["id"],
            "status": submission["status"],
            "participant": submission["participant_id"],
            "study_id": next(s.id for s in self.studies.values() if submission in s.submissions),
            "started_at": submission["started_at"],
            "completed_at": submission["completed_at"],
            "entered_code": submission["study_code"],
        }
        return 200, answer

    def _set_up_bonuses(self, match: re.Match, query: str, body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict) or set(body) != {"study_id", "csv_bonuses"}:
            return self._refuse(f"bonus set-up body {body!r}", {"detail": "study_id and csv_bonuses are required."})
        study = self.studies.get(body["study_id"])
        if study is None:
            return self._refuse("bonus set-up for an unknown study", {"study_id": ["Study not found."]})
        taken = {row["participant_id"] for row in study.submissions}
        total = Decimal(0)
        bad = []
        lines = [line for line in str(body["csv_bonuses"]).split("\n") if line]
        for line in lines:
            pid, _, amount = line.partition(",")
            if pid not in taken or not AMOUNT.match(amount) or Decimal(amount) <= 0:
                bad.append(pid)
            else:
                total += Decimal(amount)
        if bad or not lines:
            return self._refuse(
                f"bonus set-up with lines Prolific refuses: {bad}",
                {"csv_bonuses": [f"Invalid participant or amount: {', '.join(bad) or 'no lines'}"]},
            )
        fees = (total / 3).quantize(Decimal("0.01"))
        bulk_id = self.new_id()
        bulk: dict[str, Any] = {
            "id": bulk_id,
            "study": study.id,
            "amount": float(total),
            "fees": float(fees),
            "vat": 0.0,
            "total_amount": float(total + fees),
        }
        self.bulk[bulk_id] = {**bulk, "lines": lines}
        return 201, bulk

    def _pay(self, match: re.Match, query: str, body: Any) -> tuple[int, Any]:
        bulk_id = match.group(1)
        if bulk_id not in self.bulk:
            return self._refuse("pay of an unknown bulk payment", "Bulk bonus payment not found.")
        if body not in (None, {}):
            self._problem(f"pay with a body {body!r}")
        with self._lock:
            self.pays[bulk_id] += 1
            if self.pays[bulk_id] > 1:
                self.problems.append(f"bulk bonus payment {bulk_id} paid {self.pays[bulk_id]} times")
        return 202, PAID

    def paid_lines(self) -> list[str]:
        """Every ``pid,amount`` line of the bulk payments that were paid, as often as they were paid."""
        return [
            line for bulk_id, times in self.pays.items() for _ in range(times) for line in self.bulk[bulk_id]["lines"]
        ]
