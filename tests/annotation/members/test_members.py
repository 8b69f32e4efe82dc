"""Managing members: roles, deactivate / remove without losing labels, the last researcher, password resets."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from accounts.models import ApiToken
from accounts.services import issue_token
from annotation.errors import ServiceError
from annotation.lib.pseudonyms import pseudonyms
from annotation.members.membership import (
    DEACTIVATED,
    REMOVED,
    LastResearcher,
    remove_member,
    reset_password,
    set_member_active,
    set_member_role,
)
from annotation.members.services import add_members
from annotation.models import AccountOrigin, Annotation, Assignment, Item, StudyMember
from annotation.studies.services import create_study
from annotation.transfer.exports import export_chunks
from annotation.workbench.services import NotAllowed, SubmittedAnswer, claim_next, submit
from tests.conftest import jsonl, verification_item


def member(study, username: str) -> StudyMember:
    return StudyMember.objects.select_related("user").get(study=study, user__username=username)


def made_by(study, username: str) -> None:
    """As if the study had created this account (the fixtures' accounts exist before the study)."""
    AccountOrigin.objects.create(user=member(study, username).user, study=study, how=AccountOrigin.How.ADDED)


@pytest.fixture
def study_with_items(verification_study):
    from annotation.transfer.services.item_import import import_items

    import_items(study=verification_study, stream=jsonl(*(verification_item(f"c-{n}") for n in range(3))), fmt="jsonl")
    return verification_study


# --- services -------------------------------------------------------------------------


@pytest.mark.django_db
def test_deactivated_annotator_cannot_claim_or_submit_and_labels_stay_attributed(study_with_items, annotator):
    study = study_with_items
    done = claim_next(user=annotator, study=study)
    submit(user=annotator, study=study, assignment_id=done.pk, answer=SubmittedAnswer(label="supported"))
    open_one = claim_next(user=annotator, study=study)
    assert Item.objects.get(pk=open_one.item_id).slots_taken == 1

    anna, freed = set_member_active(study=study, member=member(study, "anna"), active=False)

    assert freed == 1 and not anna.is_active and anna.deactivated_at is not None
    open_one.refresh_from_db()
    assert open_one.status == Assignment.Status.SKIPPED and open_one.slot is None
    assert Item.objects.get(pk=open_one.item_id).slots_taken == 0  # the slot went back to the pool
    with pytest.raises(NotAllowed):
        claim_next(user=annotator, study=study)
    with pytest.raises(NotAllowed):
        submit(user=annotator, study=study, assignment_id=done.pk, answer=SubmittedAnswer(label="contradicted"))
    assert Annotation.objects.get(assignment=done).label == "supported"  # unchanged, still there
    assert pseudonyms(study)[annotator.pk] == anna.pseudonym
    exported = "".join(export_chunks(study, "csv")).splitlines()
    assert len(exported) == 2 and f",{anna.pseudonym},supported," in exported[1]  # still theirs in the export


@pytest.mark.django_db
def test_remove_deletes_a_member_never_given_an_item_and_deactivates_one_who_was(study_with_items, make_user):
    study = study_with_items
    add_members(study=study, usernames=["fresh", "busy"], role="annotator")
    busy = member(study, "busy")
    claim_next(user=busy.user, study=study)

    gone = remove_member(study=study, member=member(study, "fresh"))
    kept = remove_member(study=study, member=busy)

    assert gone.action == REMOVED and not StudyMember.objects.filter(study=study, user__username="fresh").exists()
    assert kept.action == DEACTIVATED and kept.freed_leases == 1
    assert StudyMember.objects.get(pk=busy.pk).is_active is False
    assert Assignment.objects.filter(annotator=busy.user).count() == 1  # kept, so never served again


@pytest.mark.django_db
def test_deactivated_member_is_an_outsider_and_adding_again_brings_them_back(client, verification_study, annotator):
    set_member_active(study=verification_study, member=member(verification_study, "anna"), active=False)
    client.force_login(annotator)
    assert client.get(reverse("annotation:study_detail", args=["verif"])).status_code == 404
    assert client.get(reverse("annotation:annotate", args=["verif"])).status_code == 404
    assert "verif" not in client.get(reverse("annotation:my_studies")).content.decode()
    pseudonym = member(verification_study, "anna").pseudonym

    (outcome,) = add_members(study=verification_study, usernames=["anna"], role="researcher")

    assert outcome.reactivated and outcome.pseudonym == pseudonym and outcome.role == "annotator"
    assert client.get(reverse("annotation:study_detail", args=["verif"])).status_code == 200


@pytest.mark.django_db
def test_the_last_researcher_cannot_be_removed_deactivated_or_demoted(verification_study, make_user):
    rita = member(verification_study, "rita")
    for change in (
        lambda: remove_member(study=verification_study, member=rita),
        lambda: set_member_active(study=verification_study, member=rita, active=False),
        lambda: set_member_role(study=verification_study, member=rita, role="annotator"),
    ):
        with pytest.raises(LastResearcher, match="only researcher"):
            change()
    assert member(verification_study, "rita").role == "researcher" and member(verification_study, "rita").is_active

    add_members(study=verification_study, usernames=["rolf"], role="researcher")
    set_member_role(study=verification_study, member=rita, role="annotator")
    assert member(verification_study, "rita").role == "annotator"
    with pytest.raises(LastResearcher):
        set_member_role(study=verification_study, member=member(verification_study, "rolf"), role="annotator")


@pytest.mark.django_db
def test_promoting_an_annotator_frees_their_item_in_progress(study_with_items, annotator):
    assignment = claim_next(user=annotator, study=study_with_items)
    set_member_role(study=study_with_items, member=member(study_with_items, "anna"), role="researcher")
    assignment.refresh_from_db()
    assert assignment.status == Assignment.Status.SKIPPED
    with pytest.raises(ServiceError, match="role must be one of"):
        set_member_role(study=study_with_items, member=member(study_with_items, "anna"), role="admin")


@pytest.mark.django_db
def test_password_reset_gives_a_new_password_ends_tokens_and_sessions(
    client, verification_study, researcher, annotator
):
    made_by(verification_study, "anna")
    token = issue_token(user=annotator)
    client.force_login(annotator)
    password = reset_password(actor=researcher, study=verification_study, member=member(verification_study, "anna"))

    annotator.refresh_from_db()
    assert annotator.check_password(password) and not annotator.check_password("pw-anna")
    assert ApiToken.objects.get(pk=token.token.pk).revoked_at is not None
    response = client.get(reverse("annotation:study_detail", args=["verif"]))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]  # the old session ended


@pytest.mark.django_db
def test_password_reset_never_escalates(verification_study, researcher, make_user):
    """Staff, researchers, accounts with permissions, and annotators of studies the actor does not run are refused."""
    study = verification_study
    other = create_study(slug="other", name="Other", kind="verification")
    make_user("boss", is_staff=True)
    make_user("su", is_superuser=True)
    grouped = make_user("grouped")
    grouped.groups.add(Group.objects.create(name="creators"))
    add_members(study=study, usernames=["boss", "su", "grouped", "shared", "rolf"], role="annotator")
    add_members(study=other, usernames=["shared"], role="annotator")
    add_members(study=other, usernames=["rolf"], role="researcher")
    refusals = {
        "boss": "staff and administrator",
        "su": "staff and administrator",
        "grouped": "permissions beyond studies",
        "shared": "a study you are not a researcher of",
        "rolf": "researcher in a study",
        "rita": "only an annotator",
    }
    for username, reason in refusals.items():
        before = member(study, username).user.password
        with pytest.raises(ServiceError, match=reason):
            reset_password(actor=researcher, study=study, member=member(study, username))
        assert member(study, username).user.password == before
    # A researcher of both studies may reset the shared annotator; so may staff.
    add_members(study=other, usernames=["rita"], role="researcher")
    made_by(study, "anna")  # "shared" was created by add_members for this study
    assert reset_password(actor=researcher, study=study, member=member(study, "shared"))
    staff = make_user("ops", is_staff=True)
    assert reset_password(actor=staff, study=study, member=member(study, "anna"))


@pytest.mark.django_db
def test_an_imported_identity_cannot_change_role_or_have_a_password(loaded_verification_study, researcher):
    external = StudyMember.objects.filter(study=loaded_verification_study, is_external=True).first()
    assert external is not None
    with pytest.raises(ServiceError, match="imported identity"):
        set_member_role(study=loaded_verification_study, member=external, role="researcher")
    with pytest.raises(ServiceError, match="not an account that logs in"):
        reset_password(actor=researcher, study=loaded_verification_study, member=external)
    assert remove_member(study=loaded_verification_study, member=external).action == DEACTIVATED


# --- pages -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_members_page_defaults_to_annotator_and_says_what_remove_does(client, verification_study, researcher):
    client.force_login(researcher)
    html = client.get(reverse("annotation:study_members", args=["verif"])).content.decode()
    assert '<option value="annotator" selected>Annotator</option>' in html
    assert "deactivated</strong> instead" in html and "their answers stay in reports and exports" in html
    detail = client.get(reverse("annotation:study_detail", args=["verif"])).content.decode()
    assert '<option value="annotator" selected>Annotator</option>' in detail
    assert reverse("annotation:study_members", args=["verif"]) in detail


@pytest.mark.django_db
def test_members_page_actions(client, study_with_items, researcher, annotator):
    study = study_with_items
    client.force_login(researcher)
    anna = member(study, "anna")
    made_by(study, "anna")
    claim_next(user=annotator, study=study)

    response = client.post(reverse("annotation:member_password", args=["verif", anna.pk]), follow=True)
    html = response.content.decode()
    assert "New password of anna" in html and "shown only once" in html
    assert "New password" not in client.get(reverse("annotation:study_members", args=["verif"])).content.decode()

    response = client.post(reverse("annotation:member_remove", args=["verif", anna.pk]), follow=True)
    assert "deactivated rather than deleted" in response.content.decode()
    assert not StudyMember.objects.get(pk=anna.pk).is_active

    client.post(reverse("annotation:member_active", args=["verif", anna.pk]), {"active": "1"})
    assert StudyMember.objects.get(pk=anna.pk).is_active

    client.post(reverse("annotation:member_role", args=["verif", anna.pk]), {"role": "researcher"})
    assert StudyMember.objects.get(pk=anna.pk).role == "researcher"

    rita = member(study, "rita")
    client.post(reverse("annotation:member_role", args=["verif", anna.pk]), {"role": "annotator"})
    response = client.post(reverse("annotation:member_remove", args=["verif", rita.pk]), follow=True)
    assert "only researcher" in response.content.decode()
    assert StudyMember.objects.filter(pk=rita.pk, is_active=True).exists()


@pytest.mark.django_db
def test_annotators_and_outsiders_get_404_on_member_management(client, verification_study, annotator, make_user):
    anna = member(verification_study, "anna")
    for user in (annotator, make_user("olga")):
        client.force_login(user)
        assert client.get(reverse("annotation:study_members", args=["verif"])).status_code == 404
        assert client.post(reverse("annotation:member_remove", args=["verif", anna.pk])).status_code == 404
        assert client.post(reverse("annotation:member_password", args=["verif", anna.pk])).status_code == 404
        assert client.post(reverse("annotation:invite_create", args=["verif"]), {"max_uses": 5}).status_code == 404
    assert StudyMember.objects.get(pk=anna.pk).is_active
    assert not verification_study.invites.exists()


@pytest.mark.django_db
def test_a_researcher_who_steps_down_is_sent_to_their_studies(client, verification_study, researcher):
    add_members(study=verification_study, usernames=["rolf"], role="researcher")
    client.force_login(researcher)
    rita = member(verification_study, "rita")
    response = client.post(reverse("annotation:member_role", args=["verif", rita.pk]), {"role": "annotator"})
    assert response["Location"] == reverse("annotation:my_studies")
    assert member(verification_study, "rita").role == "annotator"


@pytest.mark.django_db
def test_study_page_and_command_show_deactivated_members(client, verification_study, researcher, capsys):
    from django.core.management import call_command

    set_member_active(study=verification_study, member=member(verification_study, "anna"), active=False)
    client.force_login(researcher)
    html = client.get(reverse("annotation:study_detail", args=["verif"])).content.decode()
    assert '<span class="badge">deactivated</span>' in html
    call_command("add_members", "verif", "anna", "--role", "annotator")
    assert "anna: back in verif as annotator (ann-01); was deactivated" in capsys.readouterr().out
    assert member(verification_study, "anna").is_active
