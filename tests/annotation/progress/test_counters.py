"""The counters behind the home page and the study overview (issue 15, point 3; progress/counters.py).

They must equal a count from the rows after every write, whatever the write;
the pages that read them must issue as many queries for a big study as for a
small one; `manage.py recount_study` and the data migration rebuild them.
"""

from __future__ import annotations

import importlib
import io
import random
import time

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.adjudication.services import adjudicate, verdict_for
from annotation.errors import ImportFailed, ServiceError
from annotation.members.membership import remove_member
from annotation.members.services import add_members
from annotation.models import Annotation, AnnotatorCount, Assignment, DomainCount, Item, Study, StudyMember
from annotation.progress.counters import recount_study
from annotation.progress.selectors import study_counts
from annotation.progress.tally import counted, counted_from_rows
from annotation.studies.selectors import my_studies
from annotation.studies.services import create_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from annotation.workbench.services import SubmittedAnswer, claim_next, skip, submit
from tests.conftest import jsonl, verification_item
from tests.support.threads import as_a_client, run_in_threads

LABELS = ("supported", "contradicted", "inconclusive")
DOMAINS = ("bio", "science", "history")


def _assert_exact(study: Study) -> None:
    """The counters equal a recount; and every answer carries its assignment's study (the report's fingerprint
    reads answers by that copy, migrations 0016-0017)."""
    study.refresh_from_db()
    assert counted(study) == counted_from_rows(study)
    assert not Annotation.objects.exclude(study_id=F("assignment__study_id")).exists()


def _study(slug: str, *, items: int, annotators: list[str], n: int, researcher: str = "rita") -> Study:
    # a fixed seed: the annotators' item orders come from it, so the random-writes test replays the same writes
    study = create_study(slug=slug, name=slug, kind="verification", annotators_per_item=n, seed=15)
    add_members(study=study, usernames=[researcher], role="researcher")
    add_members(study=study, usernames=annotators, role="annotator")
    records = [
        verification_item(f"c-{k:03d}", domain=DOMAINS[k % len(DOMAINS)], **({"gold": "supported"} if k % 4 else {}))
        for k in range(items)
    ]
    import_items(study=study, stream=jsonl(*records), fmt="jsonl")
    study.refresh_from_db()
    return study


@pytest.mark.django_db
def test_counters_equal_a_recount_after_every_kind_of_write(make_user):
    """Random submits, revisions, skips, item imports (new and --update moving domains and gold),
    annotation imports with --update, adjudications and member removals, in one study: after
    each, the counters equal a count from the rows, and the pages' numbers come from them."""
    rng = random.Random(15)
    researcher = make_user("rita")
    names = ["a1", "a2", "a3", "a4"]
    users = [make_user(name) for name in names]
    study = _study("random-ops", items=10, annotators=names, n=2)
    _assert_exact(study)
    active = list(users)
    next_item = 10
    done: dict[str, int] = {}
    refused: list[str] = []  # writes a service refused (e.g. a removed member's submit): they must change nothing
    for _ in range(70):
        operation = rng.choice(
            ["submit", "submit", "submit", "revise", "skip", "items", "labels", "adjudicate", "remove"]
        )
        user = rng.choice(users)
        try:
            if operation == "submit" or operation == "skip":
                assignment = claim_next(user=user, study=study)
                if assignment is not None and operation == "submit":
                    submit(
                        user=user, study=study, assignment_id=assignment.pk, answer=SubmittedAnswer(rng.choice(LABELS))
                    )
                elif assignment is not None:
                    skip(user=user, study=study, assignment_id=assignment.pk)
            elif operation == "revise":
                mine = Assignment.objects.filter(study=study, annotator=user, status=Assignment.Status.SUBMITTED)
                picked = rng.choice(list(mine.order_by("pk"))) if mine.exists() else None  # seeded, unlike "?"
                if picked is not None:
                    submit(user=user, study=study, assignment_id=picked.pk, answer=SubmittedAnswer(rng.choice(LABELS)))
            elif operation == "items":
                records = [verification_item(f"c-{next_item + k:03d}", domain=rng.choice(DOMAINS)) for k in range(2)]
                if rng.random() < 0.5:  # an update of an existing item: a recount; else new items only: added
                    existing = rng.randrange(next_item)
                    moved = rng.choice((*DOMAINS, "moved"))
                    records.append(verification_item(f"c-{existing:03d}", domain=moved, gold=rng.choice(LABELS)))
                next_item += 2
                import_items(study=study, stream=jsonl(*records), fmt="jsonl", update=True)
            elif operation == "labels":
                worker = rng.choice(["x1", "x2"])
                rows = [
                    {"item": f"c-{rng.randrange(next_item):03d}", "annotator": worker, "label": rng.choice(LABELS)}
                    for _ in range(3)
                ]
                rows = list({row["item"]: row for row in rows}.values())
                import_annotations(study=study, stream=jsonl(*rows), fmt="jsonl", update=True)
                done[worker] = done.get(worker, 0) + 1
            elif operation == "adjudicate":
                item = rng.choice(list(Item.objects.filter(study=study).order_by("pk")))
                adjudicate(item=item, adjudicator=researcher, verdict=verdict_for(study, label=rng.choice(LABELS)))
            elif operation == "remove" and len(active) > 2:
                gone = active.pop(rng.randrange(len(active)))
                remove_member(study=study, member=StudyMember.objects.get(study=study, user=gone))
        except (ImportFailed, ServiceError) as exc:
            refused.append(f"{operation}: {exc}")
        _assert_exact(study)  # after a refused write too
    assert len(refused) < 35, refused  # most of the random writes went through
    totals = counted_from_rows(study)
    counts = study_counts(study)
    assert counts["annotations"] == sum(totals.annotators.values()) >= 15  # of 70 random writes, a quarter answers
    assert counts["items"] == Item.objects.filter(study=study).count()
    assert counts["items_complete"] == totals.complete > 0
    assert done, "no annotation import ran"
    home = next(row for row in my_studies(researcher) if row.study.pk == study.pk)
    assert (home.items, home.annotations, home.items_complete) == (
        counts["items"],
        counts["annotations"],
        totals.complete,
    )


@pytest.mark.django_db(transaction=True)
def test_an_item_reaches_n_labels_once_even_when_its_last_labels_come_in_a_race(make_user):
    """Exactly one of the two annotators who give an item its last labels counts it complete."""
    users = [make_user(name) for name in ("r1", "r2", "r3")]
    make_user("rita")
    study = _study("race-complete", items=1, annotators=["r1", "r2", "r3"], n=3)
    held = [claim_next(user=user, study=study) for user in users]
    assert all(assignment is not None for assignment in held)
    submit(user=users[0], study=study, assignment_id=held[0].pk, answer=SubmittedAnswer("supported"))
    run_in_threads(
        [
            lambda user=user, assignment=assignment: submit(
                user=user, study=study, assignment_id=assignment.pk, answer=SubmittedAnswer("contradicted")
            )
            for user, assignment in zip(users[1:], held[1:], strict=True)
        ]
    )
    assert study_counts(study)["items_complete"] == 1
    _assert_exact(study)


def _queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


@pytest.mark.django_db
def test_home_page_and_overview_issue_as_many_queries_for_a_big_study_as_for_a_small_one(client, make_user):
    """5 items, 2 annotators, 1 domain and a few labels against 200 items, 6 annotators, 3 domains
    and 300 labels: each researcher's home page, and each overview, issue the same number of queries."""
    for name in ("small-r", "big-r", "s1", "s2", *[f"b{k}" for k in range(6)]):
        make_user(name)
    small = create_study(slug="small", name="small", kind="verification", annotators_per_item=2)
    add_members(study=small, usernames=["small-r"], role="researcher")
    add_members(study=small, usernames=["s1", "s2"], role="annotator")
    import_items(study=small, stream=jsonl(*(verification_item(f"c-{k}", domain="bio") for k in range(5))), fmt="jsonl")
    import_annotations(study=small, stream=jsonl({"item": "c-0", "annotator": "x", "label": "supported"}), fmt="jsonl")
    big = _study("big", items=200, annotators=[f"b{k}" for k in range(6)], n=3, researcher="big-r")
    labels = [
        {"item": f"c-{k:03d}", "annotator": worker, "label": "supported"}
        for k in range(100)
        for worker in ("x", "y", "z")
    ]
    import_annotations(study=big, stream=jsonl(*labels), fmt="jsonl")
    for user in get_user_model().objects.filter(username__in=["b0", "b1"]):
        assignment = claim_next(user=user, study=big)
        assert assignment is not None
        submit(user=user, study=big, assignment_id=assignment.pk, answer=SubmittedAnswer("supported"))
    queries = {}
    for researcher, study in (("small-r", small), ("big-r", big)):
        client.force_login(get_user_model().objects.get(username=researcher))
        home = _queries(client, reverse("annotation:my_studies"))
        overview = _queries(client, reverse("annotation:study_detail", args=[study.slug]))
        queries[study.slug] = (home, overview)
    assert queries["small"] == queries["big"], queries
    html = client.get(reverse("annotation:study_detail", args=["big"])).content.decode()
    assert ">302<" in html and ">100<" in html  # annotations; items with all 3 labels


@pytest.mark.django_db
def test_recount_study_repairs_drifted_counters_and_says_so(make_user):
    make_user("rita")
    make_user("a1")
    study = _study("drift", items=6, annotators=["a1"], n=1)
    import_annotations(
        study=study,
        stream=jsonl(*({"item": f"c-{k:03d}", "annotator": "x", "label": "supported"} for k in range(4))),
        fmt="jsonl",
    )
    right = counted(study)
    out = io.StringIO()
    call_command("recount_study", "drift", stdout=out)
    assert out.getvalue().strip() == "drift: 6 items, 4 annotations, 4 items complete; unchanged"
    AnnotatorCount.objects.filter(study=study).update(annotations=0, complete=0)
    DomainCount.objects.filter(study=study).delete()
    assert counted(study) != right
    out = io.StringIO()
    call_command("recount_study", "--all", stdout=out)
    assert "drift: 6 items, 4 annotations, 4 items complete; corrected (the counters had drifted)" in out.getvalue()
    assert counted(study) == right == counted_from_rows(study)
    with pytest.raises(CommandError, match="name one study, or give --all"):
        call_command("recount_study")
    with pytest.raises(CommandError, match="name one study, or give --all"):
        call_command("recount_study", "drift", "--all")
    with pytest.raises(CommandError, match="no study 'nope'"):
        call_command("recount_study", "nope")


@pytest.mark.django_db
def test_the_data_migration_counts_existing_studies(make_user):
    """Counters of studies made before the counters existed: the migration's fill gives the recount's figures."""
    make_user("rita")
    make_user("a1")
    study = _study("existing", items=9, annotators=["a1"], n=2)
    labels = [{"item": f"c-{k:03d}", "annotator": worker, "label": "supported"} for k in range(5) for worker in "xy"]
    labels.append({"item": "c-007", "annotator": "x", "label": "contradicted"})
    import_annotations(study=study, stream=jsonl(*labels), fmt="jsonl")
    expected = counted_from_rows(study)
    AnnotatorCount.objects.all().delete()
    DomainCount.objects.all().delete()
    migration = importlib.import_module("annotation.migrations.0015_counters")
    migration.fill_counters(apps, None)
    importlib.import_module("annotation.migrations.0035_progress_quality_counters").fill_quality(
        apps, connection.schema_editor()
    )
    assert counted(study) == expected
    assert expected.complete == 5 and sum(expected.annotators.values()) == 11
    recount_study(study)
    assert counted(study) == expected


@pytest.mark.django_db
def test_the_migration_gives_existing_answers_their_assignments_study(make_user):
    """0016's fill, run on answers whose study copy is wrong, puts each answer's assignment's study there."""
    make_user("rita")
    make_user("a1")
    first = _study("first", items=3, annotators=["a1"], n=1)
    second = _study("second", items=3, annotators=["a1"], n=1)
    for study in (first, second):
        rows = [{"item": f"c-{k:03d}", "annotator": "x", "label": "supported"} for k in range(3)]
        import_annotations(study=study, stream=jsonl(*rows), fmt="jsonl")
    Annotation.objects.update(study=first)  # the second study's answers now point at the wrong study
    assert Annotation.objects.exclude(study_id=F("assignment__study_id")).count() == 3
    migration = importlib.import_module("annotation.migrations.0016_annotation_study")
    with connection.cursor() as cursor:
        cursor.execute(migration.FILL)
    assert not Annotation.objects.exclude(study_id=F("assignment__study_id")).exists()
    assert Annotation.objects.filter(study=second).count() == 3


@pytest.mark.django_db(transaction=True)
def test_counters_stay_exact_when_many_annotators_work_at_once(make_user):
    """8 annotators claim and answer (now and then skipping) a 20-item study with N=3 until nothing is left."""
    names = [f"w{k}" for k in range(8)]
    users = [make_user(name) for name in names]
    make_user("rita")
    study = _study("crowd", items=20, annotators=names, n=3)
    give_up_at = time.monotonic() + 60

    def work(user, seed: int) -> int:
        rng = random.Random(seed)
        answered = 0
        while True:
            assignment = as_a_client(claim_next, user=user, study=study)
            if assignment is None:
                # Nothing for this annotator now; but a slot another one holds may still be skipped and
                # come back, even after this one looked (a worker that stopped when no slot was held
                # left one unanswered: 59 of 60, once in a while). So each works on until the study is
                # full, as a crowd would, or gives up after a minute (then the count says so).
                if study_counts(study)["items_complete"] == 20 or time.monotonic() > give_up_at:
                    return answered
                time.sleep(0.01)
                continue
            if rng.random() < 0.1:
                as_a_client(skip, user=user, study=study, assignment_id=assignment.pk)
                continue
            answer = SubmittedAnswer(rng.choice(LABELS))
            as_a_client(submit, user=user, study=study, assignment_id=assignment.pk, answer=answer)
            answered += 1

    answered = run_in_threads([lambda user=user, seed=seed: work(user, seed) for seed, user in enumerate(users)])
    counts = study_counts(study)
    assert counts["annotations"] == sum(answered) == 60
    assert counts["items_complete"] == 20
    _assert_exact(study)


@pytest.mark.django_db
def test_each_items_answers_are_filled_by_the_migration_and_repaired_by_a_recount(make_user, monkeypatch):
    """Item.n_answers of items made before it existed (0021's fill), and after it drifted (recount_study)."""
    make_user("rita")
    make_user("a1")
    study = _study("answers", items=6, annotators=["a1"], n=2)
    labels = [{"item": f"c-{k:03d}", "annotator": worker, "label": "supported"} for k in range(3) for worker in "xy"]
    labels.append({"item": "c-004", "annotator": "x", "label": "contradicted"})
    import_annotations(study=study, stream=jsonl(*labels), fmt="jsonl")
    expected = counted_from_rows(study)
    assert expected.answers == {item.pk: n for item, n in zip(_items(study, 0, 1, 2, 4), (2, 2, 2, 1), strict=True)}
    assert counted(study) == expected
    Item.objects.filter(study=study).update(n_answers=0)  # as the new column starts out
    migration = importlib.import_module("annotation.migrations.0021_item_answers")
    monkeypatch.setattr(migration, "BATCH", 4)  # the study's 6 items in two batches
    migration.fill_answers(apps, None)
    assert counted(study) == expected
    Item.objects.filter(study=study, external_id="c-000").update(n_answers=7)
    out = io.StringIO()
    call_command("recount_study", "answers", stdout=out)
    assert "corrected (the counters had drifted)" in out.getvalue()
    assert counted(study) == expected


def _items(study: Study, *numbers: int) -> list[Item]:
    return [Item.objects.get(study=study, external_id=f"c-{k:03d}") for k in numbers]
