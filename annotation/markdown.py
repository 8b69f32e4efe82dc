"""Markdown instructions rendered to sanitised HTML (researcher text is untrusted too)."""

from __future__ import annotations

import re

import markdown as md
import nh3
from django.utils.safestring import SafeString, mark_safe

ALLOWED_TAGS = {
    "a",
    "abbr",
    "b",
    "blockquote",
    "br",
    "code",
    "dd",
    "del",
    "details",
    "dl",
    "dt",
    "em",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "i",
    "kbd",
    "li",
    "ol",
    "p",
    "pre",
    "strong",
    "sub",
    "summary",
    "sup",
    "table",
    "tbody",
    "td",
    "th",
    "thead",
    "tr",
    "ul",
}


_HEADING = re.compile(r"<(/?)h([1-6])>")


def demote_headings(html: str, top: int) -> str:
    """Shift headings so that the text's `#` becomes `<h{top}>` (capped at h6).

    Instructions sit under the page's own h1 and a card's h2; a `# Title` in
    them must not become a second h1. nh3 leaves heading tags without
    attributes, so the pattern sees every one.
    """
    shift = top - 1
    if shift <= 0:
        return html
    return _HEADING.sub(lambda m: f"<{m.group(1)}h{min(6, int(m.group(2)) + shift)}>", html)


def render_markdown(text: str, *, top_heading: int = 1) -> SafeString:
    """Markdown to HTML, then nh3 keeps only harmless tags and http(s)/mailto links.

    The only mark_safe on user text in the project, and it is applied to nh3's
    output, never to raw input.
    """
    html = md.markdown(text or "", extensions=["tables", "fenced_code", "sane_lists"])
    clean = nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes={"a": {"href", "title"}, "abbr": {"title"}, "td": {"align"}, "th": {"align"}},
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
    return mark_safe(demote_headings(clean, top_heading))


def strip_lead_label(text: str, label: str) -> str:
    """`text` without a leading `label:` (any case, surrounding spaces), else unchanged."""
    stripped = (text or "").lstrip()
    if stripped[: len(label) + 1].lower() == f"{label.lower()}:":
        return stripped[len(label) + 1 :].lstrip()
    return text
