"""The report page's reference-rule control (issue 34): a GET form instead of editing ``?reference=``."""

from __future__ import annotations

import re

from django.urls import reverse

from metaeval.reference import REFERENCE_RULES


def _form(html: str) -> str:
    match = re.search(r'<form method="get" class="report-reference" id="reference-form">(.*?)</form>', html, re.S)
    assert match, "the report page has no reference-rule form"
    return match.group(1)


def test_the_report_page_has_the_reference_control_with_the_current_rule_selected(
    client, researcher, loaded_verification_study
):
    client.force_login(researcher)
    url = reverse("metaeval:report", args=[loaded_verification_study.slug])
    response = client.get(url)
    assert response.status_code == 200
    form = _form(response.content.decode())
    options = re.findall(r'<option value="([a-z_]+)"( selected)?>', form)
    assert [value for value, _ in options] == list(REFERENCE_RULES)
    assert [value for value, selected in options if selected] == [loaded_verification_study.reference_rule]
    assert "(the study&#x27;s rule)" in form or "(the study's rule)" in form
    assert response.context["report"]["reference"]["rule"] == loaded_verification_study.reference_rule


def test_choosing_a_rule_gives_that_report_and_keeps_the_other_options(client, researcher, loaded_verification_study):
    client.force_login(researcher)
    url = reverse("metaeval:report", args=[loaded_verification_study.slug])
    # what the form sends: its hidden fields (the page's other options, not ?page=) and the select
    response = client.get(url, {"reference": "gold", "k": "5", "page": "2"})
    assert response.status_code == 200
    form = _form(response.content.decode())
    assert re.findall(r'<option value="([a-z_]+)" selected>', form) == ["gold"]
    hidden = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form))
    assert hidden == {"k": "5"}
    reference = response.context["report"]["reference"]
    assert reference["rule"] == "gold"
    assert (
        response.context["report"]["options"]["k"] == 5 and response.context["report"]["options"]["reference"] == "gold"
    )
    majority = client.get(url, {"reference": "majority", "k": "5"}).context["report"]["reference"]
    assert majority["rule"] == "majority" and majority != reference
