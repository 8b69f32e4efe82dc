"""Request types whose user is known to be logged in, for the type checker.

Claimlab uses Django's default user model, so a logged-in user is a
`django.contrib.auth.models.User`; `request.user` is typed `User | AnonymousUser`
because nothing tells the type checker that a view is behind a login check.
"""

from __future__ import annotations

from typing import cast

from django.contrib.auth.models import User
from django.http import HttpRequest
from rest_framework.request import Request


class AuthenticatedHttpRequest(HttpRequest):
    """The request of a `@login_required` view: `user` is never AnonymousUser.

    Only an annotation (django-stubs' documented pattern): Django still passes
    its own HttpRequest, which `@login_required` has checked.
    """

    user: User


def logged_in_user(request: Request | HttpRequest) -> User:
    """`request.user` of a request that is known to be authenticated: a DRF view behind
    IsAuthenticated (the default permission class) or IsStudyMember & co., or an admin view
    (the admin site lets only active staff in). Not a check: those already ran."""
    return cast(User, request.user)
