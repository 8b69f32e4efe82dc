"""The annotate API (issue 3, point 7): next, submit, skip, flag; scoping; query counts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from accounts.services import issue_token
from annotation.members.services import add_members
from annotation.models import Annotation, Assignment, Item
from annotation.studies.services import set_study_status
from annotation.workbench.services import SubmittedAnswer, claim_next, submit
from tests.support.assignment_study import make_study

pytestmark = pytest.mark.django_db


def next_url(study) -> str:
    return reverse("api-assignment-next", args=[study.slug])


def action_url(action: str, assignment_id: int) -> str:
    return reverse(f"api-assignment-{action}", args=[assignment_id])


#: A complete answer in the `verification` fixture's study: a label and a judgement of each of its two passages.
JUDGED = [{"index": 0, "judgement": "support"}, {"index": 1, "judgement": "irrelevant"}]


def judged(label: str) -> dict:
    return {"label": label, "evidence": JUDGED}


@pytest.fixture
def verification(client):
    study, users = make_study(
        evidence_judgements=True, items=4, item_overrides={"evidence": [{"text": "one"}, {"text": "two"}]}
    )
    client.force_login(users[0])
    return study, users


def test_next_returns_the_assignment_the_blinded_item_and_progress(client):
    study, (a1, *_) = make_study(kind="preference", items=3, n=1)
    client.force_login(a1)
    response = client.post(next_url(study))
    assert response.status_code == 200
    data = response.json()
    assignment = Assignment.objects.get(annotator=a1)
    assert data["assignment"]["id"] == assignment.pk
    assert data["assignment"]["status"] == "active"
    assert data["progress"] == {"done": 0, "total": 3, "total_exact": True}
    item = data["item"]
    assert item["kind"] == "preference"
    lists = Item.objects.get(pk=assignment.item_id).payload["lists"]
    right = "safe" if assignment.left_system == "veriscore" else "veriscore"
    assert (item["list_1"], item["list_2"]) == (lists[assignment.left_system], lists[right])
    body = response.content.decode()
    assert "veriscore" not in body and "safe" not in body  # blinded: no system names anywhere


def test_next_gives_the_same_assignment_until_submitted_or_skipped(client, verification):
    study, _ = verification
    first = client.post(next_url(study)).json()["assignment"]["id"]
    assert client.post(next_url(study)).json()["assignment"]["id"] == first
    assert client.post(action_url("skip", first)).status_code == 200
    second = client.post(next_url(study)).json()["assignment"]["id"]
    assert second != first
    assert (
        client.post(action_url("submit", second), judged("supported"), content_type="application/json").status_code
        == 200
    )
    assert client.post(next_url(study)).json()["assignment"]["id"] not in (first, second)


def test_next_says_204_when_nothing_is_left(client):
    study, (a1, *_) = make_study(items=2)
    client.force_login(a1)
    for _ in range(2):
        assignment_id = client.post(next_url(study)).json()["assignment"]["id"]
        response = client.post(
            action_url("submit", assignment_id), {"label": "supported"}, content_type="application/json"
        )
        assert response.status_code == 200
    assert response.json()["progress"] == {"done": 2, "total": 2, "total_exact": True}
    response = client.post(next_url(study))
    assert response.status_code == 204 and response.content == b""


def test_submit_verification_with_evidence_rationale_and_time(client, verification):
    study, (_a1, *_) = verification
    assignment_id = client.post(next_url(study)).json()["assignment"]["id"]
    response = client.post(
        action_url("submit", assignment_id),
        {
            "label": "contradicted",
            "evidence": [
                {"index": 1, "judgement": "not_support", "useful": True},
                {"index": 0, "judgement": "irrelevant"},
            ],
            "rationale": "the second passage disagrees",
            "active_ms": 5300,
        },
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    data = response.json()
    assert (data["assignment"]["id"], data["assignment"]["status"]) == (assignment_id, "submitted")
    assert data["assignment"]["lease_expires_at"] is None
    assert data["progress"]["done"] == 1
    annotation = Annotation.objects.get(assignment_id=assignment_id)
    assert annotation.label == "contradicted"
    assert annotation.justification == "the second passage disagrees"
    assert annotation.active_ms == 5300
    assert annotation.source == "api"
    assert annotation.evidence_judgements[1] == {"index": 1, "judgement": "not_support", "useful": True}


def test_submit_preference_in_screen_terms_is_stored_in_system_space(client):
    study, (a1, *_) = make_study(kind="preference", items=1, n=1, justification_required=True)
    client.force_login(a1)
    assignment_id = client.post(next_url(study)).json()["assignment"]["id"]
    response = client.post(
        action_url("submit", assignment_id), {"choice": "right_slight"}, content_type="application/json"
    )
    assert response.status_code == 400
    assert "justification" in response.json()["detail"]
    response = client.post(
        action_url("submit", assignment_id),
        {"choice": "right_slight", "justification": "fewer errors"},
        content_type="application/json",
    )
    assert response.status_code == 200
    assignment = Assignment.objects.get(pk=assignment_id)
    annotation = Annotation.objects.get(assignment=assignment)
    right = "safe" if assignment.left_system == "veriscore" else "veriscore"
    assert (annotation.preferred_system, annotation.strength, annotation.choice) == (right, "slight", "right_slight")


@pytest.mark.parametrize(
    "body, field",
    [
        ({"label": "maybe"}, "detail"),
        ({}, "detail"),
        ({"label": "supported", "evidence": [{"index": 7, "judgement": "support"}]}, "detail"),
        ({"label": "supported"}, "detail"),  # the study asks for a judgement of every passage
        ({"label": "supported", "evidence": [{"index": 1, "judgement": "support"}]}, "detail"),
        ({"label": "supported", "evidence": [{"index": 0, "judgement": "agree"}]}, "evidence"),
        ({"label": "supported", "active_ms": -5}, "active_ms"),
        ({"label": "supported", "rationale": "a", "justification": "b"}, "non_field_errors"),
    ],
)
def test_a_bad_answer_is_a_400_with_a_message(client, verification, body, field):
    study, _ = verification
    assignment_id = client.post(next_url(study)).json()["assignment"]["id"]
    response = client.post(action_url("submit", assignment_id), body, content_type="application/json")
    assert response.status_code == 400
    body = response.json()  # the one API error shape: detail, code, and fields for invalid input
    assert body["detail"]
    assert field == "detail" or field in {name.split("[")[0].split(".")[0] for name in body["fields"]}
    assert not Annotation.objects.exists()
    assert Assignment.objects.get(pk=assignment_id).status == "active"


def test_a_bad_preference_choice_is_a_400(client):
    study, (a1, *_) = make_study(kind="preference", items=1)
    client.force_login(a1)
    assignment_id = client.post(next_url(study)).json()["assignment"]["id"]
    response = client.post(action_url("submit", assignment_id), {"choice": "left"}, content_type="application/json")
    assert response.status_code == 400 and "choice" in response.json()["fields"]


def test_double_submit_stores_one_annotation(client, verification):
    study, _ = verification
    assignment_id = client.post(next_url(study)).json()["assignment"]["id"]
    for _ in range(2):
        response = client.post(
            action_url("submit", assignment_id), judged("supported"), content_type="application/json"
        )
        assert response.status_code == 200
    assert Annotation.objects.filter(assignment_id=assignment_id).count() == 1
    assert response.json()["progress"]["done"] == 1


def test_a_lost_lease_is_a_409(client, verification):
    study, (a1, a2, _) = verification
    held = claim_next(user=a1, study=study)
    claim_next(user=a2, study=study, now=held.lease_expires_at + timedelta(seconds=1))
    response = client.post(action_url("submit", held.pk), judged("supported"), content_type="application/json")
    assert response.status_code == 409
    assert "ran out" in response.json()["detail"]
    assert not Annotation.objects.exists()


def test_another_annotators_assignment_is_a_409_not_a_silent_write(client, verification):
    study, (_a1, a2, _) = verification
    theirs = claim_next(user=a2, study=study)
    for action, body in (("submit", judged("supported")), ("skip", {}), ("flag", {"reason": "x"})):
        response = client.post(action_url(action, theirs.pk), body, content_type="application/json")
        assert response.status_code == 409, action
    assert Assignment.objects.get(pk=theirs.pk).status == "active"


def test_skip_and_flag(client, verification):
    study, _ = verification
    assignment_id = client.post(next_url(study)).json()["assignment"]["id"]
    response = client.post(action_url("flag", assignment_id), {"reason": ""}, content_type="application/json")
    assert response.status_code == 400
    response = client.post(
        action_url("flag", assignment_id), {"reason": "evidence is in French"}, content_type="application/json"
    )
    assert response.status_code == 200 and response.json()["assignment"]["flagged"] is True
    response = client.post(action_url("skip", assignment_id))
    assert response.status_code == 200
    assert response.json()["assignment"]["status"] == "skipped"
    assert response.json()["progress"] == {"done": 0, "total": 3, "total_exact": True}
    stored = Assignment.objects.get(pk=assignment_id)
    assert (stored.flagged, stored.flag_reason, stored.status) == (True, "evidence is in French", "skipped")


def test_researchers_and_closed_studies_are_refused_with_403(client, verification, researcher):
    study, (a1, *_) = verification
    add_members(study=study, usernames=[researcher.username], role="researcher")
    assignment_id = client.post(next_url(study)).json()["assignment"]["id"]
    client.force_login(researcher)
    assert client.post(next_url(study)).status_code == 403
    assert (
        client.post(
            action_url("submit", assignment_id), judged("supported"), content_type="application/json"
        ).status_code
        == 403
    )
    client.force_login(a1)
    set_study_status(study=study, status="closed")
    assert client.post(next_url(study)).status_code == 403
    response = client.post(action_url("submit", assignment_id), judged("supported"), content_type="application/json")
    assert response.status_code == 403 and "closed" in response.json()["detail"]
    assert response.json()["code"] == "permission_denied"


def test_contention_is_a_503_with_retry_after(client, verification, monkeypatch):
    from annotation.workbench import services as assignments

    def contended(**kwargs):
        raise assignments.ClaimContention("busy")

    monkeypatch.setattr(assignments, "claim_next", contended)
    study, _ = verification
    response = client.post(next_url(study))
    assert response.status_code == 503 and response["Retry-After"] == "1"
    assert response.json() == {"detail": "busy", "code": "busy"}  # the one error shape


def test_anonymous_is_refused(client, verification):
    study, (a1, *_) = verification
    client.logout()
    assignment = claim_next(user=a1, study=study)
    assert client.post(next_url(study)).status_code in (401, 403)
    assert client.post(action_url("submit", assignment.pk), {"label": "supported"}).status_code in (401, 403)


def test_token_auth_works_without_csrf(client, verification):
    study, (a1, *_) = verification
    client.logout()
    token = issue_token(user=a1)
    auth = {"HTTP_AUTHORIZATION": f"Token {token.key}"}
    assignment_id = client.post(next_url(study), **auth).json()["assignment"]["id"]
    response = client.post(
        action_url("submit", assignment_id), judged("inconclusive"), content_type="application/json", **auth
    )
    assert response.status_code == 200


# --- scoping: the /api/assignments/{id}/... routes carry no slug ----------------------------


def assignment_routes() -> list[str]:
    """Every named route that takes an assignment id and no study slug (enumerated, so new ones are covered).

    Routes that also carry a slug are checked by tests/annotation/test_access.py.
    """
    found = []

    def walk(patterns, namespace=None):
        for entry in patterns:
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, entry.namespace or namespace)
            elif isinstance(entry, URLPattern) and entry.name:
                groups = entry.pattern.regex.groupindex
                if "assignment_id" in groups and "slug" not in groups:
                    found.append(f"{namespace}:{entry.name}" if namespace else entry.name)

    walk(get_resolver().url_patterns)
    return found


def test_assignment_routes_are_enumerated():
    assert {"api-assignment-submit", "api-assignment-skip", "api-assignment-flag"} <= set(assignment_routes())


@pytest.mark.parametrize("auth", ["session", "token"])
def test_a_non_member_gets_404_on_every_assignment_route(client, make_user, auth):
    study, (a1, *_) = make_study(items=2)
    other, _ = make_study(slug="other", items=1)
    outsider = make_user("mallory")
    add_members(study=other, usernames=["mallory"], role="annotator")  # an annotator, but of another study
    assignment = claim_next(user=a1, study=study)
    headers = {}
    if auth == "session":
        client.force_login(outsider)
    else:
        headers["HTTP_AUTHORIZATION"] = f"Token {issue_token(user=outsider).key}"
    for name in assignment_routes():
        for assignment_id in (assignment.pk, assignment.pk + 10_000):  # someone's, and nobody's
            url = reverse(name, kwargs={"assignment_id": assignment_id})
            response = client.post(
                url, {"label": "supported", "reason": "x"}, content_type="application/json", **headers
            )
            assert response.status_code == 404, f"POST {url} gave {response.status_code}"
            assert client.get(url, **headers).status_code == 404
    assert Assignment.objects.get(pk=assignment.pk).status == "active"
    assert not Annotation.objects.exists()


def test_schema_documents_the_annotate_routes(client, researcher):
    client.force_login(researcher)
    schema = client.get(reverse("api-schema"), HTTP_ACCEPT="application/json").json()
    paths = schema["paths"]
    assert set(paths["/api/studies/{slug}/assignments/next"]["post"]["responses"]) >= {"200", "204", "403", "404"}
    submit = paths["/api/assignments/{assignment_id}/submit"]["post"]
    assert set(submit["responses"]) >= {"200", "400", "404", "409"}
    components = schema["components"]["schemas"]
    assert components["PreferenceChoiceEnum"]["enum"] == [
        "left_strong",
        "left_slight",
        "tie",
        "right_slight",
        "right_strong",
        "both_bad",
    ]
    request = components["SubmitAnswerRequest"]["properties"]
    assert {"label", "evidence", "rationale", "choice", "justification", "active_ms"} <= set(request)
    assert {"preference", "verification"} <= set(components["DisplayItem"]["discriminator"]["mapping"])
    for path in ("/api/assignments/{assignment_id}/skip", "/api/assignments/{assignment_id}/flag"):
        assert "409" in paths[path]["post"]["responses"]


# --- query counts stay flat as the study grows ------------------------------------------

ANSWERS = {"verification": {"label": "supported"}, "preference": {"choice": "left_slight"}}
#: Measured: next 14 (12 when reclaiming), submit 10, with session auth (2 of them); token auth needs one fewer.
MAX_QUERIES = 14


def annotate_once(client, study, django_assert_max_num_queries) -> tuple[int, int]:
    """Queries for one `next` and one `submit` through the API (each also bounded)."""
    with django_assert_max_num_queries(MAX_QUERIES), CaptureQueriesContext(connection) as next_queries:
        response = client.post(next_url(study))
    assert response.status_code == 200
    assignment_id = response.json()["assignment"]["id"]
    with django_assert_max_num_queries(MAX_QUERIES), CaptureQueriesContext(connection) as submit_queries:
        response = client.post(
            action_url("submit", assignment_id), ANSWERS[study.kind], content_type="application/json"
        )
    assert response.status_code == 200
    return len(next_queries), len(submit_queries)


@pytest.mark.parametrize("kind", ["verification", "preference"])
def test_annotate_api_query_count_does_not_grow_with_the_study(client, django_assert_max_num_queries, kind):
    """The same number of queries for 10 and 1,000 items, on each claim path: fresh slot, joining, reclaiming."""
    counts = {}
    for size in (10, 1000):
        study, (a1, a2, a3, a4) = make_study(kind=kind, slug=f"{kind[:4]}-{size}", items=size, annotators=4)
        answer = SubmittedAnswer(**ANSWERS[kind])
        client.force_login(a1)
        fresh = annotate_once(client, study, django_assert_max_num_queries)  # nothing in progress: a fresh slot
        first = Assignment.objects.get(annotator=a1)
        assert first.slot == 0
        for user in (a2, a3):
            assert claim_next(user=user, study=study).item_id == first.item_id  # now full
        held = claim_next(user=a4, study=study)  # a fresh item, one slot taken
        joined = annotate_once(client, study, django_assert_max_num_queries)  # breadth-first: a1 joins a4's item
        assert Assignment.objects.get(annotator=a1, item_id=held.item_id).slot == 1
        submit(user=a4, study=study, assignment_id=held.pk, answer=answer)
        abandoned = claim_next(user=a4, study=study)  # ... and walks away from the next one
        Assignment.objects.filter(pk=abandoned.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
        reclaimed = annotate_once(client, study, django_assert_max_num_queries)  # a1 takes the slot over
        taken = Assignment.objects.get(annotator=a1, item_id=abandoned.item_id)
        assert (taken.slot, taken.status) == (abandoned.slot, "submitted")
        counts[size] = (fresh, joined, reclaimed)
    assert counts[10] == counts[1000], counts


def test_an_id_beyond_any_stored_one_is_a_404(client):
    """Hand-written SQL must not pass an out-of-range id to the driver (SQLite raised OverflowError)."""
    _study, (a1, *_) = make_study(items=2)
    client.force_login(a1)
    for action in ("submit", "skip", "flag"):
        response = client.post(
            action_url(action, 10**30), {"label": "supported", "reason": "x"}, content_type="application/json"
        )
        assert response.status_code == 404, action
