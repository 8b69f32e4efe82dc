"""HTML faces of the report: the page, its downloads and its charts. Parse, access, call, render."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse, JsonResponse, QueryDict, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import get_conditional_response, patch_cache_control
from django.utils.http import quote_etag
from django.views.decorators.http import require_GET

from annotation.access import Researcher, access_study
from annotation.http import AuthenticatedHttpRequest
from annotation.models import ExportJob, ReferenceRule, Study
from annotation.transfer.selectors import latest_export
from metaeval import charts, selectors
from metaeval.dataset_export.licenses import LICENSES
from metaeval.reference import REFERENCE_RULES, RULE_DESCRIPTIONS, unavailable_rule_reason
from metaeval.reporting import ReportOptions, cache, page_options
from metaeval.reporting.charts import CHARTS, ChartNotApplicable, chart_figure, chart_names
from metaeval.reporting.csv_format import report_csv
from metaeval.reporting.html_format import DISAGREEMENTS_PER_PAGE, report_context, report_html
from metaeval.reporting.latex_format import TABLE_NAMES, report_tables, report_tex, table_tex
from metaeval.reporting.options import InvalidOption

DOWNLOAD_TYPES = {
    "json": "application/json",
    "csv": "text/csv; charset=utf-8",
    "html": "text/html; charset=utf-8",
    "tex": "application/x-tex; charset=utf-8",
}
CHART_VERSION = "3"  # bump when a chart's drawing changes, so old ETags stop matching


def _options(request: AuthenticatedHttpRequest) -> ReportOptions:
    """The page's options (both extra sections on); a bad value is a 400 that names it."""
    try:
        return page_options(request.GET)
    except InvalidOption as exc:
        raise BadRequest(f"{exc.name}: {exc}") from None


def _query(request: AuthenticatedHttpRequest, *, downloads: bool = False) -> str:
    """The request's options as a query string, without ``page`` (the page links keep the other options).

    For ``downloads`` with the page's own two sections switched on, so a download linked from the
    page is the page's report, and the same cached one.
    """
    query = request.GET.copy()
    query.pop("page", None)
    if downloads:
        query["by_domain"] = query["binary"] = "true"
    return query.urlencode()


def _chart_query(options: ReportOptions) -> str:
    """The query that gives a chart the page's labels: its reference rule and whether screened-out participants count."""
    query = QueryDict(mutable=True)
    if options.reference:
        query["reference"] = options.reference
    if options.include_screened_out:
        query["include_screened_out"] = "true"
    return f"?{query.urlencode()}" if query else ""


def _reference_control(request: AuthenticatedHttpRequest, study: Study, options: ReportOptions) -> dict:
    """The page's reference-rule form: the rules this Claimlab can apply, the one in use, and the
    page's other options as hidden fields (``page`` left out: another rule is another list)."""
    current = options.reference or study.reference_rule
    rules = [
        {
            "value": rule,
            "label": ReferenceRule(rule).label if rule in ReferenceRule.values else rule,
            "study_rule": rule == study.reference_rule,
        }
        for rule in REFERENCE_RULES
        if unavailable_rule_reason(rule) is None
    ]
    keep = [
        (name, value) for name, values in request.GET.lists() if name not in ("reference", "page") for value in values
    ]
    return {"current": current, "rules": rules, "keep": keep, "description": RULE_DESCRIPTIONS.get(current, "")}


@login_required
@require_GET
def report_page(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """The researcher's report, from the cache: every section, charts as <img> of the SVG route.

    When the data changed since the cached report was made, the page shows that report
    labelled with when it was computed while a background task makes the new one
    (``reporting.cache.page_report``); a big study's very first report is made that way too,
    the page saying so meanwhile, then showing its counts and agreement (``cached.partial``)
    until the rest is there. The disagreement list is paginated (``?page=``).
    """
    study = access_study(request.user, slug, role=Researcher)
    options = _options(request)
    cached = cache.page_report(study, options)
    page_context = {
        "study": study,
        "cached": cached,
        "query": _query(request),
        "download_query": _query(request, downloads=True),
        "reference_control": _reference_control(request, study, options),
        # the Hugging Face dataset is written by a background export job (annotation/lib/export_formats.py)
        "hf_export": latest_export(study, ExportJob.Format.HF),
        "hf_licenses": list(LICENSES.items()),
    }
    if cached.pending:  # a big study's first report, being built in the background: nothing to show yet
        return render(request, "metaeval/report.html", page_context)
    report = cached.report
    paginator = Paginator(cached.rows["disagreements"], DISAGREEMENTS_PER_PAGE)
    page = paginator.get_page(request.GET.get("page"))
    # a chart's URL carries the page's options that decide its labels (the reference rule, the participants)
    chart_query = _chart_query(options)
    sources = {
        name: {
            fmt: reverse("metaeval:report_chart", args=[study.slug, name, fmt]) + chart_query
            for fmt in charts.CHART_FORMATS
        }
        for name in chart_names(study)
        if not cached.partial  # drawn from the whole report: they come with it
    }
    context = report_context(study, report, chart_sources=sources, link_items=True, disagreements=page)
    return render(request, "metaeval/report.html", {**context, **page_context})


@login_required
@require_GET
def report_status(request: AuthenticatedHttpRequest, slug: str) -> JsonResponse:
    """Whether the report of the data as it is now is ready (the page polls this while it shows an older one)."""
    study = access_study(request.user, slug, role=Researcher)
    response = JsonResponse(cache.snapshot_status(study, _options(request)))
    patch_cache_control(response, private=True, no_store=True)
    return response


@login_required
@require_GET
def report_download(request: AuthenticatedHttpRequest, slug: str, fmt: str) -> HttpResponse | StreamingHttpResponse:
    """The report as a JSON, CSV, standalone HTML or LaTeX (every table, booktabs) file (same options as the page)."""
    study = access_study(request.user, slug, role=Researcher)
    options = _options(request)
    response: HttpResponse | StreamingHttpResponse
    if fmt == "json":  # streamed: its long lists are sent as stored, never held whole (issue 35)
        response = StreamingHttpResponse(cache.report_json_pieces(study, options), content_type=DOWNLOAD_TYPES[fmt])
    else:
        response = HttpResponse(
            _report_file(study, cache.current_report(study, options, per_response=False).report, fmt),
            content_type=DOWNLOAD_TYPES[fmt],
        )
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-report.{fmt}"'
    return response


def _report_file(study: Study, report: dict, fmt: str) -> str:
    if fmt == "csv":
        return report_csv(report)
    if fmt == "tex":
        return report_tex(report)
    return report_html(study, report)


@login_required
@require_GET
def report_table_tex(request: AuthenticatedHttpRequest, slug: str, table: str) -> HttpResponse:
    """One report table as a LaTeX ``table`` float (booktabs), to ``\\input`` into a paper."""
    study = access_study(request.user, slug, role=Researcher)
    if table not in TABLE_NAMES:
        raise Http404(f"No table {table!r}; a report has: {', '.join(TABLE_NAMES)}.")
    report = cache.current_report(study, _options(request), per_response=False).report
    tables = report_tables(report)
    if table not in tables:
        raise Http404(f"The {table} table has nothing to show in this study's report.")
    response = HttpResponse(table_tex(tables[table], label_prefix=f"{study.slug}-"), content_type=DOWNLOAD_TYPES["tex"])
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-{table}.tex"'
    return response


@login_required
@require_GET
def report_chart(request: AuthenticatedHttpRequest, slug: str, chart: str, ext: str) -> HttpResponse:
    """One chart as SVG or PDF; revalidated on every view (ETag), redrawn only when the data changed.

    Its options are the page's (the chart URL carries the page's reference rule), so the
    annotator and verifier charts are drawn from the page's cached report when it is current.
    """
    study = access_study(request.user, slug, role=Researcher)
    if chart not in CHARTS:
        raise Http404("No such chart.")
    options = _options(request)
    fingerprint = selectors.report_fingerprint(study)
    # the options a chart's labels depend on (metaeval.study_frame.FrameOptions) are in its key
    frame_key = f"{options.reference}-{options.include_screened_out}"
    etag = quote_etag(f"{fingerprint}-{chart}-{frame_key}-{ext}-{CHART_VERSION}")
    response = get_conditional_response(request, etag=etag)
    if response is None:
        # the page's cached report of this very data state, when there is one: no bootstrap redone
        report = cache.cached_current(study, options, fingerprint)
        try:
            figure = chart_figure(study, chart, options, report=report)
        except ChartNotApplicable as exc:
            raise Http404(str(exc)) from None
        response = HttpResponse(charts.render(figure, ext), content_type=charts.CHART_FORMATS[ext])
        disposition = "inline" if ext == "svg" else "attachment"
        response["Content-Disposition"] = f'{disposition}; filename="{study.slug}-{chart}.{ext}"'
    response["ETag"] = etag
    patch_cache_control(response, private=True, no_cache=True)
    return response
