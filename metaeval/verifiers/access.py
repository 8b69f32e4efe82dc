"""Fetch verifiers and runs *through the user* (Zulip-style ``access_*`` helpers).

Every page, API endpoint and command that takes a verifier or run id from a
user goes through these: the object must belong to the study named in the
URL, and the user must be a researcher of that study. Outsiders get 404, so
they cannot even learn that the id exists.
"""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.http import Http404

from annotation.access import Researcher, access_study

from ..models import Verifier, VerifierRun


def access_verifier(
    user: User | AnonymousUser, slug: str, verifier_id: int, *, role: str | None = Researcher
) -> Verifier:
    """A verifier of a study the user is a researcher of (404 for others)."""
    study = access_study(user, slug, role=role)
    verifier = Verifier.objects.filter(study=study, pk=verifier_id).first()
    if verifier is None:
        raise Http404("No such verifier.")
    verifier.study = study
    return verifier


def access_run(user: User | AnonymousUser, slug: str, run_id: int, *, role: str | None = Researcher) -> VerifierRun:
    """A run of a verifier of a study the user is a researcher of (404 for others)."""
    study = access_study(user, slug, role=role)
    run = VerifierRun.objects.select_related("verifier").filter(verifier__study=study, pk=run_id).first()
    if run is None:
        raise Http404("No such run.")
    run.verifier.study = study
    return run
