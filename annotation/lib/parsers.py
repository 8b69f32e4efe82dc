"""The API's request parsers: DRF's, with the one rule for control characters (lib/formats.py).

Every body the API parses (JSON, form, multipart form fields; the files of a multipart body are
import files, checked line by line by the import readers) is refused when it holds U+0000
anywhere, with the field it is in, before any serializer sees it: one 400 in the error shape
(lib/api_errors.py), `fields` naming the field, whatever the field's type (text, a dict's keys,
free JSON). JSON bodies go through lib/strict.StrictJSONParser (the default parser), which calls
`refuse_nul` here; a view that takes uploads names `MultiPartParser` from here, one that takes a
form `FormParser`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from django.http import QueryDict
from rest_framework import parsers
from rest_framework.exceptions import ValidationError

from annotation.lib.formats import NUL, NUL_REFUSED, RecordError, nul_error

__all__ = ["FormParser", "MultiPartParser", "refuse_nul", "refuse_nul_error"]


def refuse_nul_error(error: RecordError | None) -> None:
    if error is not None:
        raise ValidationError({error.field or "non_field_errors": [error.message]})


def refuse_nul(value: Any) -> None:
    """ValidationError naming the place of the first NUL in parsed data, if it holds one."""
    try:
        error = nul_error(None, value)
    except RecursionError:  # nested deeper than Python walks: refuse it whole
        error = RecordError(None, NUL_REFUSED)
    refuse_nul_error(error)


def _form_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """A form's fields as a plain dict (a field given twice as the list of its values)."""
    if isinstance(data, QueryDict):
        return {name: values[0] if len(values) == 1 else values for name, values in data.lists()}
    return dict(data)


class FormParser(parsers.FormParser):
    def parse(self, stream: IO[bytes], media_type: str | None = None, parser_context: Any = None) -> Any:
        data = super().parse(stream, media_type, parser_context)
        if any(NUL in name or any(NUL in value for value in values) for name, values in data.lists()):
            refuse_nul(_form_fields(data))
        return data


class MultiPartParser(parsers.MultiPartParser):
    def parse(self, stream: IO[bytes], media_type: str | None = None, parser_context: Any = None) -> Any:
        parsed = super().parse(stream, media_type, parser_context)
        data = parsed.data
        if any(NUL in name or any(NUL in value for value in values) for name, values in data.lists()):
            refuse_nul(_form_fields(data))
        return parsed
