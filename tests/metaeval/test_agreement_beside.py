"""A big study's agreement sections in a forked process beside the rest of the build (reporting/agreement_beside.py,
reporting/alongside.py, issue 35): the same report, byte for byte, as computed on threads and in line; the first
sections handed over once, as they are there; the domains shared between the two lanes, none twice; and every way
the process alongside can fail reaches the build as an error that names it."""

from __future__ import annotations

import json
import os
import pickle
import signal
import sys
import threading
import time

import numpy as np
import pytest

from annotation.models import Study
from annotation.studies.services import create_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from metaeval.models import ReportSnapshot
from metaeval.reporting import ReportOptions, agreement_beside, alongside, build, build_report, cache
from metaeval.reporting.agreement import AgreementInputs
from tests.conftest import jsonl, verification_item

LABELS = ["supported", "contradicted", "inconclusive"]
DOMAINS = {"biography": 40, "science": 25, "history": 14, "sports": 7}  # unequal, so the lanes' shares differ
PLAIN = ReportOptions(n_resamples=80)
PAGE = ReportOptions(n_resamples=80, by_domain=True, binary=True)


def seeded_study(slug: str = "beside") -> Study:
    """Four domains of unequal size, three annotators who agree with a latent label 70% of the time."""
    study = create_study(slug=slug, name=slug, kind="verification", annotators_per_item=3)
    study.binary_map = {"supported": "positive", "contradicted": "negative", "inconclusive": "negative"}
    study.save(update_fields=["binary_map"])
    rng = np.random.default_rng(20261207)
    ids = [f"{domain}-{n}" for domain, count in DOMAINS.items() for n in range(count)]
    domain_of = {item: item.rsplit("-", 1)[0] for item in ids}
    import_items(study=study, stream=jsonl(*(verification_item(i, domain=domain_of[i]) for i in ids)), fmt="jsonl")
    truth = rng.choice(3, size=len(ids), p=[0.6, 0.25, 0.15])
    labels = [
        {"item": item, "annotator": who, "label": LABELS[int(t if rng.random() < 0.7 else rng.integers(0, 3))]}
        for item, t in zip(ids, truth, strict=True)
        for who in ("w1", "w2", "w3")
    ]
    import_annotations(study=study, stream=jsonl(*labels), fmt="jsonl")
    return study


@pytest.fixture
def forking(monkeypatch):
    """Every study's agreement goes to a forked process (the tests' studies are far below FORK_MIN_ITEMS)."""
    monkeypatch.setattr(alongside, "FORK_MIN_ITEMS", 0)


def _forked(work):
    """``work``'s result from a forked process (``alongside.Forked``), or its error."""
    results: list = []
    forked = alongside.Forked(lambda send: send(work()), results.append)
    forked.wait()
    return results[0]


def _in_line(work):
    result = work()
    return lambda: result


@pytest.mark.parametrize("options", [PLAIN, PAGE], ids=["plain", "by-domain-binary"])
def test_the_forked_report_is_the_threaded_and_the_in_line_one_byte_for_byte(db, options, monkeypatch):
    study = seeded_study()
    handed: list[tuple[str, dict]] = []

    def hook(first: dict) -> None:
        handed.append((threading.current_thread().name, first))

    with monkeypatch.context() as patched:
        patched.setattr(alongside, "FORK_MIN_ITEMS", 0)
        forked = build_report(study, options, on_first_sections=hook)
    threaded_first: list[dict] = []
    threaded = build_report(study, options, on_first_sections=threaded_first.append)
    with monkeypatch.context() as patched:
        patched.setattr(alongside, "start", _in_line)
        in_line = build_report(study, options)
    assert json.dumps(forked, allow_nan=False) == json.dumps(threaded, allow_nan=False)
    assert json.dumps(forked, allow_nan=False) == json.dumps(in_line, allow_nan=False)
    assert forked["agreement"]["fleiss_kappa"]["value"] is not None and forked["agreement"]["fleiss_kappa"]["ci"]
    if options.by_domain:
        assert list(forked["by_domain"]) == sorted(DOMAINS)
        assert {domain: forked["by_domain"][domain]["n_items"] for domain in DOMAINS} == DOMAINS
        assert forked["binary"]["collapse"] == study.binary_map
    else:
        assert forked["by_domain"] is None and forked["binary"] is None
    # the first sections: handed over once, from the thread that receives them, the same as the build's thread's
    ((thread, first),) = handed
    assert thread == "report-alongside-reader" and thread != threading.current_thread().name
    assert json.dumps(first, allow_nan=False) == json.dumps(threaded_first[0], allow_nan=False)
    assert first["binary"] is None and first["by_domain"] is None and first["scores"] is None


def test_both_lanes_take_domains_and_none_twice(db, forking, monkeypatch):
    """The build's thread takes domains from the back once its later sections are done; here the child is slowed,
    so the build's thread takes some, and the report is still the one of a single lane."""
    study = seeded_study()
    real = AgreementInputs.domain_summary
    computed: list[tuple[int, str]] = []

    def recorded(self, domain):
        computed.append((os.getpid(), domain))
        if os.getpid() != parent:
            time.sleep(1.0)  # the child: a domain a second, after taking its first at once
        return real(self, domain)

    parent = os.getpid()
    monkeypatch.setattr(AgreementInputs, "domain_summary", recorded)
    slow = build.disagreements  # the build's thread: its later sections take half a second at least
    monkeypatch.setattr(build, "disagreements", lambda rows: (time.sleep(0.5), slow(rows))[1])
    forked = build_report(study, PAGE)
    # only the parent's own calls are seen here; the child's are the rest
    mine = [domain for pid, domain in computed if pid == parent]
    assert mine and len(mine) < len(DOMAINS)
    assert len(set(mine)) == len(mine)
    assert mine == sorted(DOMAINS)[::-1][: len(mine)]  # from the back, in order
    monkeypatch.setattr(alongside, "FORK_MIN_ITEMS", 10**9)
    monkeypatch.setattr(AgreementInputs, "domain_summary", real)
    monkeypatch.setattr(build, "disagreements", slow)
    assert json.dumps(forked) == json.dumps(build_report(study, PAGE))


def test_claims_across_a_fork_are_each_taken_once():
    claims = alongside.Claims(60)
    theirs: list[int] = []

    def child(send):
        while (at := claims.from_front()) is not None:
            send(at)
            time.sleep(0.001)

    forked = alongside.Forked(child, theirs.append)
    mine = []
    while (at := claims.from_back()) is not None:
        mine.append(at)
        time.sleep(0.001)
    forked.wait()
    assert sorted(theirs + mine) == list(range(60))
    assert theirs == sorted(theirs) and mine == sorted(mine, reverse=True)
    assert alongside.Claims(0).from_front() is None and alongside.Claims(0).from_back() is None


def test_an_error_in_the_process_alongside_is_the_builds_with_where_it_was_raised(db, forking, monkeypatch):
    study = seeded_study()
    handed: list[dict] = []

    def broken(self, on_overall=None):
        raise ValueError("no agreement for you")

    monkeypatch.setattr(AgreementInputs, "overall", broken)
    with pytest.raises(ValueError, match="no agreement for you") as raised:
        build_report(study, PAGE, on_first_sections=handed.append)
    assert any("raised in the report's process alongside its build" in note for note in raised.value.__notes__)
    assert "broken" in "".join(raised.value.__notes__)  # the child's traceback
    assert handed == []


def test_an_error_that_cannot_be_pickled_comes_back_as_its_text():
    class Local(Exception):  # a local class: pickle cannot find it by name
        pass

    def work():
        raise Local("from a class pickle cannot name")

    with pytest.raises(RuntimeError, match="Local: from a class pickle cannot name"):
        _forked(work)


def test_a_process_alongside_that_is_killed_fails_the_build_and_says_how(db, forking, monkeypatch):
    study = seeded_study()

    def killed(self, domain):
        os.kill(os.getpid(), signal.SIGKILL)

    parent = os.getpid()
    real = AgreementInputs.domain_summary
    monkeypatch.setattr(
        AgreementInputs, "domain_summary", lambda self, d: real(self, d) if os.getpid() == parent else killed(self, d)
    )
    # the build's thread is slowed so that the child takes a domain (and dies there)
    slow = build.disagreements
    monkeypatch.setattr(build, "disagreements", lambda rows: (time.sleep(1.0), slow(rows))[1])
    with pytest.raises(alongside.AlongsideLost, match="killed by SIGKILL"):
        build_report(study, PAGE)


def test_a_failing_build_stops_its_process_alongside(db, forking, monkeypatch):
    study = seeded_study()
    started: list[alongside.Forked] = []
    real_forked = alongside.Forked

    def kept(*args, **kwargs):
        forked = real_forked(*args, **kwargs)
        started.append(forked)
        return forked

    parent = os.getpid()
    real = AgreementInputs.overall
    monkeypatch.setattr(
        AgreementInputs, "overall", lambda self, cb=None: real(self, cb) if os.getpid() == parent else time.sleep(60)
    )
    monkeypatch.setattr(alongside, "Forked", kept)
    monkeypatch.setattr(build, "disagreements", lambda rows: 1 / 0)
    begun = time.monotonic()
    with pytest.raises(ZeroDivisionError):
        build_report(study, PAGE)
    (forked,) = started
    forked._reader.join(timeout=10)
    assert not forked._reader.is_alive() and time.monotonic() - begun < 30
    assert os.WIFSIGNALED(forked._status) and os.WTERMSIG(forked._status) == signal.SIGKILL


def test_the_process_alongside_reads_no_database_and_leaves_the_builds_connection_alone(db):
    before = Study.objects.count()
    with pytest.raises(alongside.NoDatabaseHere, match="reads no database"):
        _forked(lambda: Study.objects.count())
    create_study(slug="after", name="after", kind="verification", annotators_per_item=1)
    assert Study.objects.count() == before + 1  # the connection the child shared still works


def test_a_result_that_cannot_be_pickled_is_an_error_not_a_hang():
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        _forked(lambda: lambda: None)


@pytest.mark.django_db(transaction=True)
def test_the_cache_stores_the_forked_builds_first_sections_then_the_whole_report(forking, monkeypatch):
    """The background build: its first sections come from the thread that receives them (on SQLite stored by that
    thread's own connection, on PostgreSQL by the store's thread), then the whole report takes their place."""
    study = seeded_study("beside-cache")
    stored: list[dict] = []
    real = cache._store

    def keeping(study, options, encoded, fingerprint, seconds, *, complete=True):
        stored.append({"complete": complete, "report": json.loads(encoded.main), "fingerprint": fingerprint})
        return real(study, options, encoded, fingerprint, seconds, complete=complete)

    monkeypatch.setattr(cache, "_store", keeping)
    assert cache.refresh_report(study.pk, PAGE.as_dict())["status"] == "built"
    first, whole = stored
    assert (first["complete"], whole["complete"]) == (False, True)
    assert first["fingerprint"] == whole["fingerprint"]
    assert list(first["report"]) == list(whole["report"])
    assert first["report"]["agreement"] == whole["report"]["agreement"]
    assert first["report"]["by_domain"] is None and list(whole["report"]["by_domain"]) == sorted(DOMAINS)
    assert list(ReportSnapshot.objects.filter(study=study).values_list("complete", flat=True)) == [True]


def test_the_size_rule():
    assert agreement_beside.KEYS == ("agreement", "binary", "by_domain", "human_ceiling")
    assert alongside.forks(alongside.FORK_MIN_ITEMS) == sys.platform.startswith("linux")
    assert not alongside.forks(alongside.FORK_MIN_ITEMS - 1)


def test_where_no_process_can_be_forked_the_agreement_is_computed_on_threads(db, forking, monkeypatch, caplog):
    study = seeded_study()

    def no_fork():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    handed: list[tuple[str, dict]] = []
    open_files = len(os.listdir("/proc/self/fd"))
    on_threads = build_report(
        study, PAGE, on_first_sections=lambda f: handed.append((threading.current_thread().name, f))
    )
    assert "no process alongside (" in caplog.text and "Resource temporarily unavailable" in caplog.text
    assert len(os.listdir("/proc/self/fd")) == open_files  # the pipe made for the child is closed again
    assert [name for name, _ in handed] == [
        threading.current_thread().name
    ]  # the build's own thread, as below the size
    monkeypatch.setattr(alongside, "FORK_MIN_ITEMS", 10**9)
    assert json.dumps(on_threads) == json.dumps(build_report(study, PAGE))


class _TwoArguments(Exception):
    """Pickles, but does not unpickle: its one stored argument does not fit its two parameters."""

    def __init__(self, first: str, second: str) -> None:
        super().__init__(f"{first} {second}")


def test_an_error_that_does_not_come_back_from_the_pipe_is_named_not_lost():
    def work():
        raise _TwoArguments("half", "way")

    with pytest.raises(alongside.AlongsideLost, match="could not be read: TypeError"):
        _forked(work)
