"""A crowd participant's next item fetched ahead (issue 15 §1, for the crowd), in a real browser.

Items swap in without a page load; exact N with participants in lockstep; an attention check in
the middle is still a page of its own, shown and scored; the quota's end brings the completion
code; leaving gives the held item back; an answer given offline is kept and sent when back; a
lost lease is said. Screenshots of a swapped-in item at 1280 and 390 px.
"""

from __future__ import annotations

from collections import Counter

import pytest
from django.urls import reverse

from annotation.models import Annotation, Assignment, Item, Participant, ParticipantCheck
from tests.annotation.crowd_support import crowd_study, gold_only_as_checks
from tests.browser.screens import SIZES, shoot_sizes
from tests.support.crowd_browser import consent_and_start, device
from tests.support.page_waits import wait_until
from tests.support.workbench_browser import shown_item, submit_item, wait_saved

pytestmark = pytest.mark.browser

#: Set in the page once it is loaded: still there after a submit only if the page was not loaded again.
MARK = "window.__samePage = true"
SAME_PAGE = "window.__samePage === true"


def wait_ahead(page) -> None:
    """Until the item after the one on screen is here, or the server said none comes (a check, the end)."""
    wait_until(page, "() => ['ready', 'none'].includes(document.documentElement.getAttribute('data-ahead'))")


def answer(page, key: str = "s") -> None:
    """A moment on the item (so its active time counts), its label key, Enter; until the next step shows."""
    page.locator("#wb-stage .wb:not(.is-waiting) #wb-claim").wait_for()
    page.wait_for_timeout(120)
    submit_item(page, key, "Enter")


def is_check(page) -> bool:
    return (shown_item(page) or "").startswith("check-")


def active_ids(participant: Participant) -> list[int]:
    return sorted(
        Assignment.objects.filter(annotator=participant.member.user, status="active").values_list("pk", flat=True)
    )


def until(page, condition, what: str) -> None:
    """Poll the database (the page's beacons and background sends arrive on their own time), up to 5 s."""
    for _ in range(250):
        if condition():
            return
        page.wait_for_timeout(20)
    raise AssertionError(what)


@pytest.mark.django_db(transaction=True)
def test_items_swap_in_without_a_page_load_and_the_quota_ends_with_the_code(page, guard, shots):
    study, link = crowd_study("crowd-swap", items=8, n=1, items_per_participant=5, redirect_url="")
    consent_and_start(page, link, "5f0a00000000000000000swap")
    participant = Participant.objects.get(panel_id="5f0a00000000000000000swap")
    page.evaluate(MARK)
    seen = [shown_item(page)]
    for number in range(4):
        wait_ahead(page)
        answer(page)
        assert page.evaluate(SAME_PAGE), f"answer {number + 1}: the page was loaded again"
        seen.append(shown_item(page))
        if number == 1:
            wait_saved(page)
            assert "2 of 5 done" in page.locator(".wb-count").inner_text()
            shoot_sizes(page, shots, "participant-item-swapped")
    assert len(set(seen)) == 5 and all(value and value.isdigit() for value in seen)
    wait_saved(page)
    assert Annotation.objects.filter(assignment__study=study).count() == 4
    assert active_ids(participant) == [int(seen[-1])]  # the last of the quota: nothing held ahead of it
    with page.expect_navigation():
        answer(page)  # the quota's last item: the page goes on to the end
    assert page.locator("#end-title").inner_text() == "Thank you: you have finished"
    assert page.locator("#end-code").inner_text() == "DONE123"
    participant.refresh_from_db()
    assert participant.status == "completed" and active_ids(participant) == []
    stored = Annotation.objects.filter(assignment__annotator=participant.member.user)
    assert sorted(str(a.assignment_id) for a in stored) == sorted(seen)
    assert all(a.active_ms is not None and a.active_ms > 0 for a in stored)
    assert page.url.endswith(reverse("annotation:participant_step", args=[study.slug]))
    guard.assert_clean(page)


@pytest.mark.django_db(transaction=True)
def test_participants_in_lockstep_keep_exactly_n_and_their_attention_checks_are_shown_and_scored(browser, live_server):
    """Three participants, N = 2, 6 items, a quota of 4 each and a check after every 2 items: every
    item gets exactly 2 answers from 2 people, and each check is a page of its own, scored."""
    study, link = crowd_study(
        "crowd-lock",
        items=6,
        n=2,
        gold=2,
        items_per_participant=4,
        attention_items=["g-0", "g-1"],
        attention_every=2,
        redirect_url="",
    )
    gold_only_as_checks(study)
    problems: list[str] = []
    people = []
    for number, (pid, check_key) in enumerate((("lockA", "s"), ("lockB", "c"), ("lockC", "s"))):
        _context, person = device(browser, live_server, problems, viewport=SIZES["phone"] if number == 2 else None)
        consent_and_start(person, link, pid)
        person.evaluate(MARK)
        people.append((pid, check_key, person))
    loads = Counter()  # page loads after the first item, per participant
    finished: set[str] = set()
    while len(finished) < len(people):
        for pid, check_key, person in people:
            if pid in finished:
                continue
            if person.locator("#end-title").count():
                finished.add(pid)
                continue
            if not person.evaluate("window.__samePage === true"):
                loads[pid] += 1
                person.evaluate(MARK)
            if is_check(person):
                assert person.locator("#wb-claim").inner_text() in ("Claim g-0 is true.", "Claim g-1 is true.")
                with person.expect_navigation():
                    answer(person, check_key)
            else:
                wait_ahead(person)
                answer(person, "s")
    # every item: exactly N = 2 answers, by two different people
    per_item = Counter(Annotation.objects.filter(assignment__study=study).values_list("assignment__item", flat=True))
    assert sorted(per_item.values()) == [2] * 6
    for item_id in per_item:
        people_on_it = Annotation.objects.filter(assignment__item_id=item_id).values_list("assignment__annotator")
        assert len(set(people_on_it)) == 2
    assert not Assignment.objects.filter(study=study, status="active").exists()
    for pid, check_key, person in people:
        participant = Participant.objects.get(panel_id=pid)
        assert participant.status == "completed", pid
        checks = list(ParticipantCheck.objects.filter(participant=participant).values_list("kind", "correct"))
        assert checks == [("attention", check_key == "s")], pid  # after 2 items; the 4th ends the quota first
        assert person.locator("#end-code").inner_text() == "DONE123"
        # page loads after the first item: to the check and back from it; every other item swapped in
        assert loads[pid] == 2, (pid, loads)
        assert person.evaluate("window.__cspViolations || []") == []
        person.context.close()
    assert problems == [], problems


@pytest.mark.django_db(transaction=True)
def test_leaving_the_page_gives_the_item_held_ahead_back(page, guard):
    study, link = crowd_study("crowd-leave", items=4, n=1, items_per_participant=3, redirect_url="")
    consent_and_start(page, link, "leaver01")
    participant = Participant.objects.get(panel_id="leaver01")
    wait_ahead(page)
    on_screen = int(shown_item(page))
    until(page, lambda: len(active_ids(participant)) == 2, "no item was claimed ahead")
    page.goto(reverse("login"))  # away, elsewhere
    until(page, lambda: active_ids(participant) == [on_screen], "the item held ahead was not given back")
    assert sum(Item.objects.filter(study=study).values_list("slots_taken", flat=True)) == 1  # its slot is free again
    guard.assert_clean(page)


@pytest.mark.django_db(transaction=True)
def test_an_answer_given_offline_is_kept_and_sent_when_back(page, context, guard):
    _study, link = crowd_study("crowd-offline", items=4, n=1, items_per_participant=3, redirect_url="")
    consent_and_start(page, link, "offline01")
    page.evaluate(MARK)
    first = shown_item(page)
    wait_ahead(page)
    context.set_offline(True)
    answer(page)  # the next item shows at once, from the page
    assert shown_item(page) != first and page.evaluate(SAME_PAGE)
    page.wait_for_selector("#wb-outbox:not([hidden])")
    assert "not yet saved" in page.locator("#wb-outbox").inner_text()
    assert not Annotation.objects.exists()
    kept = page.evaluate("JSON.parse(localStorage.getItem('claimlab:outbox:crowd-offline'))")
    assert len(kept) == 1 and kept[0]["id"] == int(first)
    context.set_offline(False)
    wait_saved(page)
    saved = Annotation.objects.get()
    assert saved.assignment_id == int(first) and saved.label == "supported"
    assert page.locator("#wb-outbox").is_hidden()
    assert "1 of 3 done" in page.locator(".wb-count").inner_text()
    # the failed tries while offline are the browser's network errors; nothing else went wrong
    assert all("ERR_INTERNET_DISCONNECTED" in error for error in guard.console_errors), guard.console_errors
    assert not guard.page_errors and not guard.external_requests
    assert page.evaluate("window.__cspViolations") == []


@pytest.mark.django_db(transaction=True)
def test_a_lost_lease_is_said_clearly_and_the_next_item_is_still_there(page, guard):
    _study, link = crowd_study("crowd-lost", items=4, n=1, items_per_participant=3, redirect_url="")
    consent_and_start(page, link, "lost0001")
    wait_ahead(page)
    lost = int(shown_item(page))
    # the item on screen went to someone else meanwhile (its lease ran out and it was taken over)
    Assignment.objects.filter(pk=lost).update(status="skipped", slot=None)
    answer(page)
    page.wait_for_selector("#wb-outbox.is-error")
    assert "was not saved" in page.locator("#wb-outbox").inner_text()
    assert "no longer assigned" in page.locator("#wb-outbox").inner_text()
    assert shown_item(page) not in (None, str(lost))
    assert not Annotation.objects.filter(assignment_id=lost).exists()
    assert not guard.page_errors


#: Every item the stage shows from now on, kept in sessionStorage so it outlives a page load.
RECORD_SHOWN = """() => new MutationObserver(() => {
  const wb = document.querySelector("#wb-stage .wb");
  const shown = JSON.parse(sessionStorage.getItem("shown") || "[]");
  if (wb && !wb.classList.contains("is-waiting")) { shown.push(wb.dataset.assignment); }
  sessionStorage.setItem("shown", JSON.stringify(shown));
}).observe(document.getElementById("wb-stage"), { childList: true, subtree: true, attributes: true })"""


@pytest.mark.django_db(transaction=True)
def test_the_answer_that_reaches_the_time_budget_ends_the_session_without_showing_the_item_ahead(page, guard):
    from annotation.crowd import services as crowd
    from annotation.workbench.services import SubmittedAnswer, submit

    study, link = crowd_study("crowd-budget", items=6, n=1, items_per_participant=10, budget_minutes=1, redirect_url="")
    consent_and_start(page, link, "budget01")
    participant = Participant.objects.get(panel_id="budget01")
    # 59.95 of the 60 budgeted seconds spent on a first item (answered elsewhere, say another tab)
    wait_ahead(page)
    first = int(shown_item(page))
    answer_given = SubmittedAnswer(label="supported", active_ms=59_950)
    submit(user=participant.member.user, study=study, assignment_id=first, answer=answer_given)
    crowd.after_item(participant=participant, link=link)
    page.reload()
    wait_ahead(page)
    on_screen = int(shown_item(page))
    held = [pk for pk in active_ids(participant) if pk != on_screen]
    assert len(held) == 1  # the item after it, claimed ahead
    page.evaluate(RECORD_SHOWN)
    with page.expect_navigation():
        answer(page)  # more than 50 ms on it: the budget is reached
    assert page.locator("#end-title").inner_text() == "Thank you: you have finished"
    assert page.locator("#end-code").inner_text() == "DONE123"
    assert str(held[0]) not in page.evaluate("JSON.parse(sessionStorage.getItem('shown') || '[]')")
    participant.refresh_from_db()
    assert participant.status == "completed" and active_ids(participant) == []
    assert Assignment.objects.get(pk=held[0]).status == "skipped"  # given back by the end
    assert Annotation.objects.filter(assignment__annotator=participant.member.user).count() == 2
    guard.assert_clean(page)


@pytest.mark.django_db(transaction=True)
def test_a_participant_labels_with_one_key_when_the_study_says_so(page, guard):
    """The study's submit-on-label option holds for the crowd too: the label key alone sends the answer
    (nothing else is asked: no evidence, no rationale) and the next item swaps in."""
    study, link = crowd_study("crowd-onekey", items=6, n=1, gold=0, items_per_participant=4, redirect_url="")
    study.submit_on_label = True
    study.save(update_fields=["submit_on_label"])
    consent_and_start(page, link, "5f0a0000000000000000onekey")
    page.evaluate(MARK)
    seen = [shown_item(page)]
    for _ in range(2):
        wait_ahead(page)
        page.locator("#wb-stage .wb:not(.is-waiting) #wb-claim").wait_for()
        page.wait_for_timeout(120)
        submit_item(page, "s")  # the label key only: no Enter
        assert page.evaluate(SAME_PAGE)
        seen.append(shown_item(page))
    wait_saved(page)
    labels = Annotation.objects.filter(assignment__study=study).values_list("label", flat=True)
    assert sorted(labels) == ["supported", "supported"] and len(set(seen)) == 3
