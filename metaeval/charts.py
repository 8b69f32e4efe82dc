"""Report charts drawn with matplotlib (Agg, no pyplot state) as SVG or PDF for a paper.

The SVG is rewritten so that it carries no ``style`` attribute, no
``<style>`` element and no comments: the page's Content Security Policy
(``style-src 'self'``) then holds even when the file is opened on its own,
and no label text from the data is echoed outside the drawn glyphs.
"""

from __future__ import annotations

import html
import io
import re
import textwrap
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "CHART_FORMATS",
    "label_distribution_figure",
    "preference_figure",
    "agreement_matrix_figure",
    "verifier_figure",
    "render",
    "strip_inline_styles",
]

CHART_FORMATS = {"svg": "image/svg+xml", "pdf": "application/pdf"}
PALETTE = {"a_strong": "#1f4e79", "a_slight": "#6f9fd8", "tie": "#b8bec9", "b_slight": "#e8a15c", "b_strong": "#b4530f"}
ACCENT = "#2f6db0"

_STYLE_ATTR = re.compile(r'\sstyle="([^"]*)"')
_STYLE_ELEMENT = re.compile(r"<style[^>]*>(.*?)</style>", re.S)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
# CSS properties matplotlib writes that SVG also accepts as presentation attributes.
_PRESENTATION = {
    "fill",
    "fill-opacity",
    "fill-rule",
    "stroke",
    "stroke-width",
    "stroke-opacity",
    "stroke-linejoin",
    "stroke-linecap",
    "stroke-dasharray",
    "stroke-dashoffset",
    "stroke-miterlimit",
    "opacity",
    "clip-path",
    "font-family",
    "font-size",
    "font-style",
    "font-weight",
    "text-anchor",
    "dominant-baseline",
}


def _declarations(css: str) -> list[tuple[str, str]]:
    out = []
    for part in css.split(";"):
        if part.strip():
            name, _, value = part.partition(":")
            name = name.strip()
            if name not in _PRESENTATION:
                raise ValueError(f"SVG style property {name!r} has no presentation attribute")
            out.append((name, value.strip()))
    return out


def _attributes(css: str) -> str:
    return "".join(f' {name}="{html.escape(value, quote=True)}"' for name, value in _declarations(css))


def strip_inline_styles(svg: str) -> str:
    """Move matplotlib's inline CSS into presentation attributes; drop comments.

    The one global rule (``*{stroke-linejoin: round; ...}``) becomes
    attributes of the root ``<svg>``: they are inherited, and an element's
    own attribute still wins, as its inline style did.
    """
    svg = _COMMENT.sub("", svg)
    global_rules = []
    for body in _STYLE_ELEMENT.findall(svg):
        global_rules.extend(re.findall(r"\*\s*\{([^}]*)\}", body))
        if re.sub(r"\*\s*\{[^}]*\}", "", body).strip():
            raise ValueError("unexpected CSS in the SVG's <style> element")
    svg = _STYLE_ELEMENT.sub("", svg)
    svg = _STYLE_ATTR.sub(lambda m: _attributes(m.group(1)), svg)
    root_attrs = "".join(_attributes(rule) for rule in global_rules)
    return re.sub(r"<svg\b", "<svg" + root_attrs, svg, count=1)


def _matplotlib() -> ModuleType:
    """matplotlib (Agg), loaded on first use: importing it costs most of a second at every
    process start (each manage.py command, each web worker), and only chart downloads draw."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.figure
    import matplotlib.ticker

    return matplotlib


def render(figure: Figure, fmt: str) -> bytes:
    """The figure as SVG (CSP-clean) or PDF bytes, without timestamps so output is stable."""
    buffer = io.BytesIO()
    if fmt == "svg":
        with _matplotlib().rc_context({"svg.hashsalt": "claimlab"}):  # stable element ids
            figure.savefig(buffer, format="svg", metadata={"Date": None})
        return strip_inline_styles(buffer.getvalue().decode("utf-8")).encode("utf-8")
    if fmt == "pdf":
        figure.savefig(buffer, format="pdf", metadata={"CreationDate": None, "ModDate": None})
        return buffer.getvalue()
    raise ValueError(f"unknown chart format {fmt!r}; use {' or '.join(CHART_FORMATS)}")


#: A row label (a verifier's or annotator's name) wraps at this many characters, on at most two lines.
TICK_LABEL_WIDTH = 28


def _row_label(name: str) -> str:
    """A name short enough to leave the plot its width: a model name with its prompt easily runs to 70
    characters, which left constrained layout no room for the axes (the chart came out collapsed)."""
    return "\n".join(textwrap.wrap(name, TICK_LABEL_WIDTH, max_lines=2, placeholder="…")) or name


def _wrapped_title(title: str) -> str:
    """A title that stays inside a 6.4-inch figure (a reference rule's name made one run off its edge)."""
    return textwrap.fill(title, 56)


def _figure(width: float, height: float) -> Figure:
    figure = _matplotlib().figure.Figure(figsize=(width, height), layout="constrained")
    figure.patch.set_facecolor("white")
    return figure


def _empty(figure: Figure, title: str, message: str) -> Figure:
    ax = figure.add_subplot()
    ax.set_axis_off()
    ax.set_title(title)
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="#5b6577")
    return figure


def label_distribution_figure(counts: Mapping[str, int], *, title: str = "Label distribution") -> Figure:
    """Bars of how often each declared label was given, with counts and shares."""
    figure = _figure(6.0, 3.4)
    total = sum(counts.values())
    if not total:
        return _empty(figure, title, "No labels yet")
    ax = figure.add_subplot()
    labels, values = list(counts), list(counts.values())
    bars = ax.bar(range(len(labels)), values, color=ACCENT)
    ax.set_xticks(range(len(labels)), labels, rotation=20 if len(labels) > 4 else 0)
    ax.bar_label(bars, [f"{v}\n({v / total:.1%})" for v in values], fontsize=8)
    ax.set_ylabel("labels")
    ax.set_ylim(0, max(values) * 1.25)
    ax.set_title(f"{title} (n = {total})")
    ax.spines[["top", "right"]].set_visible(False)
    return figure


def preference_figure(rows: Sequence[tuple[str, Mapping[str, int]]], systems: Sequence[str]) -> Figure:
    """Horizontal stacked bars per scope: A strong / A slight / tie / B slight / B strong (shares)."""
    figure = _figure(7.0, 1.2 + 0.45 * max(len(rows), 1))
    if not rows or not any(sum(c.values()) for _, c in rows):
        return _empty(figure, "Preferences", "No judgements yet")
    a, b = systems
    parts = [
        ("a_strong", f"{a} much better"),
        ("a_slight", f"{a} slightly better"),
        ("tie", "tie"),
        ("b_slight", f"{b} slightly better"),
        ("b_strong", f"{b} much better"),
    ]
    ax = figure.add_subplot()
    names = [name for name, _ in rows]
    totals = np.array([max(sum(c.values()), 1) for _, c in rows], dtype=float)
    left = np.zeros(len(rows))
    for key, label in parts:
        share = np.array([c.get(key, 0) for _, c in rows]) / totals
        ax.barh(range(len(rows)), share, left=left, color=PALETTE[key], label=label, edgecolor="white")
        for y, (x0, w) in enumerate(zip(left, share, strict=True)):
            if w >= 0.06:
                ax.text(
                    x0 + w / 2,
                    y,
                    f"{w:.0%}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if key.endswith("strong") else "#1d2330",
                )
        left += share
    ax.set_yticks(range(len(rows)), [f"{name} (n={int(t)})" for name, t in zip(names, totals, strict=True)])
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.xaxis.set_major_formatter(_matplotlib().ticker.PercentFormatter(1.0))
    ax.legend(ncols=3, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), frameon=False)
    ax.set_title("Preferences, strong and slight")
    ax.spines[["top", "right"]].set_visible(False)
    return figure


def agreement_matrix_figure(annotators: Sequence[str], kappa: np.ndarray, n: np.ndarray) -> Figure:
    """Annotator x annotator Cohen kappa heatmap, each cell with kappa and items shared."""
    size = max(3.2, 1.0 + 0.55 * len(annotators))
    figure = _figure(size + 1.2, size)
    if len(annotators) < 2:
        return _empty(figure, "Pairwise Cohen's kappa", "Fewer than two annotators")
    ax = figure.add_subplot()
    masked = np.ma.masked_invalid(kappa)
    mesh = ax.pcolormesh(masked, cmap="RdBu", vmin=-1, vmax=1, edgecolors="white", linewidth=0.5)
    if len(annotators) <= 20:
        for i in range(len(annotators)):
            for j in range(len(annotators)):
                text = "—" if np.isnan(kappa[i, j]) else f"{kappa[i, j]:.2f}"
                if i != j and n[i, j]:
                    text += f"\nn={int(n[i, j])}"
                ax.text(
                    j + 0.5,
                    i + 0.5,
                    text,
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if not np.isnan(kappa[i, j]) and abs(kappa[i, j]) > 0.6 else "#1d2330",
                )
    ticks = np.arange(len(annotators)) + 0.5
    ax.set_xticks(ticks, annotators, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(ticks, annotators, fontsize=8)
    ax.invert_yaxis()
    ax.set_aspect("equal")
    figure.colorbar(mesh, ax=ax, shrink=0.8, label="Cohen's kappa")
    ax.set_title("Pairwise Cohen's kappa")
    return figure


VerifierRow = tuple[str, "float | None", "tuple[float, float] | None", "float | None"]


def verifier_figure(rows: Sequence[VerifierRow], no_ceiling_reason: str | None = None) -> Figure:
    """Each verifier's Cohen kappa against the human majority (dot, 95% interval) beside the
    human ceiling on the same items (grey diamond): the comparison meta-evaluation papers plot.

    ``no_ceiling_reason``: why no verifier has a ceiling, from the report's value that is undefined
    (the legend says it; a guess at the cause was wrong when kappa was undefined, issue 29)."""
    figure = _figure(6.4, max(2.4, 1.2 + 0.5 * len(rows)))
    title = "Verifiers against the human majority (Cohen's kappa)"
    if not any(kappa is not None for _, kappa, _, _ in rows):
        return _empty(figure, title, "No verifier has a defined kappa yet")
    ax = figure.add_subplot()
    for y, (_, kappa, ci, ceiling) in enumerate(rows):
        if ci is not None:
            ax.plot(ci, [y, y], color=ACCENT, linewidth=2, solid_capstyle="butt")
        if kappa is not None:
            ax.plot([kappa], [y], "o", color=ACCENT, markersize=6)
            ax.text(kappa, y - 0.28, f"{kappa:.2f}", ha="center", va="bottom", fontsize=7, color=ACCENT)
        if ceiling is not None:
            ax.plot([ceiling], [y], "D", color="#6b7280", markersize=5)
    ax.set_yticks(range(len(rows)), [_row_label(name) for name, _, _, _ in rows])
    ax.set_ylim(len(rows) - 0.5, -0.7)
    # A kappa may come without an interval (too few items to resample): the axis still starts at -0.1.
    ax.set_xlim(min([-0.1, *(ci[0] for _, _, ci, _ in rows if ci is not None)]), 1.0)
    ax.axvline(0, color="#b8bec9", linewidth=0.8)
    ax.plot([], [], "o-", color=ACCENT, label="verifier (95% interval)")
    if any(ceiling is not None for *_, ceiling in rows):
        ax.plot([], [], "D", color="#6b7280", linestyle="none", label="human ceiling, same items")
    else:
        reason = no_ceiling_reason or "it was not computed"
        ax.plot([], [], " ", label="\n".join(textwrap.wrap(f"no human ceiling: {reason}", 90)))
    figure.legend(
        fontsize=7, loc="outside lower center", ncols=2, frameon=False
    )  # laid out with the figure: never cut off
    figure.suptitle(_wrapped_title(title))  # centred on the figure, not on axes pushed right by long names
    ax.spines[["top", "right"]].set_visible(False)
    return figure


def annotator_quality_figure(rows: Sequence[VerifierRow], flagged: Sequence[str], rule: str) -> Figure:
    """Each annotator's Cohen kappa with the reference (dot, 95% interval) and with the majority of
    the others (grey diamond); flagged annotators' names are marked with a star."""
    figure = _figure(6.4, max(2.4, 1.2 + 0.5 * len(rows)))
    title = f"Annotators against the reference ({rule}), Cohen's kappa"
    if not any(kappa is not None for _, kappa, _, _ in rows):
        return _empty(figure, title, "No annotator has a defined kappa yet")
    ax = figure.add_subplot()
    for y, (_, kappa, ci, others) in enumerate(rows):
        if ci is not None:
            ax.plot(ci, [y, y], color=ACCENT, linewidth=2, solid_capstyle="butt")
        if kappa is not None:
            ax.plot([kappa], [y], "o", color=ACCENT, markersize=6)
            ax.text(kappa, y - 0.28, f"{kappa:.2f}", ha="center", va="bottom", fontsize=7, color=ACCENT)
        if others is not None:
            ax.plot([others], [y], "D", color="#6b7280", markersize=5)
    ax.set_yticks(range(len(rows)), [_row_label(f"{name} *" if name in flagged else name) for name, _, _, _ in rows])
    ax.set_ylim(len(rows) - 0.5, -0.7)
    ax.set_xlim(min([-0.1, *(ci[0] for _, _, ci, _ in rows if ci is not None)]), 1.0)
    ax.axvline(0, color="#b8bec9", linewidth=0.8)
    ax.plot([], [], "o-", color=ACCENT, label="with the reference (95% interval)")
    ax.plot([], [], "D", color="#6b7280", linestyle="none", label="with the majority of the others")
    if flagged:
        ax.plot([], [], " ", label="* flagged: far below the rest")
    figure.legend(
        fontsize=7, loc="outside lower center", ncols=2, frameon=False
    )  # laid out with the figure: never cut off
    figure.suptitle(_wrapped_title(title))  # centred on the figure, not on axes pushed right by long names
    ax.spines[["top", "right"]].set_visible(False)
    return figure
