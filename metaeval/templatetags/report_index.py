"""The report page's section index (issue 34): a list of the sections this report shows, made from them.

A report shows a section only when it has something to say (a preference study has no verifiers, a big
study's first report its first sections only), and `_report_body.html` and its includes decide that, each
in one place. The index is not a second copy of those conditions: ``{% section_index %}...{% end_section_index %}``
renders its content, finds the ``<section class="card" id="...">`` elements in it, names each by a short label
(SHORT_LABELS) or else by its heading's text, and puts the index before the content.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

from django import template
from django.template.base import Parser, Token
from django.template.context import Context
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

#: The index names a section by these; a section not listed here goes by its <h2>'s text (its links left out).
SHORT_LABELS = {
    "agreement": "Agreement",
    "pairs": "Pairwise κ",
    "labels": "Labels",
    "ceiling": "Human ceiling",
    "annotator-quality": "Annotators",
    "charts": "Charts",
    "domains": "By domain",
    "preference": "Preferences",
    "questionnaires": "Questionnaires",
    "training": "Training",
    "conditions": "Conditions",
    "questions": "Extra questions",
    "scores": "Scores",
    "verifiers": "Verifiers",
    "verifier-comparisons": "Verifiers compared",
    "pairwise-judges": "LLM judges",
    "ppi": "PPI",
    "adjudication": "Adjudication",
    "disagreements": "Disagreements",
}


#: A <section> start tag; its attributes are read by _Tag. A regular expression finds them, so that a report
#: page of 200 kB is scanned in about a millisecond, not parsed whole (about 45 ms).
SECTION_TAG = re.compile(r"<section\b[^>]*>", re.IGNORECASE)
HEADING = re.compile(r"<h2\b[^>]*>(.*?)</h2>", re.IGNORECASE | re.DOTALL)


class _Tag(HTMLParser):
    """The attributes of one start tag."""

    def __init__(self, tag: str) -> None:
        super().__init__(convert_charrefs=True)
        self.attributes: dict[str, str] = {}
        self.feed(tag)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.attributes = {name: value or "" for name, value in attrs}


class _Text(HTMLParser):
    """The text of a heading's HTML, its links (the LaTeX link) left out."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._in_link = 0
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_link += tag == "a"

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._in_link:
            self._in_link -= 1

    def handle_data(self, data: str) -> None:
        if not self._in_link:
            self.parts.append(data)

    @property
    def text(self) -> str:
        return " ".join("".join(self.parts).split())


def _heading(html: str, start: int) -> str:
    """The text of the first <h2> after ``start``, if it comes before the next section."""
    following = SECTION_TAG.search(html, start)
    heading = HEADING.search(html, start, following.start() if following else len(html))
    return _Text(heading.group(1)).text if heading else ""


def sections_in(html: str) -> list[tuple[str, str]]:
    """(id, label) of each ``<section class="card" id="...">`` in ``html``, in order, each id once."""
    found: dict[str, str] = {}
    for match in SECTION_TAG.finditer(html):
        attributes = _Tag(match.group(0)).attributes
        section_id = attributes.get("id", "")
        if not section_id or "card" not in attributes.get("class", "").split() or section_id in found:
            continue
        found[section_id] = SHORT_LABELS.get(section_id) or _heading(html, match.end()) or section_id
    return list(found.items())


class SectionIndexNode(template.Node):
    def __init__(self, nodelist: template.NodeList) -> None:
        self.nodelist = nodelist

    def render(self, context: Context) -> SafeString:
        content = self.nodelist.render(context)
        sections = sections_in(content)
        if not sections:
            return mark_safe(content)
        links = format_html_join("", '<li><a href="#{}">{}</a></li>', sections)
        nav = format_html(
            '<nav class="report-index" id="report-index" aria-label="Sections of the report">'
            '<a class="skip-link" href="#report-content">Skip the list of sections</a>'
            '<span class="report-index-title" aria-hidden="true">Sections</span><ul>{}</ul></nav>',
            links,
        )
        return format_html('{}<div id="report-content" tabindex="-1">{}</div>', nav, mark_safe(content))


@register.tag("section_index")
def section_index(parser: Parser, token: Token) -> SectionIndexNode:
    """``{% section_index %}...{% end_section_index %}``: the content, with an index of its sections before it."""
    nodelist = parser.parse(("end_section_index",))
    parser.delete_first_token()
    return SectionIndexNode(nodelist)
