"""Markdown instructions rendered to sanitised HTML (researcher text is untrusted too)."""

from __future__ import annotations

import re
from dataclasses import dataclass

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


#: A list item: indentation, marker ("-", "*", "+", "1." or "1)") and the blanks after it.
LIST_ITEM = re.compile(r"^( *)([-*+]|\d{1,9}[.)])( +)(\S.*)?$")
FENCE = re.compile(r"^ *(```|~~~)")
#: Python-Markdown nests a list only when it is indented by this many spaces.
NEST = 4


@dataclass
class _OpenItem:
    indent: int  # where its marker was written
    content: int  # where its text starts, as written
    new_indent: int  # where its marker is put


def _reindent(line: str, indent: int, new_indent: int) -> str:
    return " " * new_indent + line[indent:]


def normalise_list_indentation(text: str) -> str:
    """Re-indent nested lists to the four spaces Python-Markdown needs.

    People write a sub-list indented to the parent's text (two or three
    spaces, as CommonMark and GitHub accept); Python-Markdown then renders it
    inline ("- **supported** - ... - **contradicted**"). Any list item
    indented further than the item above it is nested in it; its continuation
    lines follow it. Everything outside lists is left as written.
    """
    lines = text.expandtabs(NEST).split("\n")
    out: list[str] = []
    stack: list[_OpenItem] = []
    fence_shift: int | None = None
    previous_blank = False
    for line in lines:
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        if fence_shift is not None:  # inside a fenced block: moved with its fence, never parsed
            out.append(_reindent(line, indent, max(0, indent + fence_shift)) if stripped else line)
            if FENCE.match(line):
                fence_shift = None
            continue
        if not stripped:
            out.append(line)
            previous_blank = True
            continue
        match = LIST_ITEM.match(line)
        new_indent = indent
        if match and not (indent >= NEST and not stack):
            while stack and indent <= stack[-1].indent:
                stack.pop()
            new_indent = stack[-1].new_indent + NEST if stack else 0
            stack.append(_OpenItem(indent, indent + len(match.group(2)) + len(match.group(3)), new_indent))
        elif stack and indent > 0:
            owner = max((i for i, item in enumerate(stack) if item.indent < indent), default=None)
            if owner is None:
                stack = []
            else:
                del stack[owner + 1 :]
                item = stack[owner]
                new_indent = item.new_indent + NEST + max(0, indent - item.content)
        elif stack and previous_blank:
            stack = []  # unindented text after a blank line ends the list
        out.append(_reindent(line, indent, new_indent))
        if FENCE.match(line):
            fence_shift = new_indent - indent
        previous_blank = False
    return "\n".join(out)


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

    The one renderer of instructions: the study page, the annotate page and the
    editor's preview all call it, so the preview is what annotators see.

    The only mark_safe on user text in the project, and it is applied to nh3's
    output, never to raw input.
    """
    html = md.markdown(normalise_list_indentation(text or ""), extensions=["tables", "fenced_code", "sane_lists"])
    clean = nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes={"a": {"href", "title"}, "abbr": {"title"}, "ol": {"start"}, "td": {"align"}, "th": {"align"}},
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
