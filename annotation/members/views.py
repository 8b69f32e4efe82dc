"""The members page: add, change role, deactivate / reactivate, remove, reset a password, invites.

For the study's researchers and staff only; anyone else gets 404 (access_study_to_manage).
Secrets (a new password, a new invite link) are shown once and never stored in clear.
"""

from __future__ import annotations

from axes.helpers import get_client_ip_address
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from annotation.access import access_invite, access_member, access_study_to_manage
from annotation.errors import ServiceError
from annotation.http import AuthenticatedHttpRequest
from annotation.members.forms import ROLE_CHOICES, AddMembersForm, InviteForm, InviteSignupForm, MemberRoleForm
from annotation.members.invites import (
    InviteUnusable,
    SignupThrottled,
    check_signup_allowed,
    create_invite,
    find_invite,
    invite_refusal,
    join_through_invite,
    revoke_invite,
    sign_up_through_invite,
)
from annotation.members.membership import DEACTIVATED, remove_member, reset_password, set_member_active, set_member_role
from annotation.members.selectors import members_to_manage, study_invites
from annotation.members.services import add_members
from annotation.models import Invite, Study, StudyMember


def _page(
    request: AuthenticatedHttpRequest,
    study: Study,
    *,
    invite_form: InviteForm | None = None,
    new_invite_url: str | None = None,
    status: int = 200,
) -> HttpResponse:
    context = {
        "study": study,
        "members": members_to_manage(study),
        "invites": study_invites(study),
        "members_form": AddMembersForm(),
        "invite_form": invite_form or InviteForm(),
        "role_choices": ROLE_CHOICES,
        "new_invite_url": new_invite_url,
    }
    return render(request, "annotation/study_members.html", context, status=status)


def _back(study: Study, request: AuthenticatedHttpRequest | None = None) -> HttpResponse:
    """Back to the members page; to one's studies when one just left this study (it would be a 404)."""
    if request is not None and not request.user.is_staff:
        still_in = study.members.filter(user=request.user, is_active=True, role=StudyMember.Role.RESEARCHER)
        if not still_in.exists():
            return redirect("annotation:my_studies")
    return redirect("annotation:study_members", slug=study.slug)


@login_required
def study_members(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """GET: the page. POST: add members by username (new accounts get a password, shown once)."""
    if request.method not in ("GET", "POST"):
        return HttpResponseNotAllowed(["GET", "POST"])
    study = access_study_to_manage(request.user, slug)
    if request.method == "GET":
        return _page(request, study)
    form = AddMembersForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(" ".join(str(error) for error in errors) for errors in form.errors.values()))
        return _back(study)
    try:
        outcomes = add_members(study=study, usernames=form.cleaned_data["usernames"], role=form.cleaned_data["role"])
    except ServiceError as exc:
        messages.error(request, str(exc))
        return _back(study)
    for outcome in outcomes:
        if outcome.reactivated:
            messages.success(request, f"{outcome.username} is back in this study (as {outcome.role}).")
        elif outcome.already_member:
            messages.info(request, f"{outcome.username} is already in this study (as {outcome.role}); unchanged.")
        elif outcome.password:
            messages.warning(
                request,
                f"Created {outcome.username} ({outcome.role}) with password {outcome.password} — "
                "copy it now, it is shown only once.",
            )
        else:
            messages.success(request, f"Added {outcome.username} as {outcome.role}.")
    return _back(study)


@login_required
@require_POST
def member_role(request: AuthenticatedHttpRequest, slug: str, member_id: int) -> HttpResponse:
    member = access_member(request.user, slug, member_id)
    form = MemberRoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose annotator or researcher.")
        return _back(member.study, request)
    try:
        member = set_member_role(study=member.study, member=member, role=form.cleaned_data["role"])
    except ServiceError as exc:
        messages.error(request, f"Role not changed: {exc}.")
    else:
        messages.success(request, f"{member.pseudonym} is now {member.get_role_display().lower()}.")
    return _back(member.study, request)


@login_required
@require_POST
def member_active(request: AuthenticatedHttpRequest, slug: str, member_id: int) -> HttpResponse:
    """Deactivate (active=0) or reactivate (active=1) a member."""
    member = access_member(request.user, slug, member_id)
    study = member.study
    active = request.POST.get("active") == "1"
    try:
        member, freed = set_member_active(study=study, member=member, active=active)
    except ServiceError as exc:
        messages.error(request, f"Not changed: {exc}.")
        return _back(study, request)
    if active:
        messages.success(request, f"{member.pseudonym} is active again.")
    else:
        given_back = f"; {freed} item(s) in progress went back to the pool" if freed else ""
        messages.success(request, f"{member.pseudonym} is deactivated; their answers stay{given_back}.")
    return _back(study, request)


@login_required
@require_POST
def member_remove(request: AuthenticatedHttpRequest, slug: str, member_id: int) -> HttpResponse:
    member = access_member(request.user, slug, member_id)
    study = member.study
    try:
        outcome = remove_member(study=study, member=member)
    except ServiceError as exc:
        messages.error(request, f"Not removed: {exc}.")
        return _back(study, request)
    if outcome.action == DEACTIVATED:
        messages.success(
            request,
            f"{member.pseudonym} was given items in this study, so they are deactivated rather than deleted: "
            "their answers stay in reports and exports under their pseudonym.",
        )
    else:
        messages.success(request, f"{member.pseudonym} is removed from the study.")
    return _back(study, request)


@login_required
@require_POST
def member_password(request: AuthenticatedHttpRequest, slug: str, member_id: int) -> HttpResponse:
    member = access_member(request.user, slug, member_id)
    try:
        password = reset_password(
            actor=request.user, study=member.study, member=member, ip_address=get_client_ip_address(request)
        )
    except ServiceError as exc:
        messages.error(request, f"Password not reset: {exc}.")
    else:
        messages.warning(
            request,
            f"New password of {member.user.get_username()} ({member.pseudonym}): {password} — "
            "copy it now, it is shown only once. Their sessions and API tokens no longer work.",
        )
    return _back(member.study)


@login_required
@require_POST
def invite_create(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """Create an invite; the page shows its link this once (rendered, never put in a URL or the session)."""
    study = access_study_to_manage(request.user, slug)
    form = InviteForm(request.POST)
    if not form.is_valid():
        return _page(request, study, invite_form=form, status=400)
    try:
        issued = create_invite(
            study=study,
            created_by=request.user,
            role=form.cleaned_data["role"],
            expires_in_days=form.cleaned_data["expires_in_days"],
            max_uses=form.cleaned_data["max_uses"],
        )
    except ServiceError as exc:
        form.add_error(None, str(exc))
        return _page(request, study, invite_form=form, status=400)
    url = request.build_absolute_uri(reverse("annotation:invite", args=[issued.token]))
    return _page(request, study, new_invite_url=url)


@login_required
@require_POST
def invite_revoke(request: AuthenticatedHttpRequest, slug: str, invite_id: int) -> HttpResponse:
    invite = revoke_invite(invite=access_invite(request.user, slug, invite_id))
    messages.success(request, f"Invite {invite.prefix}… withdrawn: its link no longer works.")
    return _back(invite.study)


# --- invites -----------------------------------------------------------------------------------
# /invite/<token>/: join a study through an invite link, creating an account first if needed.
#
# Open to people who are not logged in (the link is their credential). Sign-ups are
# throttled per client address and count against the invite's uses atomically
# (members/invites.py). A bad, withdrawn, expired or used-up link gets a page that says so.

#: Django's model backend: an account just made here is logged in without asking for the password again.
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


def _unusable(request: HttpRequest, reason: str, *, status: int, invite: Invite | None = None) -> HttpResponse:
    context = {"reason": reason, "study": invite.study if invite is not None else None}
    return render(request, "annotation/invite_unusable.html", context, status=status)


def _throttled(request: HttpRequest, exc: SignupThrottled) -> HttpResponse:
    response = _unusable(request, f"Not now: {exc}.", status=429)
    response["Retry-After"] = str(exc.retry_after)
    return response


def _landing(member: StudyMember) -> HttpResponse:
    """Annotators go straight to their first item; researchers to the study's page."""
    if member.role == StudyMember.Role.ANNOTATOR:
        return redirect("annotation:annotate", slug=member.study.slug)
    return redirect("annotation:study_detail", slug=member.study.slug)


@never_cache
def invite(request: HttpRequest, token: str) -> HttpResponse:
    """GET: what the invite is for, with a sign-up form (or a Join button when logged in). POST: do it."""
    if request.method not in ("GET", "POST"):
        return HttpResponseNotAllowed(["GET", "POST"])
    found = find_invite(token)
    if found is None:
        reason = "This invite link is not valid. Check that you copied the whole link, or ask for a new one."
        return _unusable(request, reason, status=404)
    refusal = invite_refusal(found)
    if refusal is not None:
        return _unusable(request, refusal, status=410, invite=found)
    if request.user.is_authenticated:
        return _join(request, found)  # type: ignore[arg-type]  # authenticated: a User
    return _sign_up(request, found)


def _join(request: AuthenticatedHttpRequest, found: Invite) -> HttpResponse:
    member = StudyMember.objects.filter(study=found.study, user=request.user, is_active=True).first()
    if member is not None:
        return _landing(member)
    if request.method == "POST":
        try:
            member, _ = join_through_invite(invite=found, user=request.user)
        except InviteUnusable as exc:
            return _unusable(request, str(exc), status=410, invite=found)
        except ServiceError as exc:
            return _unusable(request, f"You cannot join: {exc}.", status=403, invite=found)
        return _landing(member)
    return render(request, "annotation/invite.html", {"invite": found, "study": found.study, "form": None})


def _sign_up(request: HttpRequest, found: Invite) -> HttpResponse:
    form = InviteSignupForm(request.POST or None)
    if request.method == "POST":
        address = get_client_ip_address(request)
        try:
            check_signup_allowed(address)
        except SignupThrottled as exc:
            return _throttled(request, exc)
        if form.is_valid():
            try:
                user, member = sign_up_through_invite(
                    invite=found,
                    username=form.cleaned_data["username"],
                    password=form.cleaned_data["password1"],
                    ip_address=address,
                )
            except InviteUnusable as exc:
                return _unusable(request, str(exc), status=410, invite=found)
            except SignupThrottled as exc:
                return _throttled(request, exc)
            except ServiceError as exc:
                form.add_error(None, str(exc))
            else:
                login(request, user, backend=MODEL_BACKEND)
                return _landing(member)
    status = 400 if request.method == "POST" else 200
    context = {"invite": found, "study": found.study, "form": form}
    return render(request, "annotation/invite.html", context, status=status)
