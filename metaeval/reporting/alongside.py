"""Running part of a report's build beside the rest of it: on a thread, or in a forked process.

Why (issue 35): a big report's agreement sections are bootstraps, nearly all numpy and reading no database,
while its later sections (the reference, quality, scores, disagreements, verifiers) read the database and work
in pandas on the build's thread. ``reporting.agreement_beside`` decides what runs where; this module runs it.

* ``Forked``: in a process forked from the build's, which reads its inputs where they are (the fork shares the
  build's memory) and sends each result back pickled through a pipe, to a thread of the build's process that
  hands it over as soon as it comes. Why a process for a big study (``forks``: ``FORK_MIN_ITEMS`` items or
  more, on Linux): the later sections hold the GIL most of the time, and every numpy call of a
  bootstrap on a thread waited up to the interpreter's switch interval (5 ms) to take it back: at 100,000 items
  the per-domain agreement took 1.3 s beside the later sections, against 0.9 s alone. ``Claims`` lets the
  child and the build share pieces of work (the domains), each taken once.
* ``start``: on a thread of its own, for a smaller study's (forking costs more than the GIL does there).

What runs there reads no database: a query there raises ``NoDatabaseHere``. On a thread its connection
would be another one than the build's: outside the build's snapshot on PostgreSQL, outside a test's
transaction on SQLite; a forked process shares the build's connection's socket, which it must leave alone
(it ends with ``os._exit``: nothing of the parent's is closed or flushed by it).
"""

from __future__ import annotations

import contextlib
import contextvars
import mmap
import multiprocessing
import os
import pickle
import signal
import struct
import sys
import threading
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO, TypeVar

from django.db import connection

__all__ = ["start", "forks", "Forked", "Claims", "NoDatabaseHere", "AlongsideLost", "FORK_MIN_ITEMS"]

T = TypeVar("T")

#: From how many items a report's agreement goes to a forked process rather than the build's thread and a thread of
#: its own (at 20,000 items x 3 labels the overall bootstrap takes about 0.15 s; a fork, a few milliseconds).
FORK_MIN_ITEMS = 20_000


class NoDatabaseHere(RuntimeError):
    """A query was made by the work alongside the build, which reads no database."""


class AlongsideLost(RuntimeError):
    """The process alongside the build ended without a result (killed, or out of memory)."""


def forks(items: int) -> bool:
    """Whether work on this many items goes to a forked process: ``FORK_MIN_ITEMS`` or more, on Linux (macOS forks,
    but its system libraries, numpy's BLAS among them, are not safe to use in a child forked from a process that
    used them; Python's own multiprocessing does not fork there by default)."""
    return items >= FORK_MIN_ITEMS and sys.platform.startswith("linux")


def start(work: Callable[[], T]) -> Callable[[], T]:
    """Run ``work`` on a thread now (with the caller's context variables); the callable returned waits for it and
    gives its result, or raises its error."""
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="report-alongside")
    future = executor.submit(contextvars.copy_context().run, _without_database, work)
    executor.shutdown(wait=False)  # the thread ends once the work is done
    return future.result


def _without_database(work: Callable[[], T]) -> T:
    with connection.execute_wrapper(_refuse):
        return work()


def _refuse(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
    raise NoDatabaseHere(f"the report's work alongside its build reads no database; it asked: {sql[:200]}")


class Forked:
    """``work`` in a forked child: each item it sends (``work(send)``) is pickled through a pipe and handed to
    ``on_item`` on a thread of the parent as soon as it comes (so the child never waits on a full pipe, and is
    reaped even when the build fails before it waits for it)."""

    def __init__(self, work: Callable[[Callable[[Any], None]], None], on_item: Callable[[Any], None]) -> None:
        read_end, write_end = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            raise
        if pid == 0:  # the child: it never returns from here
            os.close(read_end)
            _child(work, write_end)
        os.close(write_end)
        self._pid, self._on_item = pid, on_item
        self._status, self._done = 0, False
        self._errors: list[BaseException] = []  # the child's error first, then any of ``on_item``'s
        self._reader = threading.Thread(
            target=self._receive, args=(read_end,), name="report-alongside-reader", daemon=True
        )
        self._reader.start()

    def _receive(self, read_end: int) -> None:
        try:
            with os.fdopen(read_end, "rb") as pipe:
                while len(header := pipe.read(_HEADER.size)) == _HEADER.size:
                    size = _HEADER.unpack(header)[0]
                    if len(body := pipe.read(size)) < size:
                        break  # the child ended mid-message (killed): ``wait`` says so
                    try:
                        kind, value = pickle.loads(body)
                    except Exception as error:  # e.g. an error class whose arguments do not come back
                        kind, value = (
                            "error",
                            AlongsideLost(
                                f"a message from the process alongside the build "
                                f"could not be read: {type(error).__name__}: {error}"
                            ),
                        )
                    if kind == "item":
                        try:
                            self._on_item(value)
                        except BaseException as error:  # raised by ``wait``, on the build's thread
                            self._errors.append(error)
                    elif kind == "error":
                        self._errors.insert(0, value)
                    else:
                        self._done = True
        finally:
            _, self._status = os.waitpid(self._pid, 0)

    def wait(self) -> None:
        """Wait until the child has ended and every item was handed over; raise its error (or ``on_item``'s)."""
        self._reader.join()
        if self._errors:
            raise self._errors[0]
        if not self._done:
            raise AlongsideLost(f"the report's process alongside its build ended early ({_ended(self._status)})")

    def cancel(self) -> None:
        """Stop the child (the build failed: its result is not wanted); the reader thread still reaps it."""
        if self._reader.is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)


class Claims:
    """Which of ``count`` pieces of work comes next, for two lanes that take them from opposite ends (a forked child
    from the front, the build from the back), in memory that the fork shares: whichever lane is free first does
    more of them, and none is done twice."""

    def __init__(self, count: int) -> None:
        self._ends = mmap.mmap(-1, _ENDS.size)  # anonymous and shared: the child's claims are seen by the parent
        _ENDS.pack_into(self._ends, 0, 0, count)
        self._lock = multiprocessing.get_context("fork").Lock()

    def from_front(self) -> int | None:
        with self._lock:
            front, back = _ENDS.unpack_from(self._ends, 0)
            if front >= back:
                return None
            _ENDS.pack_into(self._ends, 0, front + 1, back)
            return front

    def from_back(self) -> int | None:
        with self._lock:
            front, back = _ENDS.unpack_from(self._ends, 0)
            if front >= back:
                return None
            _ENDS.pack_into(self._ends, 0, front, back - 1)
            return back - 1


_HEADER = struct.Struct("<Q")  # each pickled message's length
_ENDS = struct.Struct("<qq")


def _child(work: Callable[[Callable[[Any], None]], None], write_end: int) -> None:
    """Write each item ``work`` sends, then ``done`` (or its error), pickled, to the pipe; then end at once."""
    status = 1
    try:
        _default_signals()
        with os.fdopen(write_end, "wb") as pipe:
            try:
                _without_database(
                    lambda: work(
                        lambda item: _send(pipe, pickle.dumps(("item", item), protocol=pickle.HIGHEST_PROTOCOL))
                    )
                )
                _send(pipe, pickle.dumps(("done", None)))
            except BaseException as error:  # every error goes back to the build, which raises it
                _send(pipe, _pickled_error(error))
        status = 0
    finally:
        os._exit(status)  # no atexit, no flushing or closing of what the parent holds (its database connection)


def _default_signals() -> None:
    """A stop asked of the build's process group (SIGTERM, SIGINT) ends the child at once, not through the handlers
    it inherited (a worker's graceful stop would let it finish its bootstraps for nobody)."""
    for number in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(ValueError, OSError):  # ValueError: not the main thread (forked from another one)
            signal.signal(number, signal.SIG_DFL)


def _send(pipe: BinaryIO, message: bytes) -> None:
    pipe.write(_HEADER.pack(len(message)))
    pipe.write(message)
    pipe.flush()


def _pickled_error(error: BaseException) -> bytes:
    """The error as the build will raise it, with the child's traceback as a note (a pickled error loses its own)."""
    where = "".join(traceback.format_exception(error))
    try:
        error.add_note(f"raised in the report's process alongside its build:\n{where}")
        return pickle.dumps(("error", error), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # an error that cannot be pickled goes back as its text
        return pickle.dumps(("error", RuntimeError(f"{type(error).__name__}: {error}\n{where}")))


def _ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        return f"killed by {signal.Signals(number).name}" if number in signal.valid_signals() else f"signal {number}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"
