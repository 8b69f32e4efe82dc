"""A small OpenAI-compatible chat-completions server on 127.0.0.1, for tests and benchmarks.

It speaks enough HTTP/1.1 (keep-alive, Content-Length) for the ``openai``
client, answers ``POST .../chat/completions`` with the full
``chat.completion`` shape including ``usage``, and misbehaves on request, so
tests can see what a real endpoint does on a bad day. Markers in the last
user message choose the behaviour:

``[[429]]``          always HTTP 429 with ``retry-after-ms`` (rate limited, even after retries)
``[[429-once]]``     HTTP 429 on the first attempt for that prompt, then a normal answer
``[[500]]``          always HTTP 500
``[[slow]]``         answers after ``slow_seconds`` (beyond the client's timeout)
``[[garbage]]``      HTTP 200 with a text that holds no verdict
``[[not-json]]``     HTTP 200 whose body is not JSON
``[[no-choices]]``   HTTP 200 with ``"choices": []``
``[[answer:TEXT]]``  answers TEXT (default: ``answer`` given to the server, else "Supported")

Every request waits ``latency`` seconds first. ``hold_after(n)`` makes the
requests after the n-th wait until ``release()``: a test can freeze a run
mid-flight and kill its worker. ``GET /stats`` returns the counters as JSON.

Run it standalone (the benchmark does, so it has a core of its own)::

    python tests/support/fake_openai.py --port 0 --latency 0.2   # prints "PORT <n>"
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

MARKER = re.compile(r"\[\[([a-z0-9-]+)(?::([^\]]*))?\]\]")


def _words(text: str) -> int:
    return len(text.split())


class FakeOpenAI:
    """The server, run on its own event loop in a daemon thread: ``with FakeOpenAI() as server: server.base_url``."""

    def __init__(
        self,
        *,
        latency: float = 0.0,
        slow_seconds: float = 5.0,
        answer: str | Callable[[str], str] = "Supported",
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.latency = latency
        self.slow_seconds = slow_seconds
        self.answer = answer
        self.host, self.port = host, port
        self.requests = 0
        self.authorizations: list[str] = []  # the Authorization header of every POST, in order
        self.completions = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.statuses: Counter[int] = Counter()
        self.prompts: Counter[str] = Counter()  # sha1 of the last user message -> requests
        self.bodies: list[dict[str, Any]] = []
        self.keep_bodies = True
        self._hold_after: int | None = None
        self._gate: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        self._thread = threading.Thread(target=self._serve, name="fake-openai", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the fake OpenAI server did not start")
        return self

    def stop(self) -> None:
        """Close the listening socket, cancel the connections still open, and end the thread."""
        loop = self._loop
        if loop is None or not loop.is_running():
            return

        server, gate = self._server, self._gate
        assert server is not None and gate is not None  # _serve made both before the loop started running

        async def shutdown() -> None:
            server.close()
            gate.set()
            others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        self._gate = asyncio.Event()
        self._gate.set()
        self._server = loop.run_until_complete(asyncio.start_server(self._handle, self.host, self.port, backlog=1024))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    # --- controls for tests ------------------------------------------------------------------

    def hold_after(self, n: int) -> None:
        """Requests after the n-th wait (without answering) until ``release()``."""
        self._hold_after = n
        if self._loop is not None and self._gate is not None:
            self._loop.call_soon_threadsafe(self._gate.clear)

    def release(self) -> None:
        self._hold_after = None
        if self._loop is not None and self._gate is not None:
            self._loop.call_soon_threadsafe(self._gate.set)

    def stats(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "completions": self.completions,
            "statuses": dict(self.statuses),
            "max_in_flight": self.max_in_flight,
            "distinct_prompts": len(self.prompts),
            "repeated_prompts": sum(1 for n in self.prompts.values() if n > 1),
        }

    @staticmethod
    def prompt_key(text: str) -> str:
        return hashlib.sha1(text.encode("utf-8")).hexdigest()

    # --- HTTP --------------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request_line = await reader.readline()
                if not request_line:
                    return
                method, path, _ = request_line.decode("latin-1").split(" ", 2)
                headers: dict[str, str] = {}
                while True:
                    line = await reader.readline()
                    if line in (b"\r\n", b"\n", b""):
                        break
                    name, _, value = line.decode("latin-1").partition(":")
                    headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
                if method == "POST":
                    self.authorizations.append(headers.get("authorization", ""))
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
                try:
                    status, extra, payload = await self._respond(method, path, body)
                finally:
                    self.in_flight -= 1
                head = [
                    f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}",
                    f"Content-Length: {len(payload)}",
                    "Content-Type: application/json",
                    "Connection: keep-alive",
                ]
                head += [f"{name}: {value}" for name, value in extra.items()]
                writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + payload)
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            return
        except asyncio.CancelledError:  # shutting down: end quietly (a cancelled handler upsets asyncio's streams)
            return
        finally:
            with contextlib.suppress(RuntimeError):  # the loop is shutting down
                writer.close()

    async def _respond(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        if method == "GET" and path.rstrip("/").endswith("/stats"):
            return 200, {}, json.dumps(self.stats()).encode()
        if method != "POST" or not path.rstrip("/").endswith("/chat/completions"):
            return 404, {}, json.dumps({"error": {"message": f"no route {method} {path}"}}).encode()
        self.requests += 1
        number = self.requests
        request = json.loads(body or b"{}")
        if self.keep_bodies:
            self.bodies.append(request)
        messages = request.get("messages") or []
        prompt = next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")
        key = self.prompt_key(prompt)
        self.prompts[key] += 1
        markers = dict(MARKER.findall(prompt))
        if self.latency:
            await asyncio.sleep(self.latency)
        if self._hold_after is not None and number > self._hold_after:
            assert self._gate is not None  # made by _serve before the server accepted any connection
            await self._gate.wait()
        if "429" in markers or ("429-once" in markers and self.prompts[key] == 1):
            return self._error(429, "Rate limit reached for requests", {"retry-after-ms": "20"})
        if "500" in markers:
            return self._error(500, "The server had an error while processing your request")
        if "slow" in markers:
            await asyncio.sleep(self.slow_seconds)
        if "not-json" in markers:
            self.statuses[200] += 1
            return 200, {}, b"<html>502 Bad Gateway from a proxy</html>"
        if "answer" in markers:
            text = markers["answer"]
        elif "garbage" in markers:
            text = "I would need to look into this further before saying anything definite."
        else:
            text = self.answer(prompt) if callable(self.answer) else self.answer
        self.statuses[200] += 1
        self.completions += 1
        choices = (
            []
            if "no-choices" in markers
            else [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ]
        )
        prompt_tokens = sum(_words(str(m.get("content", ""))) for m in messages)
        completion = {
            "id": f"chatcmpl-fake-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", "fake-model"),
            "system_fingerprint": "fp_fake",
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": _words(text),
                "total_tokens": prompt_tokens + _words(text),
            },
        }
        return 200, {}, json.dumps(completion).encode()

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> tuple[int, dict, bytes]:
        self.statuses[status] += 1
        kind = "requests" if status == 429 else "server_error"
        return status, headers or {}, json.dumps({"error": {"message": message, "type": kind, "code": None}}).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description="A fake OpenAI-compatible chat-completions server.")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds every request waits")
    parser.add_argument("--answer", default="Supported")
    args = parser.parse_args()
    server = FakeOpenAI(latency=args.latency, answer=args.answer, port=args.port)
    server.keep_bodies = False
    server.start()
    print(f"PORT {server.port}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
