"""Helpers of the Prolific tests: a crowd study whose participants ended in every way, and the same people as
submissions of a Prolific study on the local fake (tests/support/fake_prolific.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal

from django.test import override_settings
from django.utils import timezone

from annotation.crowd import services as crowd
from annotation.crowd.prolific_services import connect
from annotation.models import Item, Participant, ParticipantCheck, ParticipantLink, Study
from annotation.workbench.services import SubmittedAnswer, claim_next, submit
from tests.annotation.crowd_support import crowd_study
from tests.support.fake_prolific import FakeProlific, FakeStudy

#: A token as Prolific issues them; it must never appear in a page, an answer, a log row or a message.
TOKEN = "ProlificTok_9fK2xQ7mZ4pL8rT1vW6yB3nC5dH0jS"

#: Prolific IDs (24 hex digits, as Prolific's are) of the people in `people`.
A, B, C, D, E, F, G = (f"5f0000000000000000000a{n:02d}" for n in range(1, 8))


@contextmanager
def fake_prolific(**options) -> Iterator[FakeProlific]:
    """The fake on 127.0.0.1 with PROLIFIC_API_URL pointing at it (never the real service)."""
    with FakeProlific(token=TOKEN, **options) as server, override_settings(PROLIFIC_API_URL=server.url):
        yield server


def label(participant: Participant, active_ms: int) -> None:
    user = participant.member.user
    assignment = claim_next(user=user, study=participant.study)
    assert assignment is not None
    submit(
        user=user,
        study=participant.study,
        assignment_id=assignment.pk,
        answer=SubmittedAnswer(label="supported", active_ms=active_ms),
    )


def person(
    link: ParticipantLink,
    pid: str,
    status: str,
    *,
    minutes: tuple[int, ...] | list[int] = (),
    attention_failed: int = 0,
) -> Participant:
    """A participant who arrived with `pid`, labelled one item per entry of `minutes` (active minutes each),
    failed `attention_failed` attention checks, and ended with `status`."""
    participant = crowd.arrive(link=link, ids=crowd.PanelIds(participant=pid, study="S1", session=f"x{pid[-4:]}"))
    crowd.accept_consent(participant=participant)
    crowd.start(participant=participant, link=link)
    for active in minutes:
        label(participant, active * 60_000)
    gold = Item.objects.filter(study=link.study, gold_label="supported").order_by("external_id")
    for item in gold[:attention_failed]:
        ParticipantCheck.objects.create(
            participant=participant, item=item, kind=ParticipantCheck.Kind.ATTENTION, label="refuted", correct=False
        )
    Participant.objects.filter(pk=participant.pk).update(
        status=status,
        checks_failed=attention_failed,
        finished_at=timezone.now() if status in Participant.ENDED else None,
    )
    participant.refresh_from_db()
    return participant


@dataclass
class Scene:
    study: Study
    link: ParticipantLink
    prolific: FakeStudy


def scene(fake: FakeProlific, researcher, slug: str = "prolific") -> Scene:
    """A crowd study paying 12 GBP an hour, connected to a Prolific study on the fake, with:

    A completed (2 items, 3 + 3 active minutes: pay 1.20), awaiting review;
    B screened out by two failed attention checks, awaiting review;
    C screened out by the qualification, awaiting review;
    D timed out (1 item, 2 minutes: pay 0.40), awaiting review;
    E still working in Claimlab, active on Prolific;
    F on Prolific only (never arrived), awaiting review;
    G completed (1 item, 5 minutes: pay 1.00), already approved on Prolific.
    """
    study, link = crowd_study(
        slug, items=8, n=3, gold=3, researcher=researcher.username, pay_per_hour="12", attention_fail_limit=2
    )
    person(link, A, "completed", minutes=[3, 3])
    person(link, B, "screened_out", attention_failed=2)
    person(link, C, "screened_out")
    person(link, D, "timed_out", minutes=[2])
    person(link, E, "working")
    person(link, G, "completed", minutes=[5])
    prolific = fake.add_study(
        "Claim checking",
        **{
            A: "AWAITING_REVIEW",
            B: "AWAITING_REVIEW",
            C: "AWAITING_REVIEW",
            D: "AWAITING_REVIEW",
            E: "ACTIVE",
            F: "AWAITING_REVIEW",
            G: "APPROVED",
        },
    )
    connect(study=study, user=researcher, study_id=prolific.id, token=TOKEN)
    link.refresh_from_db()
    assert link.pay_per_hour == Decimal("12")
    return Scene(study=study, link=link, prolific=prolific)
