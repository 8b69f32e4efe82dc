from functools import lru_cache
from urllib.parse import quote

from django import template
from django.urls import get_script_prefix, reverse
from django.utils.http import RFC3986_SUBDELIMS
from django.utils.safestring import SafeString

from annotation.lib.markdown import render_markdown, strip_lead_label

register = template.Library()


#: Instructions are shown under the page's h1 and a card's h2: their `#` becomes h3.
INSTRUCTIONS_TOP_HEADING = 3


@register.filter(name="markdown")
def markdown_filter(text: str, top_heading: int = INSTRUCTIONS_TOP_HEADING) -> SafeString:
    """Render study instructions: Markdown, sanitised, headings below the page's own."""
    return render_markdown(text, top_heading=int(top_heading))


@register.filter
def without_lead(text: str, label: str) -> str:
    """`text` without a leading "label:" (a question stored as "Question: ..." under a "Question" heading)."""
    return strip_lead_label(text, label)


@register.filter
def percent(part: int, whole: int) -> int:
    """Whole-number percentage for progress bars; 0 when there is nothing to do."""
    return round(100 * part / whole) if whole else 0


@register.filter
def paired_with(items: list, others: list | None) -> list[tuple]:
    """Each of `items` with the entry of `others` at its position (an empty list where there is none):
    a list's claims with their per-claim questions."""
    others = others or []
    return [(item, others[index] if index < len(others) else []) for index, item in enumerate(items)]


@register.filter
def item_url(external_id: object, slug: str) -> str:
    """``{% url 'annotation:item_detail' slug external_id %}``, the very same text, with the study's part reversed
    once per study.

    Why: Django's ``reverse`` is about 50 us a call, and a report page links each of the 200 first disagreements
    of every verifier (issue 35: the warm report at a million predictions). The item's part is quoted as
    ``reverse`` quotes it; an id the route does not take (empty, a newline) goes to ``reverse``, which says so.
    """
    text = str(external_id)
    if not text or "\n" in text:
        return reverse("annotation:item_detail", args=[slug, text])
    return _item_url_prefix(get_script_prefix(), slug) + quote(text, safe=RFC3986_SUBDELIMS + "/~:@") + "/"


@lru_cache(maxsize=256)
def _item_url_prefix(script_prefix: str, slug: str) -> str:
    """The item page's URL up to the item's id (``script_prefix``: what ``reverse`` put in front of it)."""
    return reverse("annotation:item_detail", args=[slug, "-"]).removesuffix("-/")
