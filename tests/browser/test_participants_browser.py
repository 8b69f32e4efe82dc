"""Crowd participants in a real browser (issue 13): three people arrive through the study link with
Prolific's parameters, each in their own browser context (their own device), consent, pass the
qualification and label their quota with the keyboard; one fails two attention checks and is
screened out; two finish and are sent back to the completion URL with the completed code. The
researcher then reads the payment table with their active minutes. Screenshots of the consent,
item, end and researcher pages at 1280x800 and 390x844 (under $CLAIMLAB_SCREENSHOTS when set,
else the test's tmp dir); no page scrolls sideways.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.crowd.selectors import payment_rows
from annotation.models import Participant, ParticipantCheck
from tests.annotation.crowd_support import crowd_study, gold_only_as_checks
from tests.browser.screens import shoot_sizes
from tests.support.crowd_browser import consent_and_start, device, label_by_keyboard

pytestmark = pytest.mark.browser


@pytest.mark.django_db(transaction=True)
def test_three_participants_arrive_through_the_link_and_the_researcher_reads_the_payment_table(
    browser, live_server, page, guard, shots, researcher
):
    done_url = f"{live_server.url}{reverse('login')}?cc={{code}}"  # a local stand-in for Prolific's completion page
    study, link = crowd_study(
        "crowd-browser",
        items=6,
        n=2,
        gold=3,
        researcher=researcher.username,
        consent="You will label **claims**. Your answers are stored under a pseudonym.",
        qualification_items=["g-0"],
        qualification_pass=1,
        attention_items=["g-1", "g-2"],
        attention_every=1,
        attention_fail_limit=2,
        items_per_participant=3,
        redirect_url=done_url,
    )
    gold_only_as_checks(study)  # the checks come in a fixed order whatever the study's seed
    problems: list[str] = []
    outcomes = {}
    for pid, check_key in (("5f0a0000000000000000000a", "s"), ("5f0b0000000000000000000b", "s"), ("5f0c00c", "c")):
        context, person = device(browser, live_server, problems)
        first = pid.endswith("a")
        consent_and_start(person, link, pid, shots if first else None)
        assert person.locator("#wb-qualifying").is_visible()
        label_by_keyboard(person, "s")  # the qualification: gold says supported
        if first:
            shoot_sizes(person, shots, "participant-item")
        label_by_keyboard(person, "s")  # item 1
        label_by_keyboard(person, check_key)  # attention check 1
        label_by_keyboard(person, "s")  # item 2
        label_by_keyboard(person, check_key)  # attention check 2: the second failure screens out
        if check_key == "s":
            label_by_keyboard(person, "s")  # item 3: the quota
            person.wait_for_url("**cc=DONE123", timeout=15_000)  # the end page sends them back to the panel
            outcomes[pid] = "completed"
        else:
            assert person.locator("#end-title").inner_text() == "Thank you for your time"
            assert person.locator("#end-code").inner_text() == "SCREEN9"
            if not first:
                shoot_sizes(person, shots, "participant-end")
            outcomes[pid] = "screened_out"
        assert person.evaluate("window.__cspViolations || []") == []
        context.close()
    assert problems == [], problems
    statuses = dict(Participant.objects.filter(study=study).values_list("panel_id", "status"))
    assert statuses == outcomes and sorted(outcomes.values()) == ["completed", "completed", "screened_out"]
    failed = ParticipantCheck.objects.filter(participant__panel_id="5f0c00c", kind="attention", correct=False)
    assert failed.count() == 2

    # The researcher's page: the link and the payment table with active minutes.
    url = reverse("annotation:study_participants", args=[study.slug])
    page.goto(f"{reverse('login')}?next={url}")
    page.locator("#id_username").fill(researcher.username)
    page.locator("#id_password").fill(f"pw-{researcher.username}")
    with page.expect_navigation():
        page.locator("button[type=submit]").click()
    page.locator("#payment-table").wait_for()
    rows = {row.panel_id: row for row in payment_rows(study, link)}
    for pid in outcomes:
        cells = page.locator(f'tr[data-panel-id="{pid}"]')
        assert cells.locator(".active-minutes").inner_text() == str(rows[pid].active_minutes)
        assert rows[pid].active_minutes > 0
        assert cells.locator(".participant-status").inner_text() == Participant.Status(outcomes[pid]).label
    shoot_sizes(page, shots, "participants-researcher")
    guard.assert_clean(page)
