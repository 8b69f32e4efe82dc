"""`manage.py worker` that stops dead at a chosen point of a job, for the kill tests to kill it there.

Why: killing a worker "mid-import" by watching the clock breaks as soon as the import gets
faster (60,000 items went from several seconds to 1.3 s, and the test's window closed). Here
the worker itself says it has reached the point (a mark file) and then waits for ever, so the
kill lands at the same place on any machine. Run as `python -m tests.support.held_worker
worker ...` with HOLD_ENV set to one of HOLDS and MARK_ENV to the mark file's path.

- "import": every record read and staged, nothing live yet (before `switch_live`);
- "export": the first chunk written to the `.partial` file, the rest not;
- "verifier-between-chunks": a verifier run's first chunk done, its next chunk not yet queued.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HOLD_ENV = "CLAIMLAB_TEST_HOLD"
MARK_ENV = "CLAIMLAB_TEST_HOLD_MARK"


def hold_here(mark: Path) -> None:
    """Say "held" (the mark file, with this process's pid) and wait until killed."""
    mark.write_text(str(os.getpid()))
    while True:
        time.sleep(3600)


def hold_import_before_switch_live(mark: Path) -> None:
    from annotation.transfer.services import item_import

    switch_live: Callable[..., Any] = item_import.switch_live

    def held(*args: Any, **kwargs: Any) -> Any:
        hold_here(mark)
        return switch_live(*args, **kwargs)  # pragma: no cover (held for ever)

    item_import.switch_live = held


def hold_export_after_first_chunk(mark: Path) -> None:
    from annotation.transfer import exports

    chunks: Callable[..., Iterator[str]] = exports._chunks

    def held(*args: Any, **kwargs: Any) -> Iterator[str]:
        for number, chunk in enumerate(chunks(*args, **kwargs)):
            if number == 1:  # the first chunk is in the file (a chunk is far bigger than the write buffer)
                hold_here(mark)
            yield chunk

    exports._chunks = held


def hold_verifier_between_chunks(mark: Path) -> None:
    from metaeval.verifiers import tasks

    enqueue: Callable[..., Any] = tasks.enqueue

    def held(*args: Any, **kwargs: Any) -> Any:
        hold_here(mark)
        return enqueue(*args, **kwargs)  # pragma: no cover (held for ever)

    tasks.enqueue = held


HOLDS: dict[str, Callable[[Path], None]] = {
    "import": hold_import_before_switch_live,
    "export": hold_export_after_first_chunk,
    "verifier-between-chunks": hold_verifier_between_chunks,
}


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import django
    from django.core.management import execute_from_command_line

    django.setup()
    HOLDS[os.environ[HOLD_ENV]](Path(os.environ[MARK_ENV]))
    execute_from_command_line(["manage.py", *sys.argv[1:]])


if __name__ == "__main__":
    main()
