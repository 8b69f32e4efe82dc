"""The one instructions renderer: nested lists as people write them, sanitised output, headings below the page's own,
question labels not doubled."""

from __future__ import annotations

from annotation.lib.markdown import demote_headings, normalise_list_indentation, render_markdown, strip_lead_label
from annotation.templatetags.claimlab import markdown_filter


def test_a_sub_list_indented_to_the_parents_text_is_nested():
    html = render_markdown("3. Then:\n   - **supported** - yes\n   - **contradicted** - no\n")
    assert html == (
        '<ol start="3">\n<li>Then:<ul>\n<li><strong>supported</strong> - yes</li>\n'
        "<li><strong>contradicted</strong> - no</li>\n</ul>\n</li>\n</ol>"
    )


def test_two_space_and_tab_indents_nest_to_any_depth():
    html = render_markdown("- a\n  - b\n    - c\n- d\n\t- e\n")
    assert html.count("<ul>") == 4
    assert "<li>a<ul>\n<li>b<ul>\n<li>c</li>" in html and "<li>d<ul>\n<li>e</li>" in html


def test_continuation_lines_stay_with_their_item():
    html = render_markdown("- **contradicted** - a passage shows\n  that the claim is false.\n- next\n")
    assert "<li><strong>contradicted</strong> - a passage shows\n    that the claim is false.</li>" in html


def test_text_outside_lists_is_left_alone():
    text = "Intro\n\n    code block\n\n```\n  - not a list\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    assert normalise_list_indentation(text) == text
    html = render_markdown(text)
    assert "<pre><code>code block" in html and "  - not a list" in html and "<table>" in html


def test_a_list_ends_at_unindented_text_after_a_blank_line():
    html = render_markdown("- a\n  - b\n\nAfter the list.\n\n  - new list\n")
    assert html.endswith("<p>After the list.</p>\n<ul>\n<li>new list</li>\n</ul>")


def test_the_output_is_sanitised():
    html = render_markdown('- <script>alert(1)</script>\n  - [x](javascript:alert(1)) <img src=x onerror="y">')
    assert "<script" not in html and "javascript:" not in html and "onerror" not in html


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
