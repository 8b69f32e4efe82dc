"""What the metaeval app does when the annotation app tells it something happened."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.dispatch import receiver

from annotation.models import Study
from annotation.progress.selectors import annotation_count
from annotation.signals import labels_imported

from . import selectors
from .reporting import cache, page_options


@receiver(labels_imported, dispatch_uid="metaeval.refresh_report_after_import")
def refresh_report_after_import(sender: Any, *, study: Study, **kwargs: Any) -> None:
    """A big study's report takes seconds to build: start it when its labels arrive, not at the first view.

    Only past ``REPORT_INLINE_MAX_LABELS`` (the size from which a first view builds in the
    background anyway); a smaller study's report is built at its view in well under a second.
    """
    if annotation_count(study) > settings.REPORT_INLINE_MAX_LABELS:
        cache.request_refresh(study, page_options(), selectors.report_fingerprint(study))
