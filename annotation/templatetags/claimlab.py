from django import template
from django.utils.safestring import SafeString

from annotation.markdown import render_markdown

register = template.Library()


@register.filter(name="markdown")
def markdown_filter(text: str) -> SafeString:
    """Render study instructions: Markdown, sanitised."""
    return render_markdown(text)


@register.filter
def percent(part: int, whole: int) -> int:
    """Whole-number percentage for progress bars; 0 when there is nothing to do."""
    return round(100 * part / whole) if whole else 0
