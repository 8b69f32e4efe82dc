"""The study page's precision card: the CI width reached so far and the items still needed.

A template tag, because the study page belongs to ``annotation``, which may not
import ``metaeval``; the tag is loaded only by the researcher's study page.
"""

from __future__ import annotations

from typing import Any

from django import template

from annotation.models import Study
from metaeval.planning import study_precision

register = template.Library()

#: The CI width the study page measures progress against.
TARGET_WIDTH = 0.1


@register.inclusion_tag("metaeval/_study_precision.html")
def precision_card(study: Study) -> dict[str, Any]:
    """Context of the precision card for ``study``."""
    return {"study": study, "precision": study_precision(study, TARGET_WIDTH)}
