"""The endpoint client: which URLs and key variables a verifier may name, its key, its AsyncOpenAI, one call.

The one place on the verifier side that reads an API key from the
environment. Which variable holds it is data on the verifier (checked by
``key_variable_problem`` when it is saved and again here, where the secret
is read); the operator's allow-list of other names is a setting. A call
never raises: every failure comes back as an ``Answer`` with a short error
text for its prediction, and no key ever appears in that text or a log line.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast
from urllib.parse import urlsplit

import httpx2
import openai
from django.conf import settings
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

from ..presets.base import Message

if TYPE_CHECKING:
    from .spec import RunSpec

__all__ = [
    "Answer",
    "ENV_NAME",
    "MissingApiKey",
    "UNUSED_KEY",
    "api_key_for",
    "complete",
    "key_variable_problem",
    "make_client",
    "shorten",
    "url_problem",
]

ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
KEY_SUFFIX = "_API_KEY"
EXTRA_KEY_VARIABLES = "CLAIMLAB_VERIFIER_KEY_VARIABLES"  # the environment variable behind the setting
UNUSED_KEY = "unused"
logger = logging.getLogger(__name__)
MAX_ERROR_CHARS = 1000


class MissingApiKey(Exception):
    """The verifier names an environment variable that is not set where the run happens."""


def key_variable_problem(name: str) -> str | None:
    """Why a verifier may not read its API key from the variable ``name``, or None.

    Names must end in ``_API_KEY`` (OPENAI_API_KEY, TOGETHER_API_KEY, ...),
    or be listed by the operator in CLAIMLAB_VERIFIER_KEY_VARIABLES
    (comma-separated; ``settings.VERIFIER_KEY_VARIABLES``). Otherwise a
    researcher could name SECRET_KEY or DATABASE_URL and have the worker send
    it, as a bearer token, to a base URL of their choosing.
    """
    if not ENV_NAME.fullmatch(name) or len(name) > 100:
        looks_like_key = len(name) > 20 and not name.isupper()
        return "must be the NAME of an environment variable (capitals, digits, _), e.g. OPENAI_API_KEY" + (
            "; do not paste the key itself" if looks_like_key else ""
        )
    if not name.endswith(KEY_SUFFIX) and name not in settings.VERIFIER_KEY_VARIABLES:
        return (
            f"must end in {KEY_SUFFIX} (e.g. OPENAI_API_KEY), so that no other secret of the server can be sent "
            f"to an endpoint; an operator can allow other names in {EXTRA_KEY_VARIABLES}"
        )
    return None


def url_problem(url: str) -> str | None:
    """Why ``url`` is not an http(s) base URL, or None when it is one."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return "is not a valid URL"
    if parts.scheme not in ("http", "https"):
        return "must start with http:// or https://"
    if not parts.hostname:
        return "must name a host, e.g. http://127.0.0.1:8001/v1"
    if parts.username or parts.password:
        return "must not contain a user name or password; put the key in an environment variable"
    return None


def api_key_for(env_name: str) -> str:
    """The API key from the named environment variable; "unused" when no variable is named (local endpoints)."""
    if not env_name:
        return UNUSED_KEY
    problem = key_variable_problem(env_name)
    if problem:  # checked when the verifier was saved; checked again here, where the secret is read
        raise MissingApiKey(f"the API-key variable {env_name!r} {problem}")
    value = os.environ.get(env_name, "").strip()
    if not value:
        raise MissingApiKey(
            f"the environment variable {env_name} is not set where the run happens, so there is no API key; "
            f"set {env_name} for the worker (or for manage.py run_verifier), or clear the verifier's API-key "
            "variable if the endpoint needs no key"
        )
    return value


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
