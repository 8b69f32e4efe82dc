"""Adjudication: the queue rules, the service and its revisions, pages, API, access, import and export,
the adjudicated labels the report's reference rule uses."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from annotation.adjudication.selectors import (
    adjudicated_labels,
    adjudication_queue,
    adjudication_summary,
    item_for_adjudication,
    queue_item_ids,
    queue_size,
)
from annotation.adjudication.services import adjudicate, import_adjudications, set_adjudication_settings, verdict_for
from annotation.errors import ImportFailed, ServiceError
from annotation.members.services import add_members
from annotation.models import Adjudication, AdjudicationRevision, Annotation, Assignment, StudyChange, StudyMember
from annotation.transfer.exports import export_chunks
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from metaeval.reporting import ReportOptions, build_report
from metaeval.reporting.csv_format import report_csv
from metaeval.study_frame import study_frame
from tests.conftest import csv_bytes, jsonl, preference_item, verification_item

pytestmark = pytest.mark.django_db


def queue_ids(study) -> list[str]:
    return [entry.item for entry in adjudication_queue(study, study.members.first().user)]


def item(study, external_id: str):
    return study.items.get(external_id=external_id)


# --- the queue -------------------------------------------------------------------------------


def test_default_queue_holds_items_without_unanimity(loaded_verification_study):
    # c-2: w1 supported, w2 contradicted; c-1 and c-3 unanimous.
    assert queue_ids(loaded_verification_study) == ["c-2"]


def test_no_majority_rule(loaded_verification_study):
    study = loaded_verification_study
    import_annotations(
        study=study,
        stream=jsonl({"item": "c-2", "annotator": "w3", "label": "contradicted"}),
        fmt="jsonl",
    )
    assert queue_ids(study) == ["c-2"]  # 1-2 is not unanimous
    set_adjudication_settings(study=study, user=None, rule="no_majority")
    assert queue_ids(study) == []  # but it has a majority (2 of 3)


def test_flagged_rule(loaded_verification_study):
    study = loaded_verification_study
    Assignment.objects.filter(item__external_id="c-3").update(flagged=True, flag_reason="cut off")
    set_adjudication_settings(study=study, user=None, rule="flagged")
    assert queue_ids(study) == ["c-3"]


def test_audit_rule_draws_a_seeded_share(loaded_verification_study):
    study = loaded_verification_study
    set_adjudication_settings(study=study, user=None, rule="audit", audit_share=0.5)
    first = queue_item_ids(study)
    assert len(first) == 2  # round(0.5 x 3 labelled items)
    assert queue_item_ids(study) == first
    set_adjudication_settings(study=study, user=None, audit_share=1.0)
    assert len(queue_item_ids(study)) == 3


@pytest.mark.parametrize(
    ("rule", "share"), [("no_unanimity", 0.1), ("no_majority", 0.1), ("flagged", 0.1), ("audit", 0.37)]
)
def test_the_reports_queue_size_counts_what_the_queue_lists(verification_study, rule, share):
    """The report's count (in SQL) against the queue itself (in Python), on 60 items with 0 to 3 random
    labels from 3 labels, some assignments skipped and some flagged: every kind of item for every rule."""
    import random

    study = verification_study
    rng = random.Random(7)
    import_items(study=study, stream=jsonl(*(verification_item(f"q-{n}") for n in range(60))), fmt="jsonl")
    labels = ["supported", "contradicted", "inconclusive"]
    rows = [
        {"item": f"q-{n}", "annotator": f"w{k}", "label": rng.choice(labels[: rng.randint(1, 3)])}
        for n in range(60)
        for k in range(rng.randint(0, 3))
    ]
    import_annotations(study=study, stream=jsonl(*rows), fmt="jsonl")
    answered = list(Assignment.objects.filter(study=study).order_by("pk").values_list("pk", flat=True))
    Assignment.objects.filter(pk__in=rng.sample(answered, 15)).update(status=Assignment.Status.SKIPPED)
    Assignment.objects.filter(pk__in=rng.sample(answered, 9)).update(flagged=True, flag_reason="odd")
    set_adjudication_settings(study=study, user=None, rule=rule, audit_share=share)
    study.refresh_from_db()
    listed = queue_item_ids(study)
    assert 0 < len(listed) < 60  # the draw gives the rule something to tell apart
    assert queue_size(study) == len(listed)
    # the report's count from the labels it has read (metaeval.reporting.adjudication_queue)
    from metaeval.reporting.adjudication_queue import queue_size_with
    from metaeval.selectors import label_frame

    frame = label_frame(study, include_gold=True)
    assert queue_size_with(study, frame, include_screened_out=False) == len(listed)


def test_settings_are_checked_and_recorded(loaded_verification_study, researcher):
    study = loaded_verification_study
    with pytest.raises(ServiceError, match="'sometimes' is not one of"):
        set_adjudication_settings(study=study, user=researcher, rule="sometimes")
    with pytest.raises(ServiceError, match="audit share must be above 0"):
        set_adjudication_settings(study=study, user=researcher, audit_share=0)
    changes = set_adjudication_settings(study=study, user=researcher, reference_rule="majority")
    assert [change.field for change in changes] == ["reference_rule"]
    study.refresh_from_db()
    assert study.reference_rule == "majority"
    assert StudyChange.objects.filter(study=study, field="reference_rule", new_value="majority").exists()


# --- the service -----------------------------------------------------------------------------


def test_adjudicate_and_revise_keep_the_annotations(loaded_verification_study, researcher):
    study = loaded_verification_study
    target = item(study, "c-2")
    before = sorted(Annotation.objects.filter(assignment__item=target).values_list("label", flat=True))
    first, created = adjudicate(item=target, adjudicator=researcher, verdict=verdict_for(study, label="supported"))
    assert created and first.label == "supported"
    again, created = adjudicate(
        item=target,
        adjudicator=researcher,
        verdict=verdict_for(study, label="contradicted"),
        note="passage 1 contradicts it",
        guidelines_unclear=True,
    )
    assert not created and again.pk == first.pk and again.label == "contradicted"
    revision = AdjudicationRevision.objects.get(adjudication=first)
    assert revision.old_value["label"] == "supported" and revision.new_value["label"] == "contradicted"
    assert revision.new_value["guidelines_unclear"] is True
    adjudicate(
        item=target,
        adjudicator=researcher,
        verdict=verdict_for(study, label="contradicted"),
        note="passage 1 contradicts it",
        guidelines_unclear=True,
    )
    assert AdjudicationRevision.objects.filter(adjudication=first).count() == 1  # the same answer: no revision
    after = sorted(Annotation.objects.filter(assignment__item=target).values_list("label", flat=True))
    assert after == before == ["contradicted", "supported"]


def test_verdict_names_what_is_wrong(loaded_verification_study, preference_study):
    with pytest.raises(ServiceError, match="'maybe' is not one of the study's labels"):
        verdict_for(loaded_verification_study, label="maybe")
    import_items(study=preference_study, stream=jsonl(preference_item("p-1")), fmt="jsonl")
    preference_study.refresh_from_db()
    with pytest.raises(ServiceError, match="strength must be 'strong' or 'slight'"):
        verdict_for(preference_study, preferred="List 1", strength="huge")
    with pytest.raises(ServiceError, match="'gpt' is not one of the study's systems"):
        verdict_for(preference_study, preferred="gpt", strength="strong")
    first = preference_study.systems[0]
    assert verdict_for(preference_study, preferred="List 1", strength="strong").preferred_system == first
    assert verdict_for(preference_study, preferred="tie").label == "tie"


def test_two_adjudicators_agree_or_leave_the_item_without_a_label(loaded_verification_study, researcher, make_user):
    study = loaded_verification_study
    second = make_user("sam")
    add_members(study=study, usernames=["sam"], role="researcher")
    for name in ("c-1", "c-2"):
        adjudicate(item=item(study, name), adjudicator=researcher, verdict=verdict_for(study, label="supported"))
    adjudicate(item=item(study, "c-1"), adjudicator=second, verdict=verdict_for(study, label="supported"))
    adjudicate(
        item=item(study, "c-2"),
        adjudicator=second,
        verdict=verdict_for(study, label="contradicted"),
        guidelines_unclear=True,
    )
    result = adjudicated_labels(study)
    assert result.labels == {"c-1": "supported"}
    assert result.disagreements == ["c-2"]
    summary = adjudication_summary(study)
    assert summary["items_adjudicated"] == 2 and summary["items_with_two_or_more"] == 2
    assert summary["adjudicator_agreement"] == 0.5
    assert summary["guidelines_unclear"] == 1 and summary["guidelines_unclear_share"] == 0.25
    view = item_for_adjudication(item(study, "c-2"))
    assert view["adjudicators_disagree"] is True and len(view["adjudications"]) == 2


# --- export and the reference rule -------------------------------------------------------------


def exported(study) -> list[dict]:
    return list(csv.DictReader(io.StringIO("".join(export_chunks(study, "csv")))))


def test_export_carries_the_adjudicated_label_and_empty_on_disagreement(
    loaded_verification_study, researcher, make_user
):
    study = loaded_verification_study
    adjudicate(item=item(study, "c-2"), adjudicator=researcher, verdict=verdict_for(study, label="contradicted"))
    rows = exported(study)
    assert {row["item"]: row["adjudicated_label"] for row in rows} == {"c-1": "", "c-2": "contradicted", "c-3": ""}
    make_user("sam")
    add_members(study=study, usernames=["sam"], role="researcher")
    sam = StudyMember.objects.get(study=study, user__username="sam").user
    adjudicate(item=item(study, "c-2"), adjudicator=sam, verdict=verdict_for(study, label="supported"))
    assert {row["adjudicated_label"] for row in exported(study)} == {""}


def test_reference_rule_in_the_verifiers_reference_and_report(loaded_verification_study, researcher):
    study = loaded_verification_study
    frame, source = study_frame(study).verifier_reference()
    assert source == "human labels (strict majority per item)" and len(frame) == 6
    adjudicate(item=item(study, "c-2"), adjudicator=researcher, verdict=verdict_for(study, label="contradicted"))
    frame, source = study_frame(study).verifier_reference()
    assert "adjudicated_else_majority" in source
    assert frame[frame["item"] == "c-2"][["annotator", "label"]].values.tolist() == [["adjudicated", "contradicted"]]
    assert len(frame[frame["item"] == "c-1"]) == 2
    set_adjudication_settings(study=study, user=None, reference_rule="adjudicated")
    frame, _ = study_frame(study).verifier_reference()
    assert frame["item"].tolist() == ["c-2"]
    set_adjudication_settings(study=study, user=None, reference_rule="majority")
    frame, _ = study_frame(study).verifier_reference()
    assert len(frame[frame["item"] == "c-2"]) == 2
    report = build_report(study, ReportOptions(n_resamples=50))
    assert report["adjudication"]["items_adjudicated"] == 1
    assert report["adjudication"]["reference_rule"] == "majority"
    assert "adjudication,all,items_adjudicated,1" in report_csv(report)


# --- import ------------------------------------------------------------------------------------


def test_import_adjudications(loaded_verification_study, researcher):
    study = loaded_verification_study
    result = import_adjudications(
        study=study,
        stream=csv_bytes(
            [
                {
                    "item": "c-2",
                    "adjudicator": "rita",
                    "label": "Contradicted",
                    "note": "n",
                    "guidelines_unclear": "yes",
                },
                {"item": "c-1", "adjudicator": "rita", "label": "supported"},
            ]
        ),
        fmt="csv",
    )
    assert (result.created, result.updated) == (2, 0)
    stored = Adjudication.objects.get(item__external_id="c-2")
    assert stored.label == "contradicted" and stored.guidelines_unclear and stored.source == "import"


def test_import_is_all_or_nothing_with_line_numbers(loaded_verification_study, researcher):
    study = loaded_verification_study
    with pytest.raises(ImportFailed) as failed:
        import_adjudications(
            study=study,
            stream=jsonl(
                {"item": "c-1", "adjudicator": "rita", "label": "supported"},
                {"item": "nope", "adjudicator": "rita", "label": "supported"},
                {"item": "c-2", "adjudicator": "ghost", "label": "maybe"},
            ),
            fmt="jsonl",
        )
    text = str(failed.value)
    assert "line 2, field 'item': no item 'nope'" in text
    assert "line 3, field 'adjudicator': 'ghost' is not a member" in text
    assert "line 3, field 'label': 'maybe' is not one of the study's labels" in text
    assert not Adjudication.objects.filter(study=study).exists()


# --- pages -------------------------------------------------------------------------------------


def test_adjudicator_resolves_the_queue_in_pages(client, loaded_verification_study, researcher):
    study = loaded_verification_study
    client.force_login(researcher)
    page = client.get(reverse("annotation:adjudication_queue", args=[study.slug]))
    assert page.status_code == 200
    assert page.context["next_item"] == "c-2" and len(page.context["queue"]) == 1
    url = reverse("annotation:adjudicate_item", args=[study.slug, "c-2"])
    shown = client.get(url)
    text = shown.content.decode()
    assert shown.status_code == 200
    assert "w1" in text and "w2" in text and "Claim c-2 is true." in text
    assert 'data-keys="1 s"' in text  # the workbench's keys
    refused = client.post(url, {"label": "", "note": "x"})
    assert refused.status_code == 400 and "Choose the final label." in refused.content.decode()
    assert not Adjudication.objects.exists()
    done = client.post(url, {"label": "contradicted", "note": "evidence says no", "guidelines_unclear": "on"})
    assert done.status_code == 302 and done["Location"] == reverse("annotation:adjudication_queue", args=[study.slug])
    stored = Adjudication.objects.get(item__external_id="c-2")
    assert (stored.label, stored.note, stored.guidelines_unclear) == ("contradicted", "evidence says no", True)
    assert client.get(reverse("annotation:adjudication_queue", args=[study.slug])).context["next_item"] is None


def test_preference_page_hides_system_names_unless_allowed(client, preference_study, researcher):
    study = preference_study
    import_items(study=study, stream=jsonl(preference_item("p-1")), fmt="jsonl")
    import_annotations(
        study=study,
        stream=jsonl(
            {"item": "p-1", "annotator": "w1", "preferred": "veriscore", "strength": "strong"},
            {"item": "p-1", "annotator": "w2", "preferred": "safe", "strength": "slight"},
        ),
        fmt="jsonl",
    )
    client.force_login(researcher)
    url = reverse("annotation:adjudicate_item", args=[study.slug, "p-1"])
    text = client.get(url).content.decode()
    assert "List 1" in text and "veriscore" not in text and "safe" not in text.replace("csrf", "")
    study.refresh_from_db()
    set_adjudication_settings(study=study, user=researcher, shows_systems=True)
    text = client.get(url).content.decode()
    assert "veriscore" in text
    response = client.post(url, {"label": "b_slight"})
    assert response.status_code == 302
    stored = Adjudication.objects.get(item__external_id="p-1")
    assert (stored.preferred_system, stored.strength) == (study.systems[1], "slight")


# --- access ------------------------------------------------------------------------------------


def test_outsiders_get_404_and_annotators_403(client, loaded_verification_study, annotator, make_user):
    study = loaded_verification_study
    outsider = make_user("olga")
    pages = [
        reverse("annotation:adjudication_queue", args=[study.slug]),
        reverse("annotation:adjudicate_item", args=[study.slug, "c-2"]),
        reverse("api-adjudication-queue", args=[study.slug]),
        reverse("api-adjudication-item", args=[study.slug, "c-2"]),
    ]
    client.force_login(outsider)
    assert [client.get(url).status_code for url in pages] == [404] * 4
    client.force_login(annotator)
    assert [client.get(url).status_code for url in pages] == [403] * 4
    assert client.post(pages[1], {"label": "supported"}).status_code == 403
    assert client.post(pages[3], {"label": "supported"}, content_type="application/json").status_code == 403
    assert not Adjudication.objects.exists()
    StudyMember.objects.filter(study=study, user=annotator).update(can_adjudicate=True)
    assert [client.get(url).status_code for url in pages] == [200] * 4
    # An adjudicator who is not a researcher does not change the settings.
    client.post(reverse("annotation:adjudication_settings", args=[study.slug]), {"adjudication_rule": "audit"})
    study.refresh_from_db()
    assert study.adjudication_rule == "no_unanimity"


def test_researcher_gives_and_takes_the_adjudicator_flag(client, loaded_verification_study, researcher, annotator):
    study = loaded_verification_study
    member = StudyMember.objects.get(study=study, user=annotator)
    client.force_login(researcher)
    url = reverse("annotation:member_adjudicator", args=[study.slug, member.pk])
    client.post(url, {"can_adjudicate": "1"})
    member.refresh_from_db()
    assert member.can_adjudicate
    client.post(url, {"can_adjudicate": "0"})
    member.refresh_from_db()
    assert not member.can_adjudicate


# --- API ---------------------------------------------------------------------------------------


def test_api_queue_item_submit_revise(client, loaded_verification_study, researcher):
    study = loaded_verification_study
    client.force_login(researcher)
    queue = client.get(reverse("api-adjudication-queue", args=[study.slug])).json()
    assert queue["count"] == 1 and queue["items"][0]["item"] == "c-2" and queue["done"] == 0
    url = reverse("api-adjudication-item", args=[study.slug, "c-2"])
    view = client.get(url).json()
    assert {row["annotator"]: row["label"] for row in view["annotations"]} == {"w1": "supported", "w2": "contradicted"}
    assert view["content"]["claim"] == "Claim c-2 is true."
    bad = client.post(url, {"label": "maybe"}, content_type="application/json")
    assert bad.status_code == 400 and "'maybe' is not one of the study's labels" in bad.json()["detail"]
    made = client.post(url, {"label": "supported", "note": "first"}, content_type="application/json")
    assert made.status_code == 201 and made.json()["revisions"] == 0
    revised = client.post(url, {"label": "contradicted"}, content_type="application/json")
    assert revised.status_code == 200 and revised.json()["label"] == "contradicted" and revised.json()["revisions"] == 1
    assert client.get(reverse("api-adjudication-queue", args=[study.slug])).json()["done"] == 1


def test_api_import(client, loaded_verification_study, researcher):
    study = loaded_verification_study
    client.force_login(researcher)
    url = reverse("api-adjudication-import", args=[study.slug])
    bad = jsonl({"item": "c-2", "adjudicator": "rita", "label": "nah"})
    bad.name = "adj.jsonl"
    response = client.post(url, {"file": bad})
    assert response.status_code == 400
    assert response.json()["errors"][0]["line"] == 1 and response.json()["errors"][0]["field"] == "label"
    good = jsonl({"item": "c-2", "adjudicator": "rita", "label": "contradicted"})
    good.name = "adj.jsonl"
    response = client.post(url, {"file": good})
    assert response.status_code == 201 and response.json()["created"] == 1
    assert adjudicated_labels(study).labels == {"c-2": "contradicted"}


def test_verifier_predictions_shown_only_when_the_study_allows(client, loaded_verification_study, researcher):
    from metaeval.models import Prediction
    from metaeval.verifiers.services import create_verifier

    study = loaded_verification_study
    verifier = create_verifier(study=study, name="overlap", kind="baseline_overlap")
    Prediction.objects.create(
        verifier=verifier, item=item(study, "c-2"), label="inconclusive", parse_status="ok", cache_key="k"
    )
    assert item_for_adjudication(item(study, "c-2"))["verifier_predictions"] == []
    set_adjudication_settings(study=study, user=researcher, shows_verifiers=True)
    shown = item_for_adjudication(item(study, "c-2"))["verifier_predictions"]
    assert shown == [{"verifier": "overlap", "label": "inconclusive"}]
    client.force_login(researcher)
    page = client.get(reverse("annotation:adjudicate_item", args=[study.slug, "c-2"])).content.decode()
    assert 'id="adj-verifiers"' in page and "overlap" in page


def test_member_api_sets_the_adjudicator_flag(client, loaded_verification_study, researcher, annotator):
    study = loaded_verification_study
    member = StudyMember.objects.get(study=study, user=annotator)
    client.force_login(researcher)
    url = reverse("api-member-detail", args=[study.slug, member.pk])
    response = client.patch(url, {"can_adjudicate": True}, content_type="application/json")
    assert response.status_code == 200 and response.json()["can_adjudicate"] is True
    client.force_login(annotator)
    assert client.get(reverse("api-adjudication-queue", args=[study.slug])).status_code == 200


def test_api_settings(client, loaded_verification_study, researcher, annotator):
    study = loaded_verification_study
    url = reverse("api-adjudication-settings", args=[study.slug])
    client.force_login(researcher)
    assert client.get(url).json()["reference_rule"] == "adjudicated_else_majority"
    changed = client.patch(
        url, {"adjudication_rule": "audit", "adjudication_audit_share": 0.5}, content_type="application/json"
    )
    assert changed.status_code == 200 and changed.json()["adjudication_rule"] == "audit"
    refused = client.patch(url, {"adjudication_audit_share": 0}, content_type="application/json")
    assert refused.status_code == 400 and "audit share must be above 0" in refused.json()["detail"]
    study.refresh_from_db()
    assert (study.adjudication_rule, study.adjudication_audit_share) == ("audit", 0.5)
    client.force_login(annotator)
    assert client.get(url).status_code == 403


def test_duplicate_keeps_the_adjudication_settings(loaded_verification_study, researcher):
    from annotation.studies.services import duplicate_study

    study = loaded_verification_study
    set_adjudication_settings(study=study, user=researcher, rule="audit", audit_share=0.25, reference_rule="gold")
    copy = duplicate_study(study=study, slug="verif-copy", user=researcher)
    copy.refresh_from_db()
    assert (copy.adjudication_rule, copy.adjudication_audit_share, copy.reference_rule) == ("audit", 0.25, "gold")


def test_gold_reference_rule(loaded_verification_study):
    study = loaded_verification_study
    study.items.filter(external_id="c-3").update(gold_label="contradicted")
    set_adjudication_settings(study=study, user=None, reference_rule="gold")
    frame, source = study_frame(study).verifier_reference()
    assert frame.values.tolist() == [["c-3", "gold", "contradicted"]]
    assert "reference rule: gold" in source


def test_import_through_the_page(client, loaded_verification_study, researcher):
    study = loaded_verification_study
    client.force_login(researcher)
    upload = csv_bytes([{"item": "c-2", "adjudicator": "rita", "label": "nonsense"}])
    upload.name = "past.csv"
    url = reverse("annotation:adjudication_import", args=[study.slug])
    page = client.post(url, {"file": upload}, follow=True)
    assert "line 2, field &#x27;label&#x27;: &#x27;nonsense&#x27; is not one" in page.content.decode()
    assert not Adjudication.objects.exists()
    upload = csv_bytes([{"item": "c-2", "adjudicator": "rita", "label": "supported"}])
    upload.name = "past.csv"
    page = client.post(url, {"file": upload}, follow=True)
    assert "Imported 1 adjudication(s)" in page.content.decode()
    assert Adjudication.objects.get().label == "supported"


def test_import_command(loaded_verification_study, researcher, tmp_path):
    from django.core.management import CommandError, call_command

    study = loaded_verification_study
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"item": "c-2", "adjudicator": "rita", "label": "supported"}\n{"item": "zz", "adjudicator": "rita"}\n'
    )
    with pytest.raises(CommandError, match="line 2, field 'item': no item 'zz'"):
        call_command("import_adjudications", study.slug, str(bad))
    assert not Adjudication.objects.exists()
    good = tmp_path / "good.jsonl"
    good.write_text('{"item": "c-2", "adjudicator": "rita", "label": "supported"}\n')
    out = io.StringIO()
    call_command("import_adjudications", study.slug, str(good), stdout=out)
    assert "Imported 1 new and 0 revised adjudication(s)" in out.getvalue()


def test_report_page_has_the_adjudication_section(client, loaded_verification_study, researcher):
    study = loaded_verification_study
    adjudicate(item=item(study, "c-2"), adjudicator=researcher, verdict=verdict_for(study, label="contradicted"))
    client.force_login(researcher)
    page = client.get(reverse("metaeval:report", args=[study.slug])).content.decode()
    assert 'id="adjudication"' in page
    assert 'Items adjudicated</th><td class="num">1</td>' in page
    assert "<strong>adjudicated_else_majority</strong>" in page
