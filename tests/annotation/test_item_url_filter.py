"""The `item_url` filter gives what `{% url 'annotation:item_detail' slug id %}` gives, for any item id."""

from __future__ import annotations

import random

import pytest
from django.template import engines
from django.urls import NoReverseMatch, reverse, set_script_prefix

from annotation.templatetags.claimlab import item_url

TRICKY = [
    "c-000001",
    "a b",
    "50%",
    "what?",
    "x#y",
    "a/b/c",
    "//evil",
    "..",
    "é-ü",
    "汉字",
    "a&b=c",
    "~:@!$'()*+,;",
    "<i>",
]


def seeded_ids(count: int) -> list[str]:
    rng = random.Random(35)
    alphabet = "aZ09 -_./%?#&=+;:@~!$'()*,<>\"\\éü汉😀\t"
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(count)]


@pytest.mark.parametrize("script_prefix", ["/", "/claimlab/", "/with space/"])
def test_it_equals_reverse_for_tricky_and_seeded_ids(script_prefix):
    set_script_prefix(script_prefix)
    try:
        for external_id in TRICKY + seeded_ids(2_000):
            for slug in ("study-1", "other_study"):
                assert item_url(external_id, slug) == reverse("annotation:item_detail", args=[slug, external_id])
    finally:
        set_script_prefix("/")


@pytest.mark.parametrize("external_id", ["", "line\nbreak"])
def test_an_id_the_route_does_not_take_fails_as_reverse_does(external_id):
    with pytest.raises(NoReverseMatch):
        item_url(external_id, "study-1")


def test_on_a_page_it_is_escaped_as_the_url_tag_is():
    page = engines["django"].from_string(
        "{% load claimlab %}{{ item|item_url:slug }}|{% url 'annotation:item_detail' slug item %}"
    )
    fast, tag = page.render({"item": "a&b<c>", "slug": "study-1"}).split("|")
    assert fast == tag and "&amp;" in fast
