"""Instructions Markdown: sanitised, headings below the page's own, question labels not doubled."""

from __future__ import annotations

from annotation.markdown import demote_headings, render_markdown, strip_lead_label
from annotation.templatetags.claimlab import markdown_filter


def test_instructions_headings_sit_below_the_page_h1_and_card_h2():
    html = markdown_filter("# Title\n\n## Part\n\n###### Deep\n\ntext")
    assert "<h3>Title</h3>" in html and "<h4>Part</h4>" in html and "<h6>Deep</h6>" in html
    assert "<h1" not in html and "<h2" not in html


def test_render_markdown_keeps_levels_unless_asked():
    assert "<h1>Title</h1>" in render_markdown("# Title")
    assert demote_headings("<h2>x</h2>", 1) == "<h2>x</h2>"


def test_nested_list_renders_nested():
    html = render_markdown("- **supported** - all of it\n    - **contradicted** - some of it")
    assert html.count("<ul>") == 2


def test_strip_lead_label():
    assert strip_lead_label("Question: Who?", "Question") == "Who?"
    assert strip_lead_label("  question:Who?", "Question") == "Who?"
    assert strip_lead_label("Who asked the question: why?", "Question") == "Who asked the question: why?"
    assert strip_lead_label("", "Question") == ""
