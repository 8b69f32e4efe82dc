"""Helpers shared by the crowd participant tests: a verification study with gold check items and a link."""

from __future__ import annotations

from django.test import Client
from django.urls import reverse

from annotation.crowd import services as crowd
from annotation.members.services import add_members
from annotation.models import Item, Participant, ParticipantLink, Study
from annotation.studies.services import create_study
from annotation.transfer.services.item_import import import_items
from tests.conftest import jsonl, verification_item

PROLIFIC_DONE = "https://app.prolific.com/submissions/complete?cc={code}"


def crowd_study(
    slug: str = "crowd",
    *,
    items: int = 6,
    n: int = 2,
    gold: int = 4,
    researcher: str | None = None,
    **link_settings,
) -> tuple[Study, ParticipantLink]:
    """`items` plain items (i-00..) and `gold` gold items (g-0.. labelled 'supported'), link on."""
    study = create_study(slug=slug, name=f"Crowd {slug}", kind="verification", annotators_per_item=n)
    if researcher:
        add_members(study=study, usernames=[researcher], role="researcher")
    records = [verification_item(f"i-{k:02d}", evidence=[]) for k in range(items)]
    records += [verification_item(f"g-{k}", evidence=[], gold="supported") for k in range(gold)]
    import_items(study=study, stream=jsonl(*records), fmt="jsonl")
    settings = {
        "enabled": True,
        "code_completed": "DONE123",
        "code_screened_out": "SCREEN9",
        "code_timed_out": "TIME77",
        "redirect_url": PROLIFIC_DONE,
        "items_per_participant": 3,
        **link_settings,
    }
    link = crowd.configure_link(study=study, changes=settings)
    study.refresh_from_db()
    return study, link


def gold_only_as_checks(study: Study) -> None:
    """Fill the gold items' slots (as if others had labelled them), so only the plain items are handed out.

    Check items are never handed out as items (Item.is_check); gold items that are no checks are,
    and the tests that count a participant's items want the plain ones only.
    """
    Item.objects.filter(study=study).exclude(gold_label="").update(slots_taken=study.annotators_per_item)


def arrival_url(link: ParticipantLink, pid: str | None, **extra: str) -> str:
    params = {"PROLIFIC_PID": pid, "STUDY_ID": "S1", "SESSION_ID": "X1", **extra}
    query = "&".join(f"{key}={value}" for key, value in params.items() if value is not None)
    return f"/p/{link.token}/?{query}"


def step_url(study: Study) -> str:
    """The participant's one page (/crowd/<slug>/): every step after the arrival."""
    return reverse("annotation:participant_step", args=[study.slug])


def at_items(client: Client, link: ParticipantLink, pid: str) -> Participant:
    """Arrive through the link, consent and start, as the pages do; the participant now at the items."""
    study = link.study
    client.get(arrival_url(link, pid))
    client.post(step_url(study), {"action": "consent", "agree": "yes"})
    client.post(step_url(study), {"action": "start"})
    return Participant.objects.get(study=study, panel_id=pid)
