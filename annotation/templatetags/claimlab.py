from django import template
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
