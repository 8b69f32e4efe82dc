"""The endpoint client: a run's AsyncOpenAI and one completion call.

The URL and key come from the run's ``keys.Target`` (the one place on the verifier side
that reads a key); a researcher endpoint's connections go through the address policy
(``guard.py``), and no client follows redirects. A call never raises: every failure comes back as an ``Answer`` with a short error
text for its prediction, and no key ever appears in that text or a log line.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import httpx2
import openai
from openai._base_client import DEFAULT_CONNECTION_LIMITS
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

from ..presets.base import Message
from .guard import guarded_transport

if TYPE_CHECKING:
    from .spec import RunSpec

__all__ = ["Answer", "complete", "make_client", "shorten"]

logger = logging.getLogger(__name__)
MAX_ERROR_CHARS = 1000


def make_client(spec: RunSpec, transport: httpx2.AsyncBaseTransport | None = None) -> openai.AsyncOpenAI:
    """The OpenAI client of a run: its endpoint, key, retries and timeout (a transport only in tests)."""
    params = spec.params
    target = spec.target
    assert target is not None
    if transport is None and target.guarded:
        transport = guarded_transport(DEFAULT_CONNECTION_LIMITS)
    # No redirects: a 3xx could send the request (and its key) to another host.
    http_client = openai.DefaultAsyncHttpx2Client(
        transport=transport, follow_redirects=False, trust_env=not target.guarded
    )
    return openai.AsyncOpenAI(
        base_url=target.base_url,
        api_key=target.api_key,
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


def _where(spec: RunSpec) -> str:
    """The endpoint as errors name it: an operator endpoint by name, a researcher endpoint by URL."""
    return f"endpoint {spec.params['endpoint']!r}" if spec.params.get("endpoint") else str(spec.params.get("base_url"))


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
        logger.debug("verifier call to %s at %s failed: %s", spec.params.get("model"), _where(spec), answer.error)
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
        return Answer(error=shorten(f"could not reach {_where(spec)}: {exc.__cause__ or exc}"))
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
