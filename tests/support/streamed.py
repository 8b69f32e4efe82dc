"""Read a streamed response (the report's JSON is streamed: its long lists are never held whole)."""

from __future__ import annotations

import json
from typing import Any


def streamed_body(response: Any) -> bytes:
    """The whole body of a test client's response, streamed or not."""
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content)
    return response.content


def streamed_json(response: Any) -> Any:
    """The parsed JSON body of a test client's response, streamed or not."""
    return json.loads(streamed_body(response))
