"""The progress page's annotator table from counters (issue 35; progress/quality_counters.py, selectors.label_quality).

Skipped, timed out, timed, labelled, abstained, gold and gold right per annotator, and the active-time
sketch, must equal a computation from every label after every kind of write (`tally.counted_from_rows`,
`tally.label_quality_from_rows`), the medians within the sketch's stated error; the table must be read
without touching a label; the data migration fills them for existing studies. Run on both databases.
"""

from __future__ import annotations

import importlib
import random
from datetime import timedelta

import pytest
from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotation.errors import ImportFailed, ServiceError
from annotation.lib.active_time_sketch import RELATIVE_ERROR
from annotation.members.membership import set_member_active
from annotation.models import (
    MAX_ACTIVE_MS,
    ActiveTimeBucket,
    Annotation,
    AnnotatorCount,
    Assignment,
    Item,
    Study,
    StudyMember,
)
from annotation.progress.counters import recount_study
from annotation.progress.selectors import (
    LABEL_FIELDS,
    SKETCH_ERROR_TEXT,
    SPEEDER_MIN_LABELS,
    LabelQuality,
    annotator_rows,
    label_quality,
    label_rate,
)
from annotation.progress.tally import counted, counted_from_rows, label_quality_from_rows, label_rate_from_rows
from annotation.studies.services import change_status, duplicate_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from annotation.workbench.services import SubmittedAnswer, claim_next, skip, submit
from tests.annotation.progress.test_counters import DOMAINS, LABELS, _study
from tests.conftest import jsonl, verification_item

pytestmark = pytest.mark.django_db


def _time(rng: random.Random) -> int | None:
    """An active time as clients send them: mostly seconds, sometimes none, 0, tiny or the largest stored."""
    roll = rng.random()
    if roll < 0.15:
        return None
    if roll < 0.2:
        return rng.choice((0, 1, 127, MAX_ACTIVE_MS))
    return min(MAX_ACTIVE_MS, int(rng.lognormvariate(9, 1)))


def _close(estimate: float | None, exact: float | None) -> bool:
    if exact is None or estimate is None:
        return estimate is exact
    return abs(estimate - exact) <= RELATIVE_ERROR * exact


def _assert_table_agrees(study: Study) -> None:
    """The counters equal a count from the rows (every number, the sketch bucket by bucket), and the
    table read from them equals the table computed from every label, medians within the sketch's error."""
    study.refresh_from_db()
    assert counted(study) == counted_from_rows(study)
    kept, exact = label_quality(study), label_quality_from_rows(study)
    assert kept.annotators.keys() == exact.annotators.keys()
    for user_id, numbers in exact.annotators.items():
        for name in LABEL_FIELDS:
            if name == "median_active_ms":
                assert _close(kept.annotators[user_id][name], numbers[name]), (user_id, kept, exact)
            else:
                assert kept.annotators[user_id][name] == numbers[name], (user_id, name, kept, exact)
    assert _close(kept.study_median_ms, exact.study_median_ms)
    now = timezone.now()
    assert label_rate(study, now=now) == label_rate_from_rows(study, now=now)


@pytest.mark.parametrize("seed", [35, 36])
def test_the_table_from_counters_equals_the_table_from_every_label_after_random_writes(make_user, seed):
    """Submits with and without times, revisions of label and time, timings alone, skips, leases that ran
    out and were taken over, members deactivated while holding items (some run out), the study closed
    over live and lapsed leases and reopened, annotation imports with times (and --update revising
    them), item imports changing gold labels and domains: after each, the table agrees."""
    rng = random.Random(seed)
    make_user("rita")
    names = ["a1", "a2", "a3", "a4"]
    users = [make_user(name) for name in names]
    study = _study(f"quality-{seed}", items=14, annotators=names, n=3)
    next_item = 14
    ran: list[str] = []
    for _ in range(80):
        operation = rng.choice(
            ["submit"] * 4 + ["revise", "revise", "timing", "skip", "lapse", "member", "close", "labels", "items"]
        )
        user = rng.choice(users)
        try:
            if operation in ("submit", "skip"):
                assignment = claim_next(user=user, study=study)
                if assignment is not None and operation == "submit":
                    answer = SubmittedAnswer(rng.choice(LABELS), active_ms=_time(rng))
                    submit(user=user, study=study, assignment_id=assignment.pk, answer=answer)
                elif assignment is not None:
                    skip(user=user, study=study, assignment_id=assignment.pk)
            elif operation in ("revise", "timing"):
                mine = list(Assignment.objects.filter(study=study, annotator=user, status="submitted").order_by("pk"))
                if mine:
                    picked = rng.choice(mine)
                    label = picked.annotation.label if operation == "timing" else rng.choice(LABELS)
                    answer = SubmittedAnswer(label, active_ms=_time(rng))
                    submit(user=user, study=study, assignment_id=picked.pk, answer=answer)
            elif operation == "lapse":  # a lease runs out and a free annotator who never had the item takes it over
                lapsed = claim_next(user=user, study=study)
                free = [
                    other
                    for other in users
                    if lapsed is not None
                    and not Assignment.objects.filter(study=study, annotator=other, status="active").exists()
                    and not Assignment.objects.filter(item_id=lapsed.item_id, annotator=other).exists()
                ]
                if lapsed is not None:
                    past = timezone.now() - timedelta(minutes=1)
                    Assignment.objects.filter(pk=lapsed.pk).update(lease_expires_at=past)
                if lapsed is not None and free:
                    taker = claim_next(user=rng.choice(free), study=study)
                    if taker is not None and taker.item_id == lapsed.item_id:
                        ran.append("taken over")
            elif operation == "member":  # deactivated while holding an item (perhaps run out), then back
                claim_next(user=user, study=study)
                if rng.random() < 0.5:
                    Assignment.objects.filter(study=study, annotator=user, status="active").update(
                        lease_expires_at=timezone.now() - timedelta(seconds=5)
                    )
                member = StudyMember.objects.get(study=study, user=user)
                set_member_active(study=study, member=member, active=False)
                set_member_active(study=study, member=member, active=True)
            elif operation == "close":  # over live leases and one that ran out, then reopened
                for other in rng.sample(users, 2):
                    claim_next(user=other, study=study)
                lapsing = Assignment.objects.filter(study=study, status="active").order_by("pk").first()
                if lapsing is not None:  # one of the leases the close meets has run out
                    past = timezone.now() - timedelta(seconds=5)
                    Assignment.objects.filter(pk=lapsing.pk).update(lease_expires_at=past)
                change_status(study=study, status=Study.Status.CLOSED)
                change_status(study=study, status=Study.Status.OPEN)
            elif operation == "labels":
                worker = rng.choice(["x1", "x2"])
                rows = {
                    f"c-{rng.randrange(next_item):03d}": {
                        "annotator": worker,
                        "label": rng.choice(LABELS),
                        **({"active_ms": time} if (time := _time(rng)) is not None else {}),
                    }
                    for _ in range(3)
                }
                lines = [{"item": item, **row} for item, row in rows.items()]
                import_annotations(study=study, stream=jsonl(*lines), fmt="jsonl", update=True)
            elif operation == "items":  # new items, and an existing one's gold label and domain changed
                records = [verification_item(f"c-{next_item + k:03d}", domain=rng.choice(DOMAINS)) for k in range(2)]
                gold = rng.choice(("", *LABELS))
                records.append(
                    verification_item(
                        f"c-{rng.randrange(next_item):03d}",
                        domain=rng.choice(DOMAINS),
                        **({"gold": gold} if gold else {}),
                    )
                )
                next_item += 2
                import_items(study=study, stream=jsonl(*records), fmt="jsonl", update=True)
            ran.append(operation)
        except (ImportFailed, ServiceError):
            pass
        _assert_table_agrees(study)
    assert {"submit", "revise", "timing", "skip", "taken over", "member", "close", "labels", "items"} <= set(ran)
    totals = label_quality_from_rows(study).annotators.values()
    for name in ("skipped", "timed_out", "timed", "abstained", "gold_n", "gold_correct"):
        assert sum(numbers[name] or 0 for numbers in totals) > 0, name  # every count was exercised
    copy = duplicate_study(study=study, slug=f"quality-{seed}-copy", copy_items=True)
    _assert_table_agrees(copy)
    assert not AnnotatorCount.objects.filter(study=copy).exists() and not ActiveTimeBucket.objects.filter(study=copy)


def test_the_table_is_read_from_counters_alone_in_as_many_queries_for_a_big_study(make_user):
    """No query of `label_quality` or of the throughput's count reads a label or an assignment table
    row by row: a study with many more labels, annotators' times and skips issues the same queries."""
    for name in ("rita", "s1", "s2", "b1", "b2", "b3"):
        make_user(name)
    small = _study("small-q", items=4, annotators=["s1", "s2"], n=2)
    big = _study("big-q", items=40, annotators=["b1", "b2", "b3"], n=3)
    rng = random.Random(3)
    for study, people in ((small, ["s1", "s2"]), (big, ["b1", "b2", "b3"])):
        rounds = 2 if study is small else 40
        for _ in range(rounds):
            for user in StudyMember.objects.filter(study=study, user__username__in=people).select_related("user"):
                assignment = claim_next(user=user.user, study=study)
                if assignment is not None:
                    answer = SubmittedAnswer(rng.choice(LABELS), active_ms=_time(rng))
                    submit(user=user.user, study=study, assignment_id=assignment.pk, answer=answer)
    queries = {}
    for study in (small, big):
        with CaptureQueriesContext(connection) as captured:
            label_quality(study)
        queries[study.slug] = [query["sql"] for query in captured.captured_queries]
        for sql in queries[study.slug]:
            assert Annotation._meta.db_table not in sql and Assignment._meta.db_table not in sql, sql
    assert len(queries["small-q"]) == len(queries["big-q"]) == 2
    assert Annotation.objects.filter(study=big).count() > 20 * Annotation.objects.filter(study=small).count()


def test_the_speeder_alert_compares_the_sketchs_medians_as_it_did_the_exact_ones(make_user):
    """Annotators whose medians stand well clear of a third of the study's: the alerts from the counters
    are the alerts from every label (the sketch moves a median by 1/128 at most)."""
    make_user("rita")
    names = ["quick", "steady", "slow", "mixed"]
    for name in names:
        make_user(name)
    study = _study("speeders", items=30, annotators=names, n=4)
    rng = random.Random(9)
    pace = {"quick": 900, "steady": 8000, "slow": 20000, "mixed": 6000}
    for _ in range(30):
        for name in names:
            user = StudyMember.objects.get(study=study, user__username=name).user
            assignment = claim_next(user=user, study=study)
            if assignment is not None:
                ms = int(pace[name] * rng.uniform(0.7, 1.3))
                submit(
                    user=user,
                    study=study,
                    assignment_id=assignment.pk,
                    answer=SubmittedAnswer("supported", active_ms=ms),
                )
    kept, exact = label_quality(study), label_quality_from_rows(study)
    alerts = {
        source: {row.user_id: row.alerts for row in annotator_rows(study, quality)}
        for source, quality in (("kept", kept), ("exact", exact))
    }
    assert alerts["kept"] == alerts["exact"]
    quick = StudyMember.objects.get(study=study, user__username="quick").user_id
    assert any("likely speeder" in alert for alert in alerts["kept"][quick])
    assert sum(bool(row) for row in alerts["kept"].values()) == 1
    assert all(numbers["timed"] >= SPEEDER_MIN_LABELS for numbers in kept.annotators.values())
    assert isinstance(kept, LabelQuality)


def test_the_data_migration_fills_the_table_for_existing_studies(make_user):
    """0035's fill, run on a study whose new counters are empty, gives the recount's figures: timed,
    abstaining, gold and imported answers, skips pressed, a lease that ran out, and the sketch."""
    make_user("rita")
    users = [make_user(name) for name in ("m1", "m2")]
    study = _study("filled", items=10, annotators=["m1", "m2"], n=2)
    for k, user in enumerate(users * 3):
        assignment = claim_next(user=user, study=study)
        assert assignment is not None
        answer = SubmittedAnswer(LABELS[k % 3], active_ms=[None, 0, 4000, 12_345, MAX_ACTIVE_MS, 800][k])
        submit(user=user, study=study, assignment_id=assignment.pk, answer=answer)
    skipped = claim_next(user=users[0], study=study)
    assert skipped is not None
    skip(user=users[0], study=study, assignment_id=skipped.pk)
    lapsed = claim_next(user=users[1], study=study)
    assert lapsed is not None
    Assignment.objects.filter(pk=lapsed.pk).update(lease_expires_at=timezone.now() - timedelta(minutes=1))
    change_status(study=study, status=Study.Status.CLOSED)  # closes the lapsed lease: timed out
    untouched = Item.objects.filter(study=study, assignments__isnull=True).order_by("pk").first()
    assert untouched is not None  # which items the annotators met depends on their ids: import where none did
    lines = [{"item": untouched.external_id, "annotator": "x", "label": "inconclusive", "active_ms": 2500}]
    import_annotations(study=study, stream=jsonl(*lines), fmt="jsonl")
    expected = counted_from_rows(study)
    assert counted(study) == expected
    assert all(any(counts) for counts in expected.quality.values()) and expected.times
    AnnotatorCount.objects.update(timed=0, abstained=0, gold_n=0, gold_correct=0, imported=0, skipped=0, timed_out=0)
    ActiveTimeBucket.objects.all().delete()
    assert counted(study) != expected
    migration = importlib.import_module("annotation.migrations.0035_progress_quality_counters")
    migration.fill_quality(apps, connection.schema_editor())
    assert counted(study) == expected
    AnnotatorCount.objects.filter(study=study).update(skipped=7)
    ActiveTimeBucket.objects.filter(study=study).update(labels=9)
    recount_study(study)  # and a recount repairs drifted ones
    assert counted(study) == expected


def test_the_page_states_the_medians_error(client, make_user):
    """The footnote under the annotator table says how close the medians shown are (the sketch's error)."""
    researcher = make_user("rita")
    make_user("p1")
    study = _study("stated", items=2, annotators=["p1"], n=1)
    client.force_login(researcher)
    html = client.get(reverse("annotation:study_progress", args=[study.slug]), {"quality": "now"}).content.decode()
    assert f"within {SKETCH_ERROR_TEXT} of the exact median" in html
    assert SKETCH_ERROR_TEXT == "0.78% (1/128)" and RELATIVE_ERROR == 1 / 128
