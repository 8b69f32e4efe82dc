"""Charts: CSP-clean SVG (no style attributes or elements), nothing from the data echoed as markup."""

from __future__ import annotations

import re

import numpy as np
import pytest

from metaeval import charts


def test_inline_css_becomes_presentation_attributes():
    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg"><defs><style type="text/css">*{stroke-linejoin: round; '
        'stroke-linecap: butt}</style></defs><!-- a "label" --><path d="M0 0" style="fill: #ffffff; '
        'stroke: #000; stroke-width: 0.8"/></svg>'
    )
    out = charts.strip_inline_styles(svg)
    assert out.startswith('<svg stroke-linejoin="round" stroke-linecap="butt" xmlns=')
    assert '<path d="M0 0" fill="#ffffff" stroke="#000" stroke-width="0.8"/>' in out
    assert "style" not in out and "<!--" not in out


def test_unknown_css_is_refused_rather_than_dropped():
    with pytest.raises(ValueError, match="no presentation attribute"):
        charts.strip_inline_styles('<svg><path style="filter: blur(2px)"/></svg>')
    with pytest.raises(ValueError, match="unexpected CSS"):
        charts.strip_inline_styles("<svg><style>path{fill:red}</style></svg>")


def test_hostile_annotator_names_are_drawn_not_injected():
    names = ["<script>alert(1)</script>", 'a"onload="x', "--> <b>"]
    kappa = np.array([[1.0, 0.4, np.nan], [0.4, 1.0, 0.2], [np.nan, 0.2, 1.0]])
    n = np.array([[0, 10, 0], [10, 0, 8], [0, 8, 0]])
    svg = charts.render(charts.agreement_matrix_figure(names, kappa, n), "svg").decode()
    assert "<script" not in svg and "onload" not in svg and "<b>" not in svg
    assert "style=" not in svg and "<style" not in svg
    assert set(re.findall(r"<(\w+)", svg)) <= {
        "svg",
        "metadata",
        "rdf",
        "cc",
        "dc",
        "defs",
        "g",
        "path",
        "use",
        "clipPath",
        "rect",
        "image",
    }


def test_empty_data_draws_a_message_not_an_error():
    svg = charts.render(charts.label_distribution_figure({"a": 0, "b": 0}), "svg")
    assert svg.startswith(b"<?xml") and b"style=" not in svg
    pdf = charts.render(charts.preference_figure([], ("x", "y")), "pdf")
    assert pdf.startswith(b"%PDF-")


def test_output_is_stable_for_the_same_data():
    figure = lambda: charts.label_distribution_figure({"supported": 7, "contradicted": 3})  # noqa: E731
    assert charts.render(figure(), "svg") == charts.render(figure(), "svg")
    assert charts.render(figure(), "pdf") == charts.render(figure(), "pdf")
    with pytest.raises(ValueError, match="unknown chart format"):
        charts.render(figure(), "png")


LONG_NAME = "gpt-4o-mini-2024-07-18 with the VeriScore ternary prompt & a long name"


@pytest.mark.parametrize(
    "draw",
    [
        lambda: charts.verifier_figure([(LONG_NAME, 0.5, (0.3, 0.7), None), ("llm-x", 0.2, (0.05, 0.4), None)]),
        lambda: charts.annotator_quality_figure(
            [(LONG_NAME, 0.5, (0.3, 0.7), 0.4), ("w2", 0.2, None, 0.3)], [LONG_NAME], "adjudicated_else_majority"
        ),
    ],
    ids=["verifiers", "annotators"],
)
def test_long_names_leave_the_plot_its_width_and_nothing_runs_off_the_figure(draw):
    """A 70-character model name once collapsed the plot ("constrained_layout not applied"), and the legend
    and a long title ran off the figure's edge."""
    import warnings

    figure = draw()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the collapse is only ever said as a warning
        charts.render(figure, "svg")
    renderer = figure._get_renderer()
    page = figure.bbox
    (ax,) = figure.axes
    assert ax.get_window_extent(renderer).width > 0.4 * page.width
    for text in [figure.legends[0], figure._suptitle, *ax.get_yticklabels()]:
        box = text.get_window_extent(renderer)
        assert page.x0 - 1 <= box.x0 and box.x1 <= page.x1 + 1, text
