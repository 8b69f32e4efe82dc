"""Exact N per item in each condition (issue 32: "or per condition, as the researcher chooses"): every item
is labelled by N annotators of every condition, each condition within its own slot range, with the
item's counterbalancing holding inside each condition; lapsed leases go only to the same condition;
the setting is offered on the page, the API and the command line, and frozen after the first answer."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from annotation.errors import ServiceError
from annotation.models import AnnotatorCount, Assignment, Study, StudyMember
from annotation.studies.services import update_study
from annotation.workbench.services import claim_next, lease_length
from metaeval.reporting import build_report
from tests.support.assignment_study import make_study
from tests.support.threads import as_a_client, run_in_threads

CONDITIONS = ["control", "shown:judge"]


def _label_everything(client, study, users, label="supported"):
    for user in users:
        client.force_login(user)
        while (response := client.post(reverse("api-assignment-next", args=[study.slug]))).status_code == 200:
            done = client.post(
                reverse("api-assignment-submit", args=[response.json()["assignment"]["id"]]),
                {"label": label},
                content_type="application/json",
            )
            assert done.status_code == 200, done.content
        assert response.status_code == 204, response.content


def _conditions_by_user(study):
    return dict(StudyMember.objects.filter(study=study).values_list("user_id", "condition"))


@pytest.mark.django_db
def test_every_item_gets_n_answers_from_each_condition_within_its_slot_range(client):
    study, users = make_study(items=6, n=2, annotators=6, conditions=CONDITIONS, exact_n_per="condition")
    assert study.slots_per_item == 4
    _label_everything(client, study, users)
    condition = _conditions_by_user(study)
    per_item: dict[int, Counter] = defaultdict(Counter)
    for assignment in Assignment.objects.filter(study=study, status="submitted"):
        key = condition[assignment.annotator_id]
        per_item[assignment.item_id][key] += 1
        first = 0 if key == "control" else 2  # the c-th condition's range: slots c*N .. c*N + N - 1
        assert first <= assignment.slot < first + 2
        assert assignment.max_slots == 4
    assert len(per_item) == 6
    assert all(counts == {"control": 2, "shown": 2} for counts in per_item.values()), per_item
    # every item complete, counted once: the annotators' counters agree with the items
    assert sum(AnnotatorCount.objects.filter(study=study).values_list("complete", flat=True)) == 6
    report = build_report(study)
    assert report["annotators_per_item"] == 4
    assert report["conditions"]["exact_n_rule"].startswith("exact N holds per item in each condition")


@pytest.mark.django_db
def test_per_item_mode_still_lets_any_condition_take_an_items_n_slots(client):
    study, users = make_study(items=6, n=2, annotators=4, conditions=CONDITIONS)
    assert study.exact_n_per == "item" and study.slots_per_item == 2
    _label_everything(client, study, users[:2])  # the first two (one per condition) take every slot
    per_item = Counter(Assignment.objects.filter(study=study, status="submitted").values_list("item_id", flat=True))
    assert sorted(per_item.values()) == [2] * 6
    assert set(_conditions_by_user(study).values()) >= {"control", "shown"}


@pytest.mark.django_db
def test_counterbalancing_holds_inside_each_condition():
    """Preference: within each condition an item's two annotators see the systems in both placements."""
    study, users = make_study("preference", items=8, n=2, annotators=4, conditions=CONDITIONS, exact_n_per="condition")
    for user in users:
        while (assignment := claim_next(user=user, study=study)) is not None:
            Assignment.objects.filter(pk=assignment.pk).update(status="submitted")
    condition = _conditions_by_user(study)
    sides: dict[tuple[int, str], list[str]] = defaultdict(list)
    for assignment in Assignment.objects.filter(study=study):
        sides[(assignment.item_id, condition[assignment.annotator_id])].append(assignment.left_system)
    assert len(sides) == 16
    assert all(sorted(left) == sorted(study.systems) for left in sides.values()), sides


@pytest.mark.django_db
def test_a_lapsed_lease_goes_only_to_someone_of_the_same_condition():
    study, users = make_study(items=1, n=1, annotators=4, conditions=CONDITIONS, exact_n_per="condition")
    holder = users[0]
    held = claim_next(user=holder, study=study)
    later = timezone.now() + lease_length() + timedelta(seconds=5)
    by_condition = defaultdict(list)
    for user in users[1:]:
        by_condition[_conditions_by_user(study).get(user.pk) or ""].append(user)
        claim_next(user=user, study=study, now=later)  # gives each their condition, then claims
    condition = _conditions_by_user(study)
    same = [user for user in users[1:] if condition[user.pk] == condition[holder.pk]]
    taken = Assignment.objects.get(pk=held.pk)
    assert taken.status == "skipped" and taken.slot is None  # the lapsed lease was taken over...
    successor = Assignment.objects.get(item_id=held.item_id, slot=held.slot)
    assert successor.annotator in same  # ...by the holder's own condition only
    assert Counter(condition[a.annotator_id] for a in Assignment.objects.filter(study=study).exclude(slot=None)) == {
        "control": 1,
        "shown": 1,
    }


@pytest.mark.django_db(transaction=True)
def test_a_crowd_racing_for_the_last_slots_of_each_condition_never_over_assigns():
    study, users = make_study(items=2, n=3, annotators=16, conditions=CONDITIONS, exact_n_per="condition")
    # as clients claim: a 503 "try again" (ClaimContention, part of the service's contract) is asked again
    results = run_in_threads([lambda user=user: as_a_client(claim_next, user=user, study=study) for user in users])
    got = [assignment for assignment in results if assignment is not None]
    assert len(got) == 12  # 2 items x 2 conditions x 3, and 4 people told there is nothing left
    condition = _conditions_by_user(study)
    assert Counter(condition.values()) == {"control": 8, "shown": 8}
    for item_id in {assignment.item_id for assignment in got}:
        rows = Assignment.objects.filter(item_id=item_id).values_list("slot", "annotator_id")
        by_condition: dict[str, list[int]] = defaultdict(list)
        for slot, annotator in rows:
            by_condition[condition[annotator]].append(slot)
        assert sorted(by_condition["control"]) == [0, 1, 2]
        assert sorted(by_condition["shown"]) == [3, 4, 5]


@pytest.mark.django_db
def test_the_setting_is_checked_offered_and_frozen_after_the_first_answer(client):
    study, users = make_study(items=2, n=1, annotators=1, conditions=CONDITIONS)
    with pytest.raises(ServiceError, match="exact_n_per must be one of item, condition, got 'study'"):
        update_study(study=study, changes={"exact_n_per": "study"})
    update_study(study=study, changes={"exact_n_per": "condition"})
    assert Study.objects.get(pk=study.pk).slots_per_item == 2
    _label_everything(client, study, users[:1])
    with pytest.raises(ServiceError, match="exact_n_per cannot change after the first annotation"):
        update_study(study=study, changes={"exact_n_per": "item"})
    # without conditions the rule changes nothing
    plain, _ = make_study(items=1, n=3, annotators=0, slug="plain", exact_n_per="condition")
    assert plain.slots_per_item == 3


@pytest.mark.django_db
def test_the_api_and_the_settings_page_show_the_rule(client):
    from annotation.members.services import add_members

    study, _ = make_study(items=1, n=2, annotators=0, conditions=CONDITIONS)
    add_members(study=study, usernames=["boss"], role="researcher")
    client.force_login(StudyMember.objects.get(study=study, user__username="boss").user)
    assert client.get(reverse("api-study-detail", args=[study.slug])).json()["exact_n_per"] == "item"
    changed = client.patch(
        reverse("api-study-detail", args=[study.slug]), {"exact_n_per": "condition"}, content_type="application/json"
    )
    assert changed.status_code == 200, changed.content
    assert Study.objects.get(pk=study.pk).exact_n_per == "condition"
    page = client.get(reverse("annotation:study_settings", args=[study.slug])).content.decode()
    assert 'name="exact_n_per"' in page and "N per item in each condition" in page


@pytest.mark.django_db
def test_create_study_takes_conditions_the_rule_and_questionnaires(tmp_path, capsys):
    questionnaires = tmp_path / "q.yaml"
    questionnaires.write_text('pre:\n  - {key: age, type: number, prompt: "Your age"}\n', encoding="utf-8")
    call_command(
        "create_study",
        "cli",
        "--name=CLI",
        "--kind=verification",
        "--annotators-per-item=2",
        "--conditions=control,shown:judge",
        "--exact-n-per=condition",
        f"--questionnaires={questionnaires}",
    )
    study = Study.objects.get(slug="cli")
    assert [c["key"] for c in study.conditions] == ["control", "shown"]
    assert study.slots_per_item == 4 and study.questionnaires["pre"][0]["key"] == "age"
    assert "conditions control, shown (4 labels per item)" in capsys.readouterr().out


@pytest.mark.django_db
def test_someone_outside_the_study_is_refused_not_failed(client):
    study, _ = make_study(items=1, n=1, annotators=0, conditions=CONDITIONS, exact_n_per="condition")
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.create_user("stranger", password="x"))
    assert client.post(reverse("api-assignment-next", args=[study.slug])).status_code in (403, 404)


@pytest.mark.django_db
def test_labels_without_a_condition_cannot_be_imported_into_a_per_condition_study():
    """An imported label would take a slot of some condition's range and leave that condition short of N."""
    from annotation.errors import ImportFailed
    from annotation.transfer.services.annotation_import import import_annotations
    from tests.conftest import jsonl

    study, _ = make_study(items=2, n=1, annotators=0, conditions=CONDITIONS, exact_n_per="condition")
    with pytest.raises(ImportFailed, match="exact N per condition"):
        import_annotations(
            study=study, stream=jsonl({"item": "i-0", "annotator": "ext", "label": "supported"}), fmt="jsonl"
        )
    assert not Assignment.objects.filter(study=study).exists()
