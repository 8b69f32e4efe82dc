"""Between-subject conditions (issue 32): declared and checked, assigned balanced and for good at the first
claim, the verifier's suggestion shown only in its condition, exact N and counterbalancing unchanged, the
condition exported with every answer, and the report's comparison recovering a known effect."""

from __future__ import annotations

import json
import random

import pytest
from django.urls import reverse

from annotation.conditions.definitions import parse_conditions
from annotation.conditions.services import condition_at, condition_of
from annotation.errors import ServiceError
from annotation.models import Assignment, StudyMember
from annotation.transfer.exports import export_chunks
from metaeval.reporting import build_report
from metaeval.verifiers.services.prediction_import import import_predictions
from tests.conftest import jsonl
from tests.support.assignment_study import make_study

pytestmark = pytest.mark.django_db

CONDITIONS = ["no_suggestion", "verifier_suggestion:judge"]
LABELS = ["supported", "contradicted", "inconclusive"]


def test_conditions_are_read_from_strings_or_objects_and_refused_with_the_reason():
    assert parse_conditions(CONDITIONS) == [
        {"key": "no_suggestion", "verifier": ""},
        {"key": "verifier_suggestion", "verifier": "judge"},
    ]
    assert parse_conditions("control\nshown:judge") == [
        {"key": "control", "verifier": ""},
        {"key": "shown", "verifier": "judge"},
    ]
    for bad, message in (
        (["only"], "no conditions or 2 to 6, got 1"),
        (["a", "a"], "condition keys must be distinct"),
        (["Bad Key", "b"], "condition 1: the key must be"),
        ([{"key": "a", "colour": "red"}, "b"], "condition 1: write a key"),
    ):
        with pytest.raises(ServiceError, match=message):
            parse_conditions(bad)


def test_people_get_conditions_balanced_in_the_order_they_start_and_keep_them(client):
    study, users = make_study(items=20, n=2, annotators=7, conditions=["a", "b", "c"])
    given = []
    for number, user in enumerate(users):
        client.force_login(user)
        assert client.post(reverse("api-assignment-next", args=[study.slug])).status_code == 200
        given.append(StudyMember.objects.get(study=study, user=user).condition)
        counts = [given.count(key) for key in ("a", "b", "c")]
        assert max(counts) - min(counts) <= 1, counts  # balanced among those who started, at every step
        assert given[-1] == condition_at(study, number)  # the seed's draw for the k-th person
    for user, condition in zip(users, given, strict=True):  # for good: later claims keep it
        client.force_login(user)
        client.post(reverse("api-assignment-next", args=[study.slug]))
        assert condition_of(user, study) == condition


def _with_predictions(study):
    predictions = [{"item": f"i-{n}", "verifier": "judge", "label": LABELS[n % 3]} for n in range(study.items.count())]
    import_predictions(study=study, stream=jsonl(*predictions), fmt="jsonl")


def test_the_suggestion_is_shown_only_in_its_condition_and_marked_as_a_machines(client):
    study, users = make_study(items=6, n=2, annotators=2, conditions=CONDITIONS)
    _with_predictions(study)
    shown = {}
    for user in users:
        client.force_login(user)
        page = client.get(reverse("annotation:annotate", args=[study.slug])).content.decode()
        shown[condition_of(user, study)] = page
    assert (
        "Machine suggestion" in shown["verifier_suggestion"]
        and "from an automatic verifier" in shown["verifier_suggestion"]
    )
    assert "Machine suggestion" not in shown["no_suggestion"]


def test_exact_n_and_counterbalancing_hold_across_conditions(client):
    study, users = make_study(items=5, n=2, annotators=4, conditions=CONDITIONS)
    for user in users:
        client.force_login(user)
        while (response := client.post(reverse("api-assignment-next", args=[study.slug]))).status_code == 200:
            done = client.post(
                reverse("api-assignment-submit", args=[response.json()["assignment"]["id"]]),
                {"label": "supported"},
                content_type="application/json",
            )
            assert done.status_code == 200
    per_item = {}
    for assignment in Assignment.objects.filter(study=study, status="submitted"):
        per_item[assignment.item_id] = per_item.get(assignment.item_id, 0) + 1
    assert sorted(per_item.values()) == [2] * 5
    conditions = sorted(StudyMember.objects.filter(study=study, role="annotator").values_list("condition", flat=True))
    assert conditions == ["no_suggestion", "no_suggestion", "verifier_suggestion", "verifier_suggestion"]
    rows = [json.loads(line) for line in "".join(export_chunks(study, "jsonl")).splitlines()]
    assert {row["condition"] for row in rows} == {"no_suggestion", "verifier_suggestion"}


def test_the_report_recovers_a_known_automation_bias(client):
    """Annotators shown the suggestion take it 90 % of the time; the others agree with it by chance (a third).
    The report's difference in agreement with the verifier is positive, its interval excludes 0, and it is
    near the simulated size."""
    study, users = make_study(items=30, n=8, annotators=8, conditions=CONDITIONS, seed=11)
    _with_predictions(study)
    rng = random.Random(3)
    for user in users:
        client.force_login(user)
        shown = condition_of(user, study) == "verifier_suggestion"
        while (response := client.post(reverse("api-assignment-next", args=[study.slug]))).status_code == 200:
            assignment = Assignment.objects.select_related("item").get(pk=response.json()["assignment"]["id"])
            number = int(assignment.item.external_id.split("-")[1])
            label = LABELS[number % 3] if shown and rng.random() < 0.9 else rng.choice(LABELS)
            client.post(
                reverse("api-assignment-submit", args=[assignment.pk]),
                {"label": label, "active_ms": rng.randint(2000, 9000)},
                content_type="application/json",
            )
    report = build_report(study)
    section = report["conditions"]
    from metaeval.reporting.latex_format import report_tables, table_tex

    assert "Agreement with the verifier (automation bias)" in table_tex(report_tables(report)["conditions"])
    difference = section["comparison"]["differences"]["verifier_suggestion"]["agreement_with_verifier"]
    low = difference["ci"][0]
    assert difference["value"] > 0 and low > 0, difference
    # The simulated size is (0.9 + 0.1 / 3) - 1 / 3 = 0.6; one run of 8 people estimates it within 0.25: the
    # same seeds give 0.675 alone and gave 0.79 once in a whole-suite run (not reproduced: something of the
    # database's earlier state moves which draw falls on which item); the interval's coverage over many seeds is
    # tests/stats/test_stats_conditions.py's.
    assert abs(difference["value"] - 0.6) < 0.25
    assert difference["p_value"] < 0.05
    people = {entry["key"]: entry["n_people"] for entry in section["people"]}
    assert people == {"no_suggestion": 4, "verifier_suggestion": 4}


def test_the_report_page_compares_the_conditions(client):
    from annotation.members.services import add_members

    study, users = make_study(items=4, n=2, annotators=2, conditions=CONDITIONS)
    _with_predictions(study)
    for user in users:
        client.force_login(user)
        while (response := client.post(reverse("api-assignment-next", args=[study.slug]))).status_code == 200:
            client.post(
                reverse("api-assignment-submit", args=[response.json()["assignment"]["id"]]),
                {"label": "supported"},
                content_type="application/json",
            )
    add_members(study=study, usernames=["boss"], role="researcher")
    client.force_login(StudyMember.objects.get(study=study, user__username="boss").user)
    page = client.get(reverse("metaeval:report", args=[study.slug])).content.decode()
    assert 'id="conditions"' in page and "Agreement with the verifier (automation bias)" in page
    assert "verifier_suggestion − no_suggestion" in page


def test_a_preference_judges_suggestion_is_said_in_the_screens_terms(client):
    """The judge's verdict is stored per system (a_slight: system A slightly better); the suggestion says it as
    the annotator's screen shows the lists, so it never names a system and follows the counterbalancing."""
    from metaeval.models import Prediction, Verifier

    study, users = make_study(kind="preference", items=2, n=2, annotators=2, conditions=["none", "shown:judge"])
    judge = Verifier.objects.create(
        study=study, name="judge", preset="pairwise_judge", model="m", endpoint="http://127.0.0.1:9/v1"
    )
    for item in study.items.all():
        Prediction.objects.create(
            verifier=judge, item=item, label="a_slight", cache_key=f"k-{item.pk}", parse_status="ok"
        )
    for user in users:
        client.force_login(user)
        page = client.get(reverse("annotation:annotate", args=[study.slug])).content.decode()
        held = Assignment.objects.get(annotator=user, status="active")
        if condition_of(user, study) != "shown":
            assert "Machine suggestion" not in page
            continue
        side = 1 if held.left_system == study.systems[0] else 2
        assert f"<strong>List {side} slightly better</strong>" in page
        assert study.systems[0] not in page.split("Machine suggestion")[1].split("</aside>")[0]
