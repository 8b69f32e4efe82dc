"""Login throttling on top of django-axes: who the client is, when it is locked out, what it is told.

Failures are counted per (username, address) and per address (docs/security.md, Logins). The
(username, address) pair locks after LOGIN_FAILURE_LIMIT failures, the address alone after the
higher LOGIN_IP_FAILURE_LIMIT, so a guesser is stopped while the real user, from another
address, still logs in. Axes checks the lockout before any password is hashed.
"""

from __future__ import annotations

import math
from typing import Any

from axes.backends import AxesStandaloneBackend
from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_cool_off
from django.conf import settings
from django.db.models import Sum
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

LOCKOUT_MESSAGE = "Too many failed login attempts. Try again later."


class LoginThrottleBackend(AxesStandaloneBackend):
    """Axes' lockout check for web logins; a login without a request (shell, test client's
    `login()`) cannot come from a client address, so there is nothing to throttle."""

    def authenticate(self, request: HttpRequest | None, *args: Any, **kwargs: Any) -> None:
        if request is None:
            return None
        return super().authenticate(request, *args, **kwargs)


def client_ip(request: HttpRequest) -> str | None:
    """REMOTE_ADDR, unless the operator trusts LOGIN_TRUSTED_PROXY_COUNT proxies in front of the app:
    then the address those proxies appended to X-Forwarded-For (the client cannot forge it)."""
    proxies = settings.LOGIN_TRUSTED_PROXY_COUNT
    if proxies > 0:
        hops = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
        if len(hops) >= proxies:
            return hops[-proxies]
    return request.META.get("REMOTE_ADDR")


class LoginThrottleHandler(AxesDatabaseHandler):
    """Axes' database handler with one limit per lockout parameter group.

    Axes compares one failure count with one limit. Here each group's count is scaled to the
    (username, address) limit, so the address alone reaches it only after LOGIN_IP_FAILURE_LIMIT.
    """

    def get_failures(self, request: HttpRequest, credentials: dict[str, Any] | None = None) -> int:
        base = settings.AXES_FAILURE_LIMIT
        limits = [base, settings.LOGIN_IP_FAILURE_LIMIT]
        scaled = [0]
        for attempts, limit in zip(self.get_user_attempts(request, credentials), limits, strict=False):
            count = attempts.aggregate(total=Sum("failures_since_start"))["total"] or 0
            scaled.append(math.floor(count * base / max(limit, 1)))
        return max(scaled)


def retry_after_seconds(request: HttpRequest) -> int:
    cool_off = get_cool_off(request)
    return int(cool_off.total_seconds()) if cool_off else 3600


def lockout_response(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    """429 for a locked-out client: JSON with Retry-After on the API, the lockout page elsewhere."""
    retry_after = retry_after_seconds(request)
    response: HttpResponse
    if request.path.startswith("/api/"):
        response = JsonResponse(
            {"detail": LOCKOUT_MESSAGE, "code": "throttled", "retry_after": retry_after}, status=429
        )
    else:
        minutes = max(1, math.ceil(retry_after / 60))
        context = {"message": LOCKOUT_MESSAGE, "minutes": minutes}
        response = render(request, "accounts/locked_out.html", context, status=429)
    response["Retry-After"] = str(retry_after)
    return response
