"""Markdown instructions rendered to sanitised HTML (researcher text is untrusted too)."""

from __future__ import annotations

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


def render_markdown(text: str) -> SafeString:
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
    return mark_safe(clean)
