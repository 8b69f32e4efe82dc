"""The endpoint client: a run's AsyncOpenAI and one completion call.

The key comes from ``keys.api_key_for`` (the one place on the verifier side
that reads an API key from the environment). A call never raises: every failure comes back as an ``Answer`` with a short error
text for its prediction, and no key ever appears in that text or a log line.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import httpx2
import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

from ..presets.base import Message

if TYPE_CHECKING:
    from .spec import RunSpec

__all__ = ["Answer", "complete", "make_client", "shorten"]

logger = logging.getLogger(__name__)
MAX_ERROR_CHARS = 1000


def make_client(spec: RunSpec, transport: httpx2.AsyncBaseTransport | None = None) -> openai.AsyncOpenAI:
    """The OpenAI client of a run: its base URL, key, retries and timeout (a transport only in tests)."""
    params = spec.params
    http_client = openai.DefaultAsyncHttpx2Client(transport=transport) if transport is not None else None
    return openai.AsyncOpenAI(
        base_url=params["base_url"],
        api_key=spec.api_key,
        max_retries=params["retries"],
        timeout=params["timeout"],
        http_client=http_client,
    )


@dataclass
class Answer:
    """One chat completion: its text and usage, or the error that stopped it."""

    text: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    error: str = ""


def shorten(text: str) -> str:
    """An error text cut to what a prediction stores."""
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


def _status_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else None
        if message:
            return str(message)
    return str(exc.message or exc)


async def complete(client: openai.AsyncOpenAI, spec: RunSpec, messages: list[Message]) -> Answer:
    """One request with the client's retries; every failure becomes an Answer with an error, never an exception."""
    answer = await _ask(client, spec, messages)
    if answer.error:  # the model and what went wrong; never the key, the headers or the prompt
        logger.debug(
            "verifier call to %s at %s failed: %s", spec.params.get("model"), spec.params.get("base_url"), answer.error
        )
    return answer


async def _ask(client: openai.AsyncOpenAI, spec: RunSpec, messages: list[Message]) -> Answer:
    params = spec.params
    retries = params.get("retries", 0)
    try:
        response = await client.chat.completions.create(
            # Message is the {role, content} subset of the client's message union.
            model=params["model"],
            messages=cast("list[ChatCompletionMessageParam]", messages),
            temperature=params["temperature"],
            max_tokens=params["max_tokens"],
        )
    except openai.APITimeoutError:
        return Answer(
            error=f"timed out: no answer within {params['timeout']:g} s ({retries + 1} attempt{'s' if retries else ''})"
        )
    except openai.APIStatusError as exc:
        retried = exc.status_code == 429 or exc.status_code >= 500 or exc.status_code in (408, 409)
        after = f" after {retries} retr{'ies' if retries != 1 else 'y'}" if retried and retries else ""
        what = "rate limited" if exc.status_code == 429 else "error"
        return Answer(error=shorten(f"HTTP {exc.status_code} {what} from the endpoint{after}: {_status_message(exc)}"))
    except openai.APIConnectionError as exc:
        return Answer(error=shorten(f"could not reach {params['base_url']}: {exc.__cause__ or exc}"))
    except (openai.OpenAIError, ValueError, TypeError, KeyError) as exc:
        return Answer(error=shorten(f"malformed response from the endpoint: {exc}"))
    if not isinstance(response, ChatCompletion):
        return Answer(
            error=shorten(
                f"malformed response from the endpoint: expected a chat completion, got "
                f"{type(response).__name__} {str(response)[:200]!r}"
            )
        )
    choices = response.choices
    if not choices:
        return Answer(error="malformed response from the endpoint: the chat completion has no choices")
    message = getattr(choices[0], "message", None)
    text = getattr(message, "content", None)
    usage = getattr(response, "usage", None)
    return Answer(
        text=text if isinstance(text, str) else None,
        tokens_in=int(getattr(usage, "prompt_tokens", 0) or 0),
        tokens_out=int(getattr(usage, "completion_tokens", 0) or 0),
    )
