"""Browser tests never wait with Playwright's `wait_for_function` (docs/development.md).

Our pages' CSP (`script-src 'self'`) can refuse its string predicate as eval once it polls, so a test
using it fails at random (one CI run in four did). `tests/support/page_waits.wait_until` and locator
expectations wait for the same conditions without evaluating a string in the page.
"""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
CALL = re.compile(r"\.wait_for_function\s*\(")


def test_no_browser_test_waits_with_wait_for_function():
    offenders = [
        f"{path.relative_to(TESTS)}:{number}"
        for path in sorted(TESTS.rglob("*.py"))
        if path != Path(__file__).resolve()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if CALL.search(line)
    ]
    assert offenders == [], f"use tests.support.page_waits.wait_until or a locator instead: {offenders}"


def test_the_check_finds_a_call():
    assert CALL.search('    page.wait_for_function("() => true")')
    assert not CALL.search("never `page.wait_for_function`: the CSP refuses it")
