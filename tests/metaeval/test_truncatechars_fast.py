"""The report's `truncatechars_fast` gives what Django's `truncatechars` gives, on texts that fit and texts that don't."""

from __future__ import annotations

import random

import pytest
from django.template import engines
from django.template.defaultfilters import truncatechars
from django.utils.safestring import SafeData, mark_safe

from metaeval.templatetags.report_format import truncatechars_fast

# ASCII, HTML's special characters, a precomposed and a decomposed accent (U+0301 combines: it does not count),
# characters outside the BMP, a newline.
PIECES = ["a", "Z", " ", "<", "&", '"', "é", "e\u0301", "q\u0301", "\u0301", "😀", "汉", "\n", "ß"]


def texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        size = rng.choice([0, 1, 3, 8, 9, 10, 11, 12, 20, 398, 399, 400, 401, 402, 410])
        out.append("".join(rng.choice(PIECES) for _ in range(size)))
    return out


@pytest.mark.parametrize("length", [0, 1, 3, 9, 10, 11, 400])
def test_it_equals_djangos_truncatechars_on_seeded_texts(length):
    for text in texts(seed=length, count=600):
        assert truncatechars_fast(text, length) == truncatechars(text, length), repr(text)


def test_a_decomposed_text_that_fits_comes_back_normalised_as_djangos_does():
    decomposed = "Cafe\u0301 au lait"
    assert truncatechars_fast(decomposed, 400) == truncatechars(decomposed, 400) == "Café au lait"


def test_a_text_whose_combining_marks_keep_it_in_bounds_goes_to_django():
    # q with an acute accent has no precomposed form: 12 code points after NFC, 8 characters that count. The
    # quick length test says no, Django's loop says it fits.
    text = "ab" + "q\u0301" * 4 + "cd"
    assert truncatechars_fast(text, 10) == truncatechars(text, 10) == text


def test_a_non_integer_length_is_djangos_business():
    assert truncatechars_fast("a long enough text", "x") == truncatechars("a long enough text", "x")


def test_safe_input_stays_safe_and_unsafe_input_is_escaped_on_the_page():
    assert isinstance(truncatechars_fast(mark_safe("<b>bold</b>"), 400), SafeData)
    assert not isinstance(truncatechars_fast("<b>bold</b>", 400), SafeData)
    page = engines["django"].from_string(
        "{% load report_format %}{{ text|truncatechars_fast:5 }}|{{ text|truncatechars:5 }}|"
        "{{ text|truncatechars_fast:400 }}|{{ text|truncatechars:400 }}"
    )
    fast_short, django_short, fast_long, django_long = page.render({"text": "<b>a & b</b>"}).split("|")
    assert fast_short == django_short and fast_long == django_long == "&lt;b&gt;a &amp; b&lt;/b&gt;"
