"""The schema says what the API refuses: a strict request body allows no other properties.

``StrictSerializer`` (annotation/lib/strict.py) refuses a field it does not know with a 400
naming it; this drf-spectacular extension writes the same rule into the schema as
``additionalProperties: false`` on the request body of every serializer built on it (the
verifier and run bodies here, the token request in accounts, every request body of annotation).
Registered when this module is imported (MetaevalConfig.ready).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension

from annotation.lib.strict import StrictSerializer


class StrictRequestBody(OpenApiSerializerExtension):
    target_class = StrictSerializer
    match_subclasses = True

    def map_serializer(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        schema = auto_schema._map_basic_serializer(self.target, direction)
        if direction == "request":
            schema["additionalProperties"] = False
        return schema
