"""Background work yields the CPU to annotators' pages (annotation/lib/background_priority.py,
CLAIMLAB_BACKGROUND_NICE): the worker and the import commands raise their niceness at start, never lower it."""

from __future__ import annotations

import os
import subprocess
import sys

from django.core.management import call_command

from annotation.lib import background_priority
from annotation.management import base as import_base
from annotation.management.commands import worker
from tests.conftest import jsonl, verification_item


def _in_a_child(niceness: int, start_at: int = 0) -> tuple[int, int]:
    """lower_priority(niceness) in a forked child (this process keeps its own): (what it returned, os.nice(0) after)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.nice(start_at)
            returned = background_priority.lower_priority(niceness)
            os.write(write_end, f"{returned} {os.nice(0)}".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        answer = pipe.read()
    os.waitpid(pid, 0)
    said_returned, said_now = answer.split()
    return int(said_returned), int(said_now)


base_niceness = os.nice(0)


def test_the_niceness_is_raised_to_the_setting_and_never_lowered():
    assert _in_a_child(10) == (max(10, base_niceness),) * 2
    assert _in_a_child(0)[1] == base_niceness  # 0: left as started
    assert _in_a_child(5, start_at=12 - base_niceness)[1] == 12  # started nicer: kept
    assert _in_a_child(40)[1] == 19  # the most there is


def test_the_import_commands_and_the_worker_take_the_settings_niceness(db, settings, monkeypatch, tmp_path):
    settings.BACKGROUND_NICE = 10
    asked: list[int] = []
    monkeypatch.setattr(import_base, "lower_priority", asked.append)
    monkeypatch.setattr(worker, "lower_priority", asked.append)
    from annotation.studies.services import create_study

    create_study(slug="nice", name="nice", kind="verification", annotators_per_item=1)
    items = tmp_path / "items.jsonl"
    items.write_bytes(jsonl(verification_item("c-1")).getvalue())
    call_command("import_items", "nice", str(items), verbosity=0)
    assert asked == [10]
    ran: list[dict] = []
    monkeypatch.setattr(worker, "run_rq_worker", lambda backend, **kwargs: ran.append(kwargs))
    monkeypatch.setattr(worker, "is_rq", lambda backend: True)
    call_command("worker", "--batch")
    assert asked == [10, 10] and ran


def test_the_setting_comes_from_the_environment_to_a_process_of_its_own():
    """CLAIMLAB_BACKGROUND_NICE as the operator sets it, through the settings, to a new process's niceness."""
    env = {**os.environ, "CLAIMLAB_BACKGROUND_NICE": "7", "DEBUG": "1"}
    code = (
        "import os, django; django.setup();"
        "from django.conf import settings;"
        "from annotation.lib.background_priority import lower_priority;"
        "print(lower_priority(settings.BACKGROUND_NICE), os.nice(0))"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.split() == [str(max(7, base_niceness))] * 2
