"""A researcher's own prompt: a Django template over ``claim``, ``context`` and ``evidence``, with own labels.

The template is rendered by a standalone ``django.template.Engine`` with
autoescaping off. That is deliberate and safe here: the text goes to a
language model, never to a browser, and HTML-escaping would garble quotes
and ampersands in claims and evidence (``AT&amp;T``). Anything that shows a
rendered prompt on a page must escape it there, like all other data
(docs/architecture.md, Security rules). Only Django's built-in tags and filters are available; the
context holds plain strings, lists and dicts, so a template can reach
nothing else.

Parsing: the last whole-word match of any configured label; ok on the last
line, fallback elsewhere (see :func:`parsing.parse_plain_verdict`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from django.template import Context, Engine, Template, TemplateSyntaxError

from .base import Evidence, Message, Preset
from .parsing import ParseResult, Vocabulary, parse_plain_verdict

__all__ = ["DEFAULT_LABELS", "DEFAULT_TEMPLATE", "make_custom_preset"]

_ENGINE = Engine(autoescape=False)

DEFAULT_LABELS = ("supported", "contradicted", "inconclusive")
DEFAULT_TEMPLATE = """\
Decide whether the evidence below supports the claim.
{% if context %}
The claim comes from this text: {{ context }}
{% endif %}
Claim: {{ claim }}

Evidence:
{% for passage in evidence %}[{{ forloop.counter }}] {{ passage.title }}{% if passage.url %} ({{ passage.url }}){% endif %}
{{ passage.text }}
{% empty %}(none)
{% endfor %}
Answer with one word on the last line: supported, contradicted or inconclusive."""

_PROBE = "claimlab-probe-claim"


def _render(
    template: Template, system: str, claim: str, context: str = "", evidence: Sequence[Evidence] = ()
) -> list[Message]:
    evidence_list = [dict(passage) for passage in evidence]
    values = {"claim": claim, "context": context or "", "evidence": evidence_list}
    # Context() escapes by default whatever the engine says; the prompt is for a model, not a browser.
    content = template.render(Context(values, autoescape=_ENGINE.autoescape)).strip()
    messages: list[Message] = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": content})
    return messages


def make_custom_preset(
    template: str, labels: Sequence[str] = DEFAULT_LABELS, *, system: str = "", preset_id: str = "custom"
) -> Preset:
    """A preset from a template and its labels; a template that never shows the claim is rejected.

    Raises ValueError for a template with a syntax error, one that does not
    render ``claim``, or an empty or duplicated label list.
    """
    labels = tuple(label.strip() for label in labels)
    if not labels or not all(labels):
        raise ValueError("custom labels must be a non-empty list of non-blank labels")
    vocabulary = Vocabulary(labels)
    if len(vocabulary.labels) != len(labels):
        raise ValueError("custom labels must be distinct (case, spaces and underscores aside)")
    try:
        compiled = _ENGINE.from_string(template)
    except TemplateSyntaxError as error:
        raise ValueError(f"template syntax error: {error}") from error
    render = partial(_render, compiled, system)
    if _PROBE not in render(_PROBE)[-1]["content"].casefold():
        raise ValueError("the template must show the claim, e.g. {{ claim }}")

    def parse(raw: str | None) -> ParseResult:
        """Last whole-word match of a configured label."""
        return parse_plain_verdict(raw, vocabulary)

    return Preset(
        id=preset_id,
        labels=labels,
        method=(
            "Custom template (Django template syntax over claim, context, evidence) written by the researcher; "
            f"labels {', '.join(labels)}; the last whole-word label in the answer counts (longest first)."
        ),
        render=render,
        parse=parse,
    )
