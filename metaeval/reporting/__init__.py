"""The meta-evaluation report: built once (``build_report``), rendered as JSON, CSV or HTML."""

from .build import build_report
from .options import ReportOptions, options_from_query, page_options

__all__ = ["ReportOptions", "build_report", "options_from_query", "page_options"]
