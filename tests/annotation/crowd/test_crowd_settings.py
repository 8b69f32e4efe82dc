"""Crowd settings that fill themselves in right (issue 34, finding 2): the check-item picker and the item
list's "has gold" filter, help on every setting, the currency, pay by active or wall time, the "no places
left" page, and the link's settings through the API."""

from __future__ import annotations

import csv
import datetime as dt
import html
import io
import re
from decimal import ROUND_HALF_UP, Decimal

import pytest
from babel.core import get_global
from babel.numbers import get_territory_currencies, list_currencies
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation.crowd import services as crowd
from annotation.crowd.currencies import CURRENCIES
from annotation.crowd.forms import ParticipantLinkForm
from annotation.crowd.link_fields import LINK_TEXT
from annotation.crowd.selectors import check_need, payment_rows, payment_summary
from annotation.errors import ServiceError
from annotation.members.services import add_members
from annotation.models import Item, Participant, ParticipantLink, QuestionnaireResponse
from annotation.studies.services import create_study
from annotation.transfer.services.item_import import import_items
from annotation.workbench.services import SubmittedAnswer, claim_next, submit
from tests.annotation.crowd_support import PROLIFIC_DONE, arrival_url, crowd_study, gold_only_as_checks
from tests.conftest import jsonl, verification_item

pytestmark = pytest.mark.django_db


def picker_url(study, which: str) -> str:
    return reverse("annotation:participant_checks", args=[study.slug, which])


def another_study_with(external_id: str) -> None:
    """A gold item in another study: its id names nothing in the study under test."""
    other = create_study(slug="elsewhere", name="Elsewhere", kind="verification", annotators_per_item=1)
    import_items(study=other, stream=jsonl(verification_item(external_id, gold="supported")), fmt="jsonl")


def settings_api(study) -> str:
    return reverse("api-participant-link", args=[study.slug])


# --- the check-item picker ------------------------------------------------------------------


def test_the_picker_lists_gold_items_searches_by_id_and_text_and_pages(client, researcher):
    study, _link = crowd_study("pick", items=3, gold=30, researcher=researcher.username)
    client.force_login(researcher)
    page = client.get(picker_url(study, "attention"))
    assert page.status_code == 200
    shown = [item.external_id for item in page.context["page"]]
    assert len(shown) == 25 and all(external_id.startswith("g-") for external_id in shown)  # gold only, 25 a page
    assert page.context["page"].paginator.count == 30
    second = client.get(picker_url(study, "attention"), {"page": 2})
    assert [item.external_id for item in second.context["page"]] == [f"g-{k}" for k in range(25, 30)]
    by_id = client.get(picker_url(study, "attention"), {"q": "g-2"})
    assert {item.external_id for item in by_id.context["page"]} == {"g-2", *(f"g-{k}" for k in range(20, 30))}
    Item.objects.filter(study=study, external_id="g-7").update(summary="Marie Curie won two Nobel prizes.")
    by_text = client.get(picker_url(study, "attention"), {"q": "nobel"})
    assert [item.external_id for item in by_text.context["page"]] == ["g-7"]
    everything = client.get(picker_url(study, "attention"), {"gold": "all"})
    assert everything.context["page"].paginator.count == 33
    text = everything.content.decode()
    # An item without gold is shown but cannot be ticked, and says why.
    assert re.search(r'<tr data-id="i-00">\s*<td class="pick"><input type="checkbox" disabled', text)
    assert "no gold label: cannot check anyone" in text


def test_the_picker_adds_ticked_and_pasted_items_and_takes_off_unticked_ones(client, researcher):
    study, link = crowd_study("pick-save", researcher=researcher.username, gold=6, attention_items=["g-0", "g-1"])
    client.force_login(researcher)
    url = picker_url(study, "attention") + "?q=g&gold=yes"
    response = client.post(url, {"shown": ["g-0", "g-1"], "keep": ["g-1"], "add": ["g-3"], "add_ids": "g-5,\ng-4"})
    assert response.status_code == 302 and response["Location"] == url  # back to the same search
    link.refresh_from_db()
    assert link.attention_items == ["g-1", "g-3", "g-5", "g-4"]
    assert set(Item.objects.filter(study=study, is_check=True).values_list("external_id", flat=True)) == {
        "g-1",
        "g-3",
        "g-4",
        "g-5",
    }
    # An item another researcher added meanwhile (not on this page's list) is kept.
    crowd.edit_check_items(study=study, which="attention", add=["g-2"])
    client.post(url, {"shown": ["g-1", "g-3", "g-5", "g-4"], "keep": ["g-1", "g-3", "g-5", "g-4"]})
    link.refresh_from_db()
    assert link.attention_items == ["g-1", "g-3", "g-5", "g-4", "g-2"]


@pytest.mark.parametrize(
    ("posted", "message"),
    [
        ({"add_ids": "i-01"}, "without a gold label cannot score anyone: i-01"),
        ({"add_ids": "elsewhere-1"}, "no such item(s) in this study: elsewhere-1"),
        ({"shown": ["g-0"], "keep": []}, "qualification_pass: 1 correct answers are asked for but there are only 0"),
    ],
)
def test_the_picker_refuses_naming_the_problem_and_changes_nothing(client, researcher, posted, message):
    study, link = crowd_study(
        "pick-bad", researcher=researcher.username, qualification_items=["g-0"], qualification_pass=1
    )
    another_study_with("elsewhere-1")
    client.force_login(researcher)
    response = client.post(picker_url(study, "qualification"), posted)
    assert response.status_code == 400 and message in response.content.decode()
    link.refresh_from_db()
    assert link.qualification_items == ["g-0"]


def test_the_picker_and_the_settings_page_show_what_a_full_quota_needs_and_warn_when_short(client, researcher):
    study, link = crowd_study(
        "pick-need",
        researcher=researcher.username,
        items_per_participant=20,
        attention_items=["g-0", "g-1"],
        attention_every=5,
    )
    client.force_login(researcher)
    page = client.get(picker_url(study, "attention"))
    need = page.context["need"]
    assert (need.chosen, need.usable, need.needed, need.short) == (2, 2, 3, True)
    text = page.content.decode()
    assert re.search(r'id="picker-need" class="msg msg-warning"', text)
    assert '<span class="small" id="picker-short">Too few: choose at least 3' in text  # not hidden
    assert "after items 5, 10, 15" in text
    settings = client.get(reverse("annotation:study_participants", args=[study.slug])).content.decode()
    assert re.search(r'id="need-attention"[^>]*>', settings)
    assert 'class="small check-need msg msg-warning" id="need-attention"' in settings
    assert "There are only 2 usable: choose 3 or more." in settings
    client.post(picker_url(study, "attention"), {"add": ["g-2"]})
    link.refresh_from_db()
    enough = client.get(picker_url(study, "attention"))
    assert enough.context["need"].short is False
    assert '<span class="small" id="picker-short" hidden>' in enough.content.decode()


@pytest.mark.parametrize(
    ("quota", "every", "attention", "qualification", "needed", "usable"),
    [
        (20, 5, ["g-0", "g-1", "g-2"], [], 3, 3),
        (21, 5, ["g-0", "g-1"], [], 4, 2),
        (20, 5, ["g-0", "g-1", "g-2"], ["g-0"], 3, 2),  # a qualification item is answered by then
        (20, 0, ["g-0"], [], 0, 1),
        (1, 1, ["g-0"], [], 0, 1),  # one item: its answer ends the session, no check after it
    ],
)
def test_the_attention_need_follows_the_rule_the_participants_meet(
    quota, every, attention, qualification, needed, usable
):
    _study, link = crowd_study(
        "need-rule",
        gold=4,
        items_per_participant=quota,
        attention_items=attention,
        attention_every=every,
        qualification_items=qualification,
    )
    need = check_need(link, "attention")
    assert (need.chosen, need.usable, need.needed) == (len(attention), usable, needed)
    if attention and every:
        assert need.needed == crowd.attention_checks_due(link)  # the rule the session follows


def test_the_qualification_need_is_the_pass_mark():
    _study, link = crowd_study("need-q", qualification_items=["g-0", "g-1", "g-2"], qualification_pass=2)
    need = check_need(link, "qualification")
    assert (need.chosen, need.needed, need.short) == (3, 2, False)
    assert "needs 2 correct answer(s) to qualify" in need.explanation


def test_the_picker_is_for_the_studys_researchers_only(client, researcher, annotator, make_user):
    study, _ = crowd_study("pick-who", researcher=researcher.username)
    add_members(study=study, usernames=[annotator.username], role="annotator")
    for user in (annotator, make_user("outsider")):
        client.force_login(user)
        assert client.get(picker_url(study, "attention")).status_code == 404
        assert client.post(picker_url(study, "attention"), {"add": ["g-0"]}).status_code == 404
    client.force_login(researcher)
    assert client.get(picker_url(study, "colour")).status_code == 404
    assert ParticipantLink.objects.get(study=study).attention_items == []


def test_the_item_list_filters_by_has_gold(client, researcher):
    study, _ = crowd_study("list-gold", items=3, gold=2, researcher=researcher.username)
    client.force_login(researcher)
    url = reverse("annotation:item_list", args=[study.slug])

    def ids(**query) -> set[str]:
        return {item.external_id for item in client.get(url, query).context["page"]}

    assert ids(gold="yes") == {"g-0", "g-1"}
    assert ids(gold="no") == {"i-00", "i-01", "i-02"}
    assert ids() == ids(gold="") == {"g-0", "g-1", "i-00", "i-01", "i-02"}
    assert 'option value="yes" selected' in client.get(url, {"gold": "yes"}).content.decode()


# --- help on every field --------------------------------------------------------------------


def test_every_setting_has_help_with_an_example_on_the_page_and_in_the_schema(client, researcher):
    assert set(LINK_TEXT) == set(crowd.LINK_FIELDS)
    for name, (_label, text) in LINK_TEXT.items():
        assert re.search(r"\be\.g\.", text, re.IGNORECASE), name
    study, _ = crowd_study("help", researcher=researcher.username)
    client.force_login(researcher)
    page = client.get(reverse("annotation:study_participants", args=[study.slug])).content.decode()
    for name in ParticipantLinkForm.base_fields:
        assert f'id="id_{name}_helptext"' in page, name
        if name not in ("pay_basis",):  # radios: the help is inside their fieldset
            assert re.search(rf'<[^>]*aria-describedby="id_{name}_helptext"[^>]*id="id_{name}"', page) or re.search(
                rf'<[^>]*id="id_{name}"[^>]*aria-describedby="id_{name}_helptext"', page
            ), name
    for which in ("qualification", "attention"):  # the lists' help, beside their picker's link
        assert LINK_TEXT[f"{which}_items"][1] in page
    schema = client.get(reverse("api-schema"), HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    properties = schema["components"]["schemas"]["ParticipantLinkSettings"]["properties"]
    for name in crowd.LINK_FIELDS:
        assert LINK_TEXT[name][1] in properties[name]["description"], name


# --- currency -------------------------------------------------------------------------------


def test_the_currencies_are_the_iso_codes_in_use_by_babel():
    """An independent reference: Unicode CLDR through Babel, legal tender somewhere on the list's date."""
    day = dt.date(2026, 1, 1)
    tender = {
        code
        for territory in get_global("territory_currencies")
        for code in get_territory_currencies(territory, day, tender=True)
    }
    assert set(CURRENCIES) == tender
    assert set(CURRENCIES) <= set(list_currencies())
    assert {"GBP", "USD", "EUR", "JPY", "CHF"} <= set(CURRENCIES)
    assert not {"DEM", "HRK", "XAU", "BOV", "XYZ"} & set(CURRENCIES)  # withdrawn, metal, funds, none


@pytest.mark.parametrize(("given", "stored"), [("usd", "USD"), (" EUR ", "EUR"), ("JPY", "JPY")])
def test_a_currency_is_an_iso_code_read_in_any_case(given, stored):
    study, _ = crowd_study("cur-ok")
    assert crowd.configure_link(study=study, changes={"currency": given}).currency == stored


@pytest.mark.parametrize("given", ["XYZ", "", "pounds", "DEM", 5])
def test_an_unknown_currency_is_refused(given):
    study, link = crowd_study("cur-bad")
    with pytest.raises(ServiceError, match=r"currency: .* ISO 4217|currency: give a text"):
        crowd.configure_link(study=study, changes={"currency": given})
    link.refresh_from_db()
    assert link.currency == "GBP"


# --- pay by active or wall time -------------------------------------------------------------

T0 = timezone.make_aware(dt.datetime(2026, 3, 2, 9, 0, 0))


def minutes(n: float) -> dt.timedelta:
    return dt.timedelta(minutes=n)


def _paid_session(link):
    """One participant with known times: arrival T0, consent at +2 min, two items of 60 s and 90 s active
    and a check of 30 s, the session ended at +20 min, the post-study questionnaire answered at +23 min."""
    participant = crowd.arrive(link=link, ids=crowd.PanelIds("PAY-1"), now=T0)
    crowd.accept_consent(participant=participant, now=T0 + minutes(2))
    crowd.start(participant=participant, link=link, now=T0 + minutes(4))
    user, study = participant.member.user, participant.study
    for active_ms in (60_000, 90_000):
        assignment = claim_next(user=user, study=study)
        submit(
            user=user,
            study=study,
            assignment_id=assignment.pk,
            answer=SubmittedAnswer(label="supported", active_ms=active_ms),
        )
    gold = Item.objects.get(study=study, external_id="g-0")
    Participant.objects.filter(pk=participant.pk).update(status=Participant.Status.WORKING)
    crowd.answer_check(
        participant=participant, link=link, item=gold, answer=SubmittedAnswer(label="supported", active_ms=30_000)
    )
    crowd.end(participant=participant, status=Participant.Status.COMPLETED, now=T0 + minutes(20))
    QuestionnaireResponse.objects.create(
        study=study, respondent=user, kind="pre", answers={}, answered_at=T0 + minutes(3)
    )
    QuestionnaireResponse.objects.create(
        study=study, respondent=user, kind="post", answers={}, answered_at=T0 + minutes(23)
    )
    return participant


def _owed(minutes_worked: Decimal, rate: Decimal) -> Decimal:
    return (minutes_worked / 60 * rate).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def test_pay_follows_the_basis_and_both_times_are_kept(client, researcher):
    study, link = crowd_study("pay-basis", researcher=researcher.username, pay_per_hour="12.00", currency="USD")
    gold_only_as_checks(study)
    _paid_session(link)
    active, wall = Decimal("3.0"), Decimal("23")  # 60 + 90 + 30 s; T0 to the post questionnaire's answer
    [row] = payment_rows(study, link)
    assert (row.active_minutes, row.wall_minutes, row.pay, row.currency) == (3.0, 23.0, _owed(active, 12), "USD")
    link = crowd.configure_link(study=study, changes={"pay_basis": "wall"})
    [row] = payment_rows(study, link)
    assert (row.active_minutes, row.wall_minutes, row.pay) == (3.0, 23.0, _owed(wall, 12))
    summary = payment_summary(study, link, [row])
    assert (summary.cost_so_far, summary.currency, summary.pay_basis) == (Decimal("4.60"), "USD", "wall")

    client.force_login(researcher)
    page = client.get(reverse("annotation:study_participants", args=[study.slug])).content.decode()
    assert "Pay (USD, wall time)" in page and "4.60 USD" in page
    assert re.search(r'id="pay-basis">Pay is by <strong>wall time</strong>', page)
    assert re.search(r'<th class="num paid">Wall min <span class="paid-mark">\(paid\)</span>', page)
    response = client.get(reverse("annotation:participant_payments_csv", args=[study.slug]))
    [record] = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert {k: record[k] for k in ("active_minutes", "wall_minutes", "pay", "currency", "pay_basis")} == {
        "active_minutes": "3.0",
        "wall_minutes": "23.0",
        "pay": "4.60",
        "currency": "USD",
        "pay_basis": "wall",
    }
    api = client.get(reverse("api-participant-payments", args=[study.slug])).json()
    assert api["summary"]["currency"] == "USD" and api["summary"]["pay_basis"] == "wall"
    assert api["participants"][0]["pay"] == "4.60" and api["participants"][0]["currency"] == "USD"


def test_wall_time_of_someone_still_going_runs_to_their_last_sign_of_life():
    study, link = crowd_study("pay-wall", pay_per_hour="6.00", pay_basis="wall")
    participant = crowd.arrive(link=link, ids=crowd.PanelIds("GOING"), now=T0)
    crowd.accept_consent(participant=participant, now=T0 + minutes(1))
    crowd.seen(participant, now=T0 + minutes(10))
    [row] = payment_rows(study, link)
    assert (row.status, row.active_minutes, row.wall_minutes, row.pay) == ("instructions", 0.0, 10.0, Decimal("1.00"))


def test_a_bad_pay_basis_is_refused():
    study, link = crowd_study("pay-bad")
    with pytest.raises(ServiceError, match=r"pay_basis: 'active' .* or 'wall'"):
        crowd.configure_link(study=study, changes={"pay_basis": "both"})
    link.refresh_from_db()
    assert link.pay_basis == "active"


# --- no places left -------------------------------------------------------------------------


def test_an_arrival_after_the_cap_gets_the_no_places_page_with_its_code_and_redirect():
    study, link = crowd_study("full", max_participants=1, code_full="NOPLACES")
    first, second = Client(), Client()
    assert first.get(arrival_url(link, "first")).status_code == 302
    response = second.get(arrival_url(link, "second"))
    text = response.content.decode()
    assert response.status_code == 410 and 'id="end-title">No places left' in text
    assert '<strong class="completion-code" id="end-code">NOPLACES</strong>' in text
    back = PROLIFIC_DONE.replace("{code}", "NOPLACES")
    assert f'content="5;url={back}"' in text and f'href="{back}"' in text
    assert list(Participant.objects.filter(study=study).values_list("panel_id", flat=True)) == ["first"]
    assert first.get(arrival_url(link, "first")).status_code == 302  # a returning participant still gets in


def test_without_a_no_places_code_the_page_says_so_and_sends_nobody_anywhere():
    _study, link = crowd_study("full-nocode", max_participants=1)
    Client().get(arrival_url(link, "first"))
    text = Client().get(arrival_url(link, "second")).content.decode()
    assert "No places left" in text and "end-code" not in text and "http-equiv" not in text


# --- the link's settings through the API ----------------------------------------------------


def test_the_api_reads_and_changes_the_links_settings(client, researcher):
    study, link = crowd_study("api-link", researcher=researcher.username, items_per_participant=20)
    client.force_login(researcher)
    body = client.get(settings_api(study)).json()
    assert body["token"] == link.token and body["url"].endswith(
        f"/p/{link.token}/?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}&STUDY_ID={{{{%STUDY_ID%}}}}"
        f"&SESSION_ID={{{{%SESSION_ID%}}}}"
    )
    assert (body["currency"], body["pay_basis"], body["code_completed"]) == ("GBP", "active", "DONE123")
    assert body["checks"]["attention"] == {
        "chosen": 0,
        "usable": 0,
        "needed": 0,
        "short": False,
        "explanation": "No attention checks (a check after every 0 items): chosen items wait unused.",
    }
    changed = client.patch(
        settings_api(study),
        {
            "attention_items": ["g-0", "g-1"],
            "attention_every": 5,
            "currency": "eur",
            "pay_basis": "wall",
            "pay_per_hour": "10.50",
            "code_full": "NOPLACES",
            "max_participants": None,
        },
        content_type="application/json",
    )
    assert changed.status_code == 200, changed.content
    body = changed.json()
    assert (body["currency"], body["pay_basis"], body["pay_per_hour"]) == ("EUR", "wall", "10.50")
    assert body["checks"]["attention"]["needed"] == 3 and body["checks"]["attention"]["short"] is True
    assert body["warnings"] and "needs 3 attention check item(s)" in body["warnings"][0]
    link.refresh_from_db()
    assert (link.attention_items, link.attention_every, link.currency, link.code_full) == (
        ["g-0", "g-1"],
        5,
        "EUR",
        "NOPLACES",
    )
    assert set(Item.objects.filter(study=study, is_check=True).values_list("external_id", flat=True)) == {"g-0", "g-1"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"attention_items": ["i-00"]}, "attention_items: item(s) without a gold label cannot score anyone: i-00"),
        ({"currency": "XYZ"}, "currency: 'XYZ' is not an ISO 4217 code"),
        ({"qualification_items": ["elsewhere-1"]}, "qualification_items: no such item(s) in this study: elsewhere-1"),
        ({"token": "mine"}, "unknown field(s) 'token'"),
        ({"url": "https://example.org"}, "unknown field(s) 'url'"),
        ({"code_completed": "a b"}, "code_completed: letters, digits"),
        ({"items_per_participant": "7"}, "must be a whole number, got a string"),
        ({"redirect_url": "javascript:alert(1)"}, "redirect_url: an http(s) address"),
    ],
)
def test_the_api_refuses_bad_settings_naming_them_and_changes_nothing(client, researcher, body, message):
    study, link = crowd_study("api-bad", researcher=researcher.username)
    another_study_with("elsewhere-1")
    before = ParticipantLink.objects.filter(pk=link.pk).values().get()
    client.force_login(researcher)
    response = client.patch(settings_api(study), body, content_type="application/json")
    assert response.status_code == 400 and message in str(response.json()), response.json()
    assert ParticipantLink.objects.filter(pk=link.pk).values().get() == before


def test_the_form_and_the_api_refuse_alike_through_the_one_service(client, researcher):
    study, _ = crowd_study("api-same", researcher=researcher.username)
    client.force_login(researcher)
    page_url = reverse("annotation:study_participants", args=[study.slug])
    data = {**client.get(page_url).context["form"].initial, "max_participants": "", "budget_minutes": ""}
    page = client.post(page_url, {**data, "currency": "XYZ"})
    api = client.patch(settings_api(study), {"currency": "XYZ"}, content_type="application/json")
    assert page.status_code == api.status_code == 400
    message = api.json()["detail"]
    assert message.startswith("currency:") and html.escape(message) in page.content.decode()


def test_only_the_studys_researchers_read_or_change_the_settings(client, researcher, annotator, make_user):
    study, link = crowd_study("api-who", researcher=researcher.username)
    add_members(study=study, usernames=[annotator.username], role="annotator")
    rotate = reverse("api-participant-link-rotate", args=[study.slug])
    assert client.get(settings_api(study)).status_code in (401, 403)
    for user in (annotator, make_user("outsider")):
        client.force_login(user)
        assert client.get(settings_api(study)).status_code == 404
        response = client.patch(settings_api(study), {"currency": "USD"}, content_type="application/json")
        assert response.status_code == 404 and response.json()["code"] == "not_found"
        assert client.post(rotate).status_code == 404
    link.refresh_from_db()
    assert link.currency == "GBP" and crowd.find_link(link.token) is not None


def test_rotation_is_its_own_action_and_the_old_link_stops_working(client, researcher):
    study, link = crowd_study("api-rotate", researcher=researcher.username)
    client.force_login(researcher)
    response = client.post(reverse("api-participant-link-rotate", args=[study.slug]))
    assert response.status_code == 200
    new = response.json()["token"]
    assert new != link.token and crowd.find_link(link.token) is None and crowd.find_link(new) is not None
    assert response.json()["rotated_at"] is not None


def test_the_schema_documents_the_settings_routes(client):
    schema = client.get(reverse("api-schema"), HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    route = schema["paths"]["/api/studies/{slug}/participants/link"]
    assert {"get", "patch"} <= set(route) and "put" not in route
    assert "post" in schema["paths"]["/api/studies/{slug}/participants/link/rotate"]
    request = schema["components"]["schemas"]["PatchedParticipantLinkSettingsRequest"]
    assert request["additionalProperties"] is False
    assert "token" not in request["properties"] and "url" not in request["properties"]
    [enum] = request["properties"]["pay_basis"]["allOf"]
    assert schema["components"]["schemas"][enum["$ref"].rsplit("/", 1)[1]]["enum"] == ["active", "wall"]
    assert "token" in schema["components"]["schemas"]["ParticipantLinkSettings"]["properties"]
