"""Request input that is refused when it is not understood, never guessed at.

A field a request body's serializer does not know is a mistake (a typo, a field of another
route, an option this server does not have), not something to drop without a word: the client
would believe it was applied. `StrictSerializer` refuses it with a 400 in the one error shape
(lib/api_errors.py) naming it, and the schema says the same (`additionalProperties: false`,
written by metaeval/openapi.py for every subclass). Every request body of the API is built on it,
nested ones too (the checks run in `to_internal_value`, which nested serializers also go through).

A JSON value of another type than the schema's is refused too: DRF would read ``"5"`` as the
number 5, ``5`` as the text "5" and ``"yes"`` as true, so a client with a bug in its types would
never hear of it. `StrictJSONParser` refuses what JSON cannot say without doubt or what no column
can store (a key given twice, nesting past any body's depth, NUL, unpaired surrogates) before any
view sees it. `StrictPageNumberPagination` does the same for `?page=`, and `strict_query`
refuses the query parameters a route does not take (where it takes some: a typo there changes
the answer without a word, `?formt=jsonl` giving CSV).
"""

from __future__ import annotations

import codecs
import math
from collections.abc import Collection, Mapping
from typing import Any

from django.conf import settings
from django.http import QueryDict
from rest_framework import serializers
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.utils import json

from annotation.lib.formats import raw_nul_error
from annotation.lib.parsers import refuse_nul, refuse_nul_error

#: The deepest nesting a request body may have; the deepest the API takes (a verifier's options) is a few levels.
MAX_BODY_DEPTH = 32


class _Refused(ValueError):
    """What the JSON body says that the API does not take; a 400 naming it (ParseError)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are all different: with a key twice, which one was meant?"""
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise _Refused(f"the key {key!r} is given twice in one object")
        seen.add(key)
    return dict(pairs)


def _check_values(data: Any) -> None:
    """Refuse a body nested deeper than MAX_BODY_DEPTH, or holding a value no column stores: text with
    NUL or unpaired surrogates, a number too large for a float (JSON's 1e400 is read as infinity)."""
    pending: list[tuple[Any, int]] = [(data, 0)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, str):
            if "\x00" in value:
                raise _Refused("text may not contain NUL (\\u0000)")
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise _Refused("text may not contain unpaired surrogates (\\ud800-\\udfff)") from None
        elif isinstance(value, float) and not math.isfinite(value):
            raise _Refused("numbers must be finite")
        elif isinstance(value, (list, dict)):
            if depth >= MAX_BODY_DEPTH:
                raise _Refused(f"the body is nested deeper than {MAX_BODY_DEPTH} levels")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                pending.append((key, depth + 1))
                pending.append((item, depth + 1))


class StrictJSONParser(JSONParser):
    """DRF's JSON parser, refusing with 400 (ParseError, the one error shape) what it would pass on:
    a key given twice (the last one won), nesting a body never has (10,000 levels was a RecursionError,
    a 500), NUL and unpaired surrogates in text (PostgreSQL refuses them: a 500 at the first write)."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            # DRF's json: NaN and Infinity are refused (parse_constant), as DRF's own parser does.
            text = codecs.getreader(encoding)(stream).read()
            if "\x00" in text:  # a raw NUL: refused naming its field, as the import files do (lib/formats.py)
                refuse_nul_error(raw_nul_error(text))
            data = json.loads(text, object_pairs_hook=_unique_keys)
            if "\\u0000" in text:
                refuse_nul(data)
            _check_values(data)
        except RecursionError:
            raise ParseError(f"JSON parse error - the body is nested deeper than {MAX_BODY_DEPTH} levels") from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        return data


def _json_type(value: Any) -> str:
    """The JSON name of a value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _type_error(field: serializers.Field, value: Any) -> str | None:
    """Why a JSON value is not of the type the schema gives `field`, or None when it is.

    Null is left to the field (allow_null), and a decimal may come as a string too (the schema
    says so: DRF writes decimals as strings).
    """
    if value is None or isinstance(field, serializers.DecimalField):
        return None
    if isinstance(field, serializers.BooleanField):
        expected, ok = "true or false", isinstance(value, bool)
    elif isinstance(field, serializers.IntegerField):
        expected, ok = "a whole number", isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(field, serializers.FloatField):
        expected, ok = "a number", isinstance(value, (int, float)) and not isinstance(value, bool)
    elif isinstance(field, (serializers.CharField, serializers.ChoiceField)):
        expected, ok = "a string", isinstance(value, str)
    elif isinstance(field, serializers.ListField) and isinstance(value, list):
        return next((error for item in value if (error := _type_error(field.child, item))), None)
    elif isinstance(field, serializers.DictField) and isinstance(value, dict):
        return next((error for item in value.values() if (error := _type_error(field.child, item))), None)
    else:
        return None  # lists, objects and nested bodies check themselves
    return None if ok else f"must be {expected}, got {_json_type(value)}"


class StrictSerializer(serializers.Serializer):
    """A request body: a field it does not know is refused by name, never ignored; in JSON, a value of
    another type than its field's is refused, never converted."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):  # anything else: DRF's own "expected a dictionary" refusal
            writable = {name: field for name, field in self.fields.items() if not field.read_only}
            unknown = sorted(str(name) for name in set(data) - set(writable))
            if unknown:
                message = f"unknown field(s) {', '.join(map(repr, unknown))}; expected {', '.join(writable)}"
                raise ValidationError({api_settings.NON_FIELD_ERRORS_KEY: [message]})
            if not isinstance(data, QueryDict):  # JSON; a form's values are all strings, read by the fields
                wrong = {name: error for name, value in data.items() if (error := _type_error(writable[name], value))}
                if wrong:
                    raise ValidationError({name: [error] for name, error in wrong.items()})
        return super().to_internal_value(data)


class StrictPageNumberPagination(PageNumberPagination):
    """`?page=` is a whole number from 1 (up to 18 digits), or absent; anything else is a 400 naming it.

    DRF read an empty or `last` page as a page and answered 200, and anything else not a number
    as a 404 "invalid page"; a page past the end is still a 404 (there is no such page).
    """

    def get_page_number(self, request: Any, paginator: Any) -> int:
        raw = request.query_params.get(self.page_query_param)
        if raw is None:
            return 1
        if not (raw.isascii() and raw.isdigit() and len(raw) <= 18 and int(raw) >= 1):
            raise ValidationError({self.page_query_param: [f"page must be a whole number from 1, got {raw!r}"]})
        return int(raw)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_query_param:
                parameter["schema"] = {**parameter["schema"], "minimum": 1}
        return parameters


def strict_query(request: Request, known: tuple[str, ...], *, may_be_empty: Collection[str] = ()) -> None:
    """Refuse (400, naming them) query parameters the route does not know, and known ones given empty.

    A typo (``?by_domian=true``) or an empty ``?k=`` would otherwise be read as "the default"
    without a word, and the answer would not be what was asked for. `may_be_empty`: lists that
    may be given empty (a filter of nothing).
    """
    query = request.query_params
    unknown = sorted(set(query) - set(known))
    if unknown:
        raise ValidationError(
            {name: [f"unknown query parameter {name!r}; this route takes {', '.join(known)}"] for name in unknown}
        )
    empty = [name for name in known if name in query and name not in may_be_empty and not query.get(name, "").strip()]
    if empty:
        raise ValidationError({name: [f"{name} is empty: give a value, or leave {name} out"] for name in empty})
