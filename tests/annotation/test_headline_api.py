"""Issue 11's "done when", through the API alone (the browser version: tests/browser/test_headline_scenario.py).

A researcher with a token creates a preference and a verification study, sets
instructions with a nested list, imports the items, invites three annotators
and opens the studies; the annotators sign up through the invite, get tokens
and label everything with next/submit; the researcher follows the counts,
closes the studies and reads the report's Fleiss kappa with its interval,
which must equal statsmodels' on the stored labels.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from django.contrib.auth.models import Group, Permission, User
from django.test import Client
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from annotation.models import Annotation, Study
from tests.support.streamed import streamed_json

pytestmark = pytest.mark.django_db

PASSWORD = "quiet-lantern-harbour-71"
N_PREFERENCE, N_VERIFICATION = 120, 30
INSTRUCTIONS = "1. Read.\n2. Decide:\n   - **supported** - confirmed.\n   - **contradicted** - refuted.\n"


class Api:
    """A token-authenticated JSON client, as a script would use the API."""

    def __init__(self, client: Client, token: str) -> None:
        self.client, self.headers = client, {"Authorization": f"Token {token}"}

    def post(self, path: str, body: dict | None = None):
        return self.client.post(path, json.dumps(body or {}), content_type="application/json", headers=self.headers)

    def patch(self, path: str, body: dict):
        return self.client.patch(path, json.dumps(body), content_type="application/json", headers=self.headers)

    def get(self, path: str):
        return self.client.get(path, headers=self.headers)

    def upload(self, path: str, name: str, body: bytes):
        upload = io.BytesIO(body)
        upload.name = name
        return self.client.post(path, {"file": upload}, headers=self.headers)


def token_for(client: Client, username: str) -> str:
    response = client.post(
        "/api/auth/token/", {"username": username, "password": PASSWORD}, content_type="application/json"
    )
    assert response.status_code == 201, response.content
    return response.json()["token"]


def preference_items() -> bytes:
    lines = []
    for n in range(N_PREFERENCE):
        good, weak = ("veriscore", "safe") if n % 2 == 0 else ("safe", "veriscore")
        lists = {good: [f"Good claim {n}.{k}" for k in range(3)], weak: [f"Weak claim {n}.{k}" for k in range(2)]}
        lines.append(json.dumps({"id": f"p-{n:03d}", "source": f"Text {n}.", "lists": lists}))
    return ("\n".join(lines) + "\n").encode()


def verification_items() -> bytes:
    verdicts = ("supported", "contradicted", "inconclusive")
    return "".join(
        json.dumps({"id": f"c-{n:02d}", "claim": f"Claim {n} is {verdicts[n % 3]}.", "context": "Ctx."}) + "\n"
        for n in range(N_VERIFICATION)
    ).encode()


def stored_fleiss(study: Study) -> float:
    rows: dict[int, list[int]] = {}
    for item_id, label in Annotation.objects.filter(assignment__study=study).values_list(
        "assignment__item_id", "label"
    ):
        rows.setdefault(item_id, []).append(study.labels.index(label))
    table, _ = aggregate_raters(np.array(list(rows.values())), n_cat=len(study.labels))
    return float(fleiss_kappa(table, method="fleiss"))


def label_everything(api: Api, slug: str, annotator: int) -> int:
    """next / submit until 204; judged by what the item shows, one annotator set to differ at times."""
    done = 0
    while True:
        response = api.post(f"/api/studies/{slug}/assignments/next")
        if response.status_code == 204:
            return done
        assert response.status_code == 200, response.content
        body = response.json()
        item = body["item"]
        if item["kind"] == "preference":
            side = "left" if "Good claim" in item["list_1"][0] else "right"
            strength = "slight" if annotator == 2 and done % 6 == 0 else "strong"
            answer = {"choice": f"{side}_{strength}"}
        else:
            verdict = next(label for label in ("supported", "contradicted", "inconclusive") if label in item["claim"])
            answer = {"label": "inconclusive" if annotator == 1 and done % 5 == 0 else verdict}
        submitted = api.post(f"/api/assignments/{body['assignment']['id']}/submit", answer)
        assert submitted.status_code == 200, submitted.content
        done += 1


def test_a_researcher_and_three_invited_annotators_run_two_studies_through_the_api():
    researchers = Group.objects.create(name="researchers")
    researchers.permissions.add(Permission.objects.get(codename="add_study"))
    User.objects.create_user(username="rosa", password=PASSWORD).groups.add(researchers)
    lead = Api(Client(), token_for(Client(), "rosa"))

    studies = {
        "claim-lists": {"kind": "preference", "systems": ["veriscore", "safe"], "items": preference_items()},
        "claim-checks": {"kind": "verification", "items": verification_items()},
    }
    links = {}
    for slug, spec in studies.items():
        body = {"slug": slug, "name": slug.title(), "kind": spec["kind"], "annotators_per_item": 3}
        if "systems" in spec:
            body["systems"] = spec["systems"]
        created = lead.post("/api/studies/", body)
        assert created.status_code == 201 and created.json()["status"] == "draft", created.content
        patched = lead.patch(f"/api/studies/{slug}/", {"instructions": INSTRUCTIONS})
        assert patched.status_code == 200 and patched.json()["instructions"] == INSTRUCTIONS.strip()
        imported = lead.upload(f"/api/studies/{slug}/items/import", "items.jsonl", spec["items"])
        assert imported.status_code == 201, imported.content
        invite = lead.post(f"/api/studies/{slug}/invites", {"max_uses": 3})
        assert invite.status_code == 201, invite.content
        links[slug] = invite.json()["token"]
        opened = lead.post(f"/api/studies/{slug}/status", {"status": "open"})
        assert opened.status_code == 200 and opened.json()["status"] == "open", opened.content

    annotators = []
    for name in ("ann", "bea", "cai"):
        anonymous = Client()
        joined = anonymous.post(
            f"/api/invites/{links['claim-lists']}/signup",
            {"username": name, "password": PASSWORD},
            content_type="application/json",
        )
        assert joined.status_code == 201 and joined.json()["role"] == "annotator", joined.content
        api = Api(Client(), token_for(Client(), name))
        assert api.post(f"/api/invites/{links['claim-checks']}/join").status_code in (200, 201)
        annotators.append(api)

    for n, api in enumerate(annotators):
        assert label_everything(api, "claim-lists", n) == N_PREFERENCE
        counts = lead.get("/api/studies/claim-lists/").json()["counts"]
        assert counts["annotations"] == (n + 1) * N_PREFERENCE  # the researcher follows progress
    for n, api in enumerate(annotators):
        assert label_everything(api, "claim-checks", n) == N_VERIFICATION

    for slug in studies:
        closed = lead.post(f"/api/studies/{slug}/status", {"status": "closed"})
        assert closed.status_code == 200 and closed.json()["status"] == "closed"
        report = lead.get(f"/api/studies/{slug}/report")
        assert report.status_code == 200
        fleiss = streamed_json(report)["agreement"]["fleiss_kappa"]
        assert fleiss["value"] == pytest.approx(stored_fleiss(Study.objects.get(slug=slug)), abs=1e-9)
        low, high = fleiss["ci"]
        assert low <= fleiss["value"] <= high and low < high
    # A closed study hands out nothing more, and says why.
    refused = annotators[0].post("/api/studies/claim-lists/assignments/next")
    assert refused.status_code == 403 and "closed" in refused.json()["detail"]
