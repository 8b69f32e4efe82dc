"""The API's request parsers: DRF's, with the one rule for control characters (lib/formats.py).

Every body the API parses (JSON, form, multipart form fields; the files of a multipart body are
import files, checked line by line by the import readers) is refused when it holds U+0000
anywhere, with the field it is in, before any serializer sees it: one 400 in the error shape
(lib/api_errors.py), `fields` naming the field, whatever the field's type (text, a dict's keys,
free JSON). REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"] names these; a view that takes only
uploads names `MultiPartParser` from here.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from django.http import QueryDict
from rest_framework import parsers
from rest_framework.exceptions import ValidationError

from annotation.lib.formats import NUL, NUL_REFUSED, RecordError, nul_error, raw_nul_error

__all__ = ["FormParser", "JSONParser", "MultiPartParser"]


def _refuse(error: RecordError | None) -> None:
    if error is not None:
        raise ValidationError({error.field or "non_field_errors": [error.message]})


def _refuse_nul(value: Any) -> None:
    """ValidationError naming the place of the first NUL in parsed data, if it holds one."""
    try:
        error = nul_error(None, value)
    except RecursionError:  # nested deeper than Python walks: refuse it whole
        error = RecordError(None, NUL_REFUSED)
    _refuse(error)


def _form_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """A form's fields as a plain dict (a field given twice as the list of its values)."""
    if isinstance(data, QueryDict):
        return {name: values[0] if len(values) == 1 else values for name, values in data.lists()}
    return dict(data)


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser; a body with a NUL, raw (invalid JSON) or escaped, is refused naming its field."""

    def parse(self, stream: IO[bytes], media_type: str | None = None, parser_context: Any = None) -> Any:
        body = stream.read()
        if b"\x00" in body:
            try:
                text = body.decode((parser_context or {}).get("encoding") or settings.DEFAULT_CHARSET)
            except (UnicodeDecodeError, LookupError):
                pass  # DRF's parser says what is wrong with it
            else:
                _refuse(raw_nul_error(text))
        data = super().parse(io.BytesIO(body), media_type, parser_context)
        if b"\\u0000" in body:
            _refuse_nul(data)
        return data


class FormParser(parsers.FormParser):
    def parse(self, stream: IO[bytes], media_type: str | None = None, parser_context: Any = None) -> Any:
        data = super().parse(stream, media_type, parser_context)
        if any(NUL in name or any(NUL in value for value in values) for name, values in data.lists()):
            _refuse_nul(_form_fields(data))
        return data


class MultiPartParser(parsers.MultiPartParser):
    def parse(self, stream: IO[bytes], media_type: str | None = None, parser_context: Any = None) -> Any:
        parsed = super().parse(stream, media_type, parser_context)
        data = parsed.data
        if any(NUL in name or any(NUL in value for value in values) for name, values in data.lists()):
            _refuse_nul(_form_fields(data))
        return parsed
