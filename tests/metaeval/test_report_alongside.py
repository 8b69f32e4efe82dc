"""The report's per-domain agreement computed on a thread of its own (reporting/alongside.py, issue 35): the same
report as computed in line, the first sections handed over on the build's thread first, and no database read
on the other thread."""

from __future__ import annotations

import contextvars
import json
import threading

import pytest

from annotation.models import Study
from metaeval.reporting import ReportOptions, alongside, build_report

OPTIONS = [ReportOptions(n_resamples=60), ReportOptions(n_resamples=60, by_domain=True, binary=True)]


def _in_line(work):
    result = work()
    return lambda: result


@pytest.mark.parametrize("options", OPTIONS, ids=["plain", "by-domain-binary"])
def test_the_report_is_the_one_computed_in_line(demo, db, options, monkeypatch):
    study = demo["xsum-factuality"]
    threads: list[str] = []
    handed: list[dict] = []

    def hook(first: dict) -> None:
        threads.append(threading.current_thread().name)
        handed.append(first)

    alongside_report = build_report(study, options, on_first_sections=hook)
    with monkeypatch.context() as patched:
        patched.setattr(alongside, "start", _in_line)
        in_line_report = build_report(study, options)
    assert json.dumps(alongside_report, allow_nan=False) == json.dumps(in_line_report, allow_nan=False)
    assert alongside_report["agreement"]["fleiss_kappa"]["value"] is not None
    assert (alongside_report["by_domain"] is not None) == options.by_domain
    if options.by_domain:
        assert alongside_report["by_domain"]["xsum"]["n_items"] > 1000
    # the first sections, handed over once, on the build's own thread, before the per-domain agreement
    assert threads == [threading.current_thread().name]
    (first,) = handed
    assert first["agreement"] == alongside_report["agreement"] and first["by_domain"] is None


def test_the_thread_alongside_reads_no_database_and_the_build_s_connection_goes_on(db):
    with pytest.raises(alongside.NoDatabaseHere, match="reads no database"):
        alongside.start(lambda: Study.objects.count())()
    assert Study.objects.count() >= 0


def test_its_result_error_and_context_come_through():
    assert alongside.start(lambda: 6 * 7)() == 42
    with pytest.raises(ZeroDivisionError):
        alongside.start(lambda: 1 / 0)()
    seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")
    token = seen.set("the caller's")
    try:
        assert alongside.start(seen.get)() == "the caller's"
    finally:
        seen.reset(token)
