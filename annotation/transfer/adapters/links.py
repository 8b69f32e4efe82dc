"""A passage's source type from its link's domain, shared by every adapter that reads URLs.

Evidence filters and the credibility report group passages by source type, so a
Wikipedia page must be `wiki` whichever pipeline's file it came from.
"""

from __future__ import annotations

from urllib.parse import urlsplit

_SOURCE_TYPES = (
    ("wikipedia.org", "wiki"),
    ("wiki", "wiki"),
    (".gov", "government"),
    (".edu", "academic"),
    ("nih.gov", "scientific/medical"),
    ("arxiv.org", "scientific/medical"),
    ("reddit.com", "social media"),
    ("twitter.com", "social media"),
    ("x.com", "social media"),
    ("youtube.com", "social media"),
    ("facebook.com", "social media"),
)


def source_type(url: str) -> str:
    """A coarse source type from a link's domain (evidence filters group by it); 'web' when unknown, '' without
    a link."""
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:  # a malformed link (an unclosed [ in the host): no domain to read
        return ""
    if not host:
        return ""
    for needle, kind in _SOURCE_TYPES:
        if host.endswith(needle) or (needle.startswith("wiki") and needle in host):
            return kind
    return "web"


def web_url(value: object) -> str:
    """The link if it is an http(s) address (what an item's evidence url accepts), else ''."""
    return value if isinstance(value, str) and value.startswith(("http://", "https://")) else ""
