"""LaTeX export of the report's tables: booktabs, escaped names, one file per table and report.tex."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.models import StudyMember
from metaeval.reporting import ReportOptions, build_report
from metaeval.reporting.latex_format import escape, report_tables, report_tex, table_tex

NASTY = "w&1 50% a_b #2 $x {y} ~z ^q \\"


def test_escape_every_special_character():
    assert escape(NASTY) == (r"w\&1 50\% a\_b \#2 \$x \{y\} \textasciitilde{}z \textasciicircum{}q \textbackslash{}")
    assert escape("two\nlines") == "two lines"


def _unescaped_specials(tex: str) -> list[str]:
    """Special characters in table cells that are not escaped (math and commands are ours)."""
    cells = []
    for line in tex.splitlines():
        if line.endswith("\\\\") and not line.startswith("\\"):
            body = line[: -len("\\\\")]
            body = re.sub(r"\$[^$]*\$", "", body)  # our math: $^{\dagger}$, $<$, $\kappa$
            cells.append(body)
    return [char for cell in cells for char in re.findall(r"(?<!\\)[%#_&$]", cell.replace(" & ", " "))]


@pytest.mark.django_db
def test_tables_are_booktabs_with_escaped_names(study):
    StudyMember.objects.filter(study=study, pseudonym="w1").update(pseudonym=NASTY)
    report = build_report(study, ReportOptions(by_domain=True, binary=True))
    tables = report_tables(report)
    assert {"agreement", "binary", "pairs", "ceiling", "domains", "preference", "sign_tests"} <= set(tables)
    pairs = table_tex(tables["pairs"])
    assert "\\toprule" in pairs and "\\midrule" in pairs and "\\bottomrule" in pairs
    assert "\\begin{tabular}{lrlr}" in pairs
    assert escape(NASTY) in pairs and NASTY not in pairs
    assert _unescaped_specials(pairs) == []
    ceiling = table_tex(tables["ceiling"])
    assert escape(NASTY) in ceiling and _unescaped_specials(ceiling) == []
    document = report_tex(report)
    assert document.startswith("\\documentclass{article}") and "\\usepackage{booktabs}" in document
    assert document.count("\\begin{table}") == len(tables) and document.rstrip().endswith("\\end{document}")
    assert _unescaped_specials(document) == []
    kappa = report["agreement"]["fleiss_kappa"]
    assert f"{kappa['value']:.3f} & [{kappa['ci'][0]:.3f}, {kappa['ci'][1]:.3f}]" in table_tex(tables["agreement"])


@pytest.mark.django_db
def test_small_samples_get_a_dagger_and_a_note(study):
    report = build_report(study, ReportOptions(by_domain=True, binary=True))
    report["agreement"]["fleiss_kappa"]["n_items"] = 12
    tex = table_tex(report_tables(report)["agreement"])
    assert "$^{\\dagger}$" in tex and "fewer than 30 items" in tex


@pytest.mark.django_db
def test_page_links_each_table_and_the_downloads_work(client, researcher, study):
    client.force_login(researcher)
    page = client.get(reverse("metaeval:report", args=[study.slug])).content.decode()
    for name in ("agreement", "pairs", "preference", "sign_tests"):
        assert reverse("metaeval:report_table_tex", args=[study.slug, name]) in page, name
    assert reverse("metaeval:report_download", args=[study.slug, "tex"]) in page
    one = client.get(reverse("metaeval:report_table_tex", args=[study.slug, "sign_tests"]))
    assert one.status_code == 200 and one["Content-Disposition"].endswith('pref-report-sign_tests.tex"')
    assert one.content.decode().startswith("\\begin{table}")
    whole = client.get(reverse("metaeval:report_download", args=[study.slug, "tex"]))
    assert whole.status_code == 200 and "\\documentclass{article}" in whole.content.decode()
    assert client.get(reverse("metaeval:report_table_tex", args=[study.slug, "nonsense"])).status_code == 404
    assert client.get(reverse("metaeval:report_table_tex", args=[study.slug, "credibility"])).status_code == 404


@pytest.mark.django_db
def test_the_report_command_writes_latex(study):
    out = io.StringIO()
    call_command("report", study.slug, "--format", "tex", stdout=out)
    assert out.getvalue().startswith("\\documentclass{article}") and "\\toprule" in out.getvalue()
