"""Adaptive overlap (issue 33): "N from n_min to n_max: another annotator only while the answers so far do not
reach k in agreement". Slots open and close under exact N's guarantees: no item above n_max, none closed
before its rule is met, nobody twice on an item; the counters, the progress page and imports follow."""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.errors import ImportFailed, ServiceError
from annotation.models import Annotation, AnnotatorCount, Assignment, Item, Study, StudyMember
from annotation.progress.selectors import items_in_state
from annotation.progress.tally import counted_from_rows
from annotation.studies.services import duplicate_study, update_study
from annotation.workbench.services import SubmittedAnswer, claim_next, skip, submit
from tests.conftest import jsonl, verification_item
from tests.support.assignment_study import make_study
from tests.support.threads import as_a_client, run_in_threads

ADAPTIVE = {"adaptive_min_n": 2, "adaptive_agreement": 2}


def _answer(user, study, assignment, label):
    return submit(user=user, study=study, assignment_id=assignment.pk, answer=SubmittedAnswer(label=label))


def _answers(item_id) -> list[str]:
    return list(Annotation.objects.filter(assignment__item_id=item_id).values_list("label", flat=True))


def _claim_and_answer(user, study, label):
    assignment = claim_next(user=user, study=study)
    assert assignment is not None
    _answer(user, study, assignment, label)
    return assignment


@pytest.mark.django_db
def test_two_who_agree_close_the_item_and_a_third_is_never_asked():
    study, users = make_study(items=1, n=3, annotators=3, **ADAPTIVE)
    item = Item.objects.get(study=study)
    assert item.slots_taken == 1  # N - n_min unopened slots count as taken
    _claim_and_answer(users[0], study, "supported")
    _claim_and_answer(users[1], study, "supported")
    item.refresh_from_db()
    assert (item.closed_after, item.slots_taken) == (2, 3)
    assert claim_next(user=users[2], study=study) is None
    assert sum(AnnotatorCount.objects.filter(study=study).values_list("complete", flat=True)) == 1
    assert items_in_state(study, "complete") == 1 and items_in_state(study, "open") == 0


@pytest.mark.django_db
def test_two_who_disagree_open_a_third_slot_and_the_third_answer_completes_the_item():
    study, users = make_study(items=1, n=3, annotators=4, **ADAPTIVE)
    _claim_and_answer(users[0], study, "supported")
    assert claim_next(user=users[0], study=study) is None  # nobody twice
    _claim_and_answer(users[1], study, "contradicted")
    item = Item.objects.get(study=study)
    assert (item.closed_after, item.slots_taken) == (None, 2)  # one more slot open
    assert items_in_state(study, "open") == 1 and items_in_state(study, "complete") == 0
    third = _claim_and_answer(users[2], study, "contradicted")
    assert third.slot == 2
    item.refresh_from_db()
    assert item.slots_taken == 3 and item.closed_after is None  # N reached: complete as in any study
    assert claim_next(user=users[3], study=study) is None
    assert sum(AnnotatorCount.objects.filter(study=study).values_list("complete", flat=True)) == 1


@pytest.mark.django_db
def test_no_decision_while_a_lease_is_out_and_a_skip_gives_its_slot_back():
    study, users = make_study(items=1, n=3, annotators=4, **ADAPTIVE)
    first = claim_next(user=users[0], study=study)
    second = claim_next(user=users[1], study=study)
    assert claim_next(user=users[2], study=study) is None  # n_min slots, both out
    _answer(users[0], study, first, "supported")
    item = Item.objects.get(study=study)
    assert item.slots_taken == 3 and item.closed_after is None  # one answer: the other lease decides later
    skip(user=users[1], study=study, assignment_id=second.pk)
    replacement = claim_next(user=users[2], study=study)
    assert replacement is not None and replacement.slot == second.slot
    _answer(users[2], study, replacement, "supported")
    item.refresh_from_db()
    assert item.closed_after == 2


@pytest.mark.django_db
def test_a_preference_study_compares_the_direction_not_the_strength():
    study, users = make_study("preference", items=1, n=3, annotators=3, **ADAPTIVE)
    for user, choice in zip(users[:2], ("left_strong", "left_slight"), strict=True):
        assignment = claim_next(user=user, study=study)
        # the same system preferred, whichever side each saw it on
        side = "left" if assignment.left_system == study.systems[0] else "right"
        strength = choice.split("_")[1]
        submit(
            user=user,
            study=study,
            assignment_id=assignment.pk,
            answer=SubmittedAnswer(choice=f"{side}_{strength}"),
            shown_left=assignment.left_system,
        )
    labels = sorted(_answers(Item.objects.get(study=study).pk))
    assert labels == ["a_slight", "a_strong"]
    assert Item.objects.get(study=study).closed_after == 2


@pytest.mark.parametrize("k, closes_after", [(2, 2), (3, None)])
@pytest.mark.django_db
def test_k_is_the_matching_answers_needed(k, closes_after):
    study, users = make_study(items=1, n=4, annotators=4, adaptive_min_n=2, adaptive_agreement=k)
    assert Item.objects.get(study=study).slots_taken == 2
    _claim_and_answer(users[0], study, "supported")
    _claim_and_answer(users[1], study, "supported")
    item = Item.objects.get(study=study)
    assert item.closed_after == closes_after
    if k == 3:  # two agree, a third is needed to reach three
        _claim_and_answer(users[2], study, "supported")
        item.refresh_from_db()
        assert item.closed_after == 3 and item.slots_taken == 4


def _scripted_label(item_id: int, user_id: int) -> str:
    """A label drawn from the pair's hash: disagreement on about half the pairs, the same in every run."""
    digest = hashlib.blake2b(f"{item_id}:{user_id}".encode(), digest_size=2).digest()
    return "supported" if digest[0] % 2 else "contradicted"


def _work_until_nothing_is_left(user, study) -> int:
    done = 0
    while True:
        assignment = as_a_client(claim_next, user=user, study=study)
        if assignment is None:
            return done
        as_a_client(
            submit,
            user=user,
            study=study,
            assignment_id=assignment.pk,
            answer=SubmittedAnswer(label=_scripted_label(assignment.item_id, user.pk)),
        )
        done += 1


@pytest.mark.django_db(transaction=True)
def test_annotators_working_at_once_keep_every_item_between_n_min_and_n_and_close_only_on_the_rule():
    """Both databases (make test-pg): eight annotators claim and answer at once, then the study is finished."""
    study, users = make_study(items=12, n=3, annotators=8, **ADAPTIVE)
    run_in_threads([lambda user=user: _work_until_nothing_is_left(user, study) for user in users])
    for user in users:  # slots opened after someone had stopped: finish the study
        _work_until_nothing_is_left(user, study)
    answers_by_item: dict[int, list[str]] = defaultdict(list)
    annotators_by_item: dict[int, list[int]] = defaultdict(list)
    for item_id, annotator, label in Annotation.objects.filter(study=study).values_list(
        "assignment__item_id", "assignment__annotator_id", "label"
    ):
        answers_by_item[item_id].append(label)
        annotators_by_item[item_id].append(annotator)
    items = {item.pk: item for item in Item.objects.filter(study=study)}
    assert set(answers_by_item) == set(items)
    for item_id, labels in answers_by_item.items():
        item = items[item_id]
        agree = max(Counter(labels).values())
        assert 2 <= len(labels) <= 3, labels  # never below n_min once finished, never above N
        assert len(set(annotators_by_item[item_id])) == len(labels)  # nobody twice
        if item.closed_after is not None:
            assert item.closed_after == len(labels) == 2 and agree >= 2  # closed only on the rule
        else:
            assert len(labels) == 3 and Counter(labels[:2]).most_common(1)[0][1] < 2  # went on only on disagreement
        assert item.slots_taken == 3
    slots = Assignment.objects.filter(study=study).exclude(slot=None).values_list("item_id", "slot")
    assert all(0 <= slot < 3 for _, slot in slots) and len(set(slots)) == len(slots)
    # the counters count each item complete exactly once, as a recount from the rows does
    complete = sum(AnnotatorCount.objects.filter(study=study).values_list("complete", flat=True))
    assert complete == 12 == counted_from_rows(study).complete
    saved = sum(3 - len(labels) for labels in answers_by_item.values())
    assert saved == sum(1 for item in items.values() if item.closed_after is not None) > 0


@pytest.mark.django_db
def test_settings_are_checked_shift_the_counters_and_freeze_after_the_first_answer():
    study, users = make_study(items=2, n=3, annotators=2)
    assert set(Item.objects.filter(study=study).values_list("slots_taken", flat=True)) == {0}
    with pytest.raises(ServiceError, match="needs both adaptive_min_n"):
        update_study(study=study, changes={"adaptive_min_n": 2})
    with pytest.raises(ServiceError, match="adaptive_min_n must be from 1 to 2"):
        update_study(study=study, changes={"adaptive_min_n": 3, "adaptive_agreement": 2})
    with pytest.raises(ServiceError, match="adaptive_agreement must be from 2 to 3"):
        update_study(study=study, changes={"adaptive_min_n": 2, "adaptive_agreement": 4})
    held = claim_next(user=users[0], study=study)  # a lease out before the change keeps its slot
    update_study(study=study, changes=ADAPTIVE)
    counters = dict(Item.objects.filter(study=study).values_list("pk", "slots_taken"))
    assert counters[held.item_id] == 2 and sorted(counters.values()) == [1, 2]
    update_study(study=study, changes={"annotators_per_item": 4})  # N - n_min grows by one
    assert sorted(Item.objects.filter(study=study).values_list("slots_taken", flat=True)) == [2, 3]
    update_study(study=study, changes={"annotators_per_item": 3})
    _answer(users[0], study, held, "supported")
    with pytest.raises(ServiceError, match="adaptive_min_n cannot change after the first annotation"):
        update_study(study=study, changes={"adaptive_min_n": 1})
    update_study(study=Study.objects.get(pk=study.pk), changes={"name": "renamed"})  # other settings still can


@pytest.mark.django_db
def test_turning_it_off_before_any_answer_gives_the_slots_back():
    study, _ = make_study(items=2, n=3, annotators=0, **ADAPTIVE)
    update_study(study=study, changes={"adaptive_min_n": None, "adaptive_agreement": None})
    assert set(Item.objects.filter(study=study).values_list("slots_taken", flat=True)) == {0}


@pytest.mark.django_db
def test_not_with_exact_n_per_condition():
    with pytest.raises(ServiceError, match="cannot be combined with exact N per condition"):
        make_study(items=1, n=3, annotators=0, conditions=["a", "b"], exact_n_per="condition", **ADAPTIVE)


@pytest.mark.django_db
def test_items_imported_later_and_copies_start_with_their_unopened_slots():
    from annotation.transfer.services.item_import import import_items

    study, _ = make_study(items=1, n=3, annotators=0, **ADAPTIVE)
    import_items(study=study, stream=jsonl(verification_item("later")), fmt="jsonl")
    assert Item.objects.get(study=study, external_id="later").slots_taken == 1
    copy = duplicate_study(study=study, slug="copy", copy_items=True)
    assert copy.adaptive_min_n == 2 and copy.adaptive_agreement == 2
    assert set(Item.objects.filter(study=copy).values_list("slots_taken", flat=True)) == {1}
    assert items_in_state(copy, "untouched") == 2 and items_in_state(copy, "open") == 0


@pytest.mark.django_db
def test_new_labels_cannot_be_imported_into_an_adaptive_study():
    from annotation.transfer.services.annotation_import import import_annotations

    study, _ = make_study(items=1, n=3, annotators=0, **ADAPTIVE)
    with pytest.raises(ImportFailed, match="adaptive overlap"):
        import_annotations(
            study=study, stream=jsonl({"item": "i-0", "annotator": "ext", "label": "supported"}), fmt="jsonl"
        )
    assert not Assignment.objects.filter(study=study).exists()


@pytest.mark.django_db
def test_the_page_the_api_and_the_command_line_offer_it(client):
    from annotation.members.services import add_members

    study, _ = make_study(items=1, n=3, annotators=0)
    add_members(study=study, usernames=["boss"], role="researcher")
    client.force_login(StudyMember.objects.get(study=study, user__username="boss").user)
    url = reverse("api-study-detail", args=[study.slug])
    assert client.get(url).json()["adaptive_min_n"] is None
    refused = client.patch(url, {"adaptive_min_n": 2}, content_type="application/json")
    assert refused.status_code == 400 and "adaptive_agreement" in refused.content.decode()
    changed = client.patch(url, ADAPTIVE, content_type="application/json")
    assert changed.status_code == 200, changed.content
    assert changed.json()["adaptive_min_n"] == 2 and changed.json()["adaptive_agreement"] == 2
    page = client.get(reverse("annotation:study_settings", args=[study.slug])).content.decode()
    assert 'name="adaptive_min_n"' in page and 'name="adaptive_agreement"' in page
    call_command(
        "create_study", "cli", "--name=CLI", "--kind=verification", "--annotators-per-item=3", "--adaptive=2:2"
    )
    assert Study.objects.get(slug="cli").adaptive_min_n == 2


@pytest.mark.django_db
def test_the_report_states_how_agreement_treats_the_varying_n_and_alpha_uses_every_item():
    """Alpha against the krippendorff library on the same labels; Fleiss' fixed-N kappa undefined, with why."""
    import krippendorff
    import numpy as np

    from metaeval.reporting import build_report

    study, users = make_study(items=8, n=3, annotators=4, **ADAPTIVE)
    for user in users:
        _work_until_nothing_is_left(user, study)
    report = build_report(study)
    adaptive = report["adaptive_overlap"]
    closed = Item.objects.filter(study=study, closed_after__isnull=False).count()
    assert adaptive["n_items_closed_early"] == closed > 0 and adaptive["labels_saved"] == closed
    agreement = report["agreement"]
    assert agreement["fleiss_kappa"]["value"] is None and "adaptive overlap" in agreement["fleiss_kappa"]["reason"]
    assert agreement["variable_n"].startswith("adaptive overlap: items have 2 to 3 labels")
    rows = Annotation.objects.filter(study=study).values_list(
        "assignment__item_id", "assignment__annotator_id", "label"
    )
    items = sorted({r[0] for r in rows})
    people = sorted({r[1] for r in rows})
    matrix = np.full((len(people), len(items)), np.nan)
    codes = {label: code for code, label in enumerate(study.labels)}
    for item_id, annotator, label in rows:
        matrix[people.index(annotator), items.index(item_id)] = codes[label]
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal", value_domain=[0, 1, 2])
    assert agreement["krippendorff_alpha"]["value"] == pytest.approx(expected, abs=1e-9)
    assert agreement["krippendorff_alpha"]["n_items"] == 8


@pytest.mark.django_db
def test_expected_labels_shrink_as_items_close_and_the_progress_page_shows_slots_in_use(client):
    from annotation.members.services import add_members
    from annotation.progress.selectors import study_counts

    study, users = make_study(items=2, n=3, annotators=3, **ADAPTIVE)
    assert study_counts(study)["expected"] == 6
    _claim_and_answer(users[0], study, "supported")
    _claim_and_answer(users[1], study, "supported")  # the same item: it closes after 2
    assert study_counts(study)["expected"] == 5 and study_counts(study)["items_complete"] == 1
    add_members(study=study, usernames=["boss"], role="researcher")
    client.force_login(StudyMember.objects.get(study=study, user__username="boss").user)
    page = client.get(reverse("annotation:study_progress", args=[study.slug])).content.decode()
    assert "2 / 3" in page and "0 / 3" in page  # answers and leases, not the counter's unopened slots


@pytest.mark.django_db
def test_the_csv_report_and_the_report_page_carry_the_rule(client):
    import csv
    import io

    from annotation.members.services import add_members
    from metaeval.reporting import build_report
    from metaeval.reporting.csv_format import report_csv

    study, users = make_study(items=1, n=3, annotators=2, **ADAPTIVE)
    _claim_and_answer(users[0], study, "supported")
    _claim_and_answer(users[1], study, "supported")
    rows = list(csv.DictReader(io.StringIO(report_csv(build_report(study)))))
    saved = next(row for row in rows if row["section"] == "adaptive_overlap" and row["statistic"] == "labels_saved")
    assert saved["value"] == "1" and "Fleiss' fixed-N kappa is not given" in saved["note"]
    add_members(study=study, usernames=["boss"], role="researcher")
    client.force_login(StudyMember.objects.get(study=study, user__username="boss").user)
    page = client.get(reverse("metaeval:report", args=[study.slug])).content.decode()
    assert 'id="adaptive-overlap"' in page and "1 items closed early" in page
