"""One JSON error shape for every API error, and its place in the OpenAPI schema.

Every error the API answers is ``{"detail": str, "code": str, "fields": {...}}``
(``fields`` only for invalid input: field name -> messages). DRF's exceptions
are reshaped by `exception_handler` (REST_FRAMEWORK["EXCEPTION_HANDLER"]);
unmatched ``/api/`` paths and server errors by `not_found` / `server_error`
(config/urls.py handler404 / handler500), which answer HTML elsewhere.
`add_error_responses` (a drf-spectacular postprocessing hook) declares the
shape for 400/401/403/404 on every operation, so the schema tells the truth.
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import exceptions
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from annotation.lib.dblocks import fault_response

API_PREFIX = "/api/"
ERROR_COMPONENT = "Error"
DESCRIPTIONS = {
    "400": "Invalid input: `detail` says what is wrong, `fields` names the fields.",
    "401": "Not logged in, or the token is unknown, expired or revoked.",
    "403": "Logged in, but not allowed to do this.",
    "404": "No such object, or you are not a member of its study.",
}
UNSUPPORTED = "The body is not of a media type this operation takes (JSON; multipart for the uploads)."
# 503 (a passing database fault, lib/dblocks.py: `code` database_busy, database_unavailable, database_conflict
# database_read_only or storage_unavailable, with Retry-After) may answer any operation; it is described in docs/api.md.


def _flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """A ValidationError's nested detail as {dotted field: [messages]}."""
    if isinstance(detail, dict):
        out: dict[str, list[str]] = {}
        for name, value in detail.items():
            out.update(_flatten(value, f"{prefix}.{name}" if prefix else str(name)))
        return out
    if isinstance(detail, list) and any(isinstance(value, (dict, list)) for value in detail):
        out = {}
        for index, value in enumerate(detail):
            out.update(_flatten(value, f"{prefix}[{index}]"))
        return out
    messages = detail if isinstance(detail, list) else [detail]
    return {prefix or "non_field_errors": [str(message) for message in messages]}


def error_body(exc: Exception, data: Any) -> dict[str, Any]:
    """The one error shape, from a DRF exception and the data DRF made of it."""
    if isinstance(exc, ValidationError):
        fields = _flatten(exc.detail)
        name, messages = next(iter(fields.items()))
        where = "" if name == "non_field_errors" else f"{name}: "
        return {"detail": f"invalid input: {where}{messages[0]}", "code": "invalid", "fields": fields}
    detail = data.get("detail", data) if isinstance(data, dict) else data
    code = getattr(getattr(exc, "detail", None), "code", None) or getattr(exc, "default_code", "error")
    return {"detail": str(detail), "code": str(code)}


def bad_request(detail: str) -> Response:
    """A 400 in the one error shape, for refusals a view words itself."""
    return Response({"detail": detail, "code": "invalid"}, status=400)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler (status codes, headers), with every body in the one error shape."""
    # Django's own exceptions as DRF turns them, so that their code is known here too.
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(*exc.args)
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(*exc.args)
    response = drf_exception_handler(exc, context)
    if response is not None:
        response.data = error_body(exc, response.data)
    return response


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler404: JSON under /api/, Django's page elsewhere."""
    if _is_api(request):
        return JsonResponse({"detail": "No such API route or object.", "code": "not_found"}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: JSON under /api/ (no internals), Django's page elsewhere.

    A passing database fault raised outside a view (a middleware reading the session when the
    connection was cut) is a 503 with Retry-After, as views' are (lib/dblocks.fault_response).
    """
    exc = sys.exc_info()[1]
    fault = fault_response(request, exc) if exc is not None else None
    if fault is not None:
        return fault
    if _is_api(request):
        return JsonResponse({"detail": "Server error; it has been logged.", "code": "server_error"}, status=500)
    return defaults.server_error(request)


def add_error_responses(result: dict[str, Any], generator: Any, request: Any, public: Any) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: every operation may answer 400/401/403/404 in the error shape.

    A response an operation declares itself stays; when its body is another
    shape (an import's job with line errors), the error shape is added as an
    alternative, since invalid input still answers the error shape. Any other
    error an operation declares with a description only (409, 410, 503...)
    answers the error shape too, so views declare refusals without a body. An
    operation that takes a body may answer 415 for a body of another media type.
    """
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas[ERROR_COMPONENT] = {
        "type": "object",
        "description": "The body of every API error.",
        "properties": {
            "detail": {"type": "string"},
            "code": {"type": "string", "description": "Machine-readable: invalid, not_found, not_authenticated…"},
            "fields": {
                "type": "object",
                "description": "Invalid input only: each field's problems ('non_field_errors' for the whole body).",
                "additionalProperties": {"type": "array", "items": {"type": "string"}},
            },
        },
        "required": ["detail"],
    }
    ref = {"$ref": f"#/components/schemas/{ERROR_COMPONENT}"}
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = operation["responses"]
            if "requestBody" in operation and "415" not in responses:
                responses["415"] = {"content": {"application/json": {"schema": ref}}, "description": UNSUPPORTED}
            for code, declared in responses.items():  # 409, 410, 503...: declared with a description only
                if str(code)[0] in "45" and not declared.get("content"):
                    declared["content"] = {"application/json": {"schema": ref}}
            for code, description in DESCRIPTIONS.items():
                declared = responses.get(code)
                if declared is None:
                    responses[code] = {"content": {"application/json": {"schema": ref}}, "description": description}
                    continue
                content = declared.setdefault("content", {})
                body = content.get("application/json", {}).get("schema")
                if body is None:
                    content["application/json"] = {"schema": ref}
                elif body != ref and "anyOf" not in body:
                    content["application/json"] = {"schema": {"anyOf": [body, ref]}}
    return result
