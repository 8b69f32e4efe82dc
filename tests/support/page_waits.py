"""Waiting in a browser test for a condition on the page, without `page.wait_for_function`.

Our pages send `script-src 'self'` (no 'unsafe-eval'). Playwright's `wait_for_function` turns a
string predicate into a function inside the page; when the first check is false and it polls, the
page's CSP can refuse that as eval (microsoft/playwright#7395, #36986), and the wait fails at random
(one CI run in four). `page.evaluate` runs through the debugger protocol, which CSP does not govern,
so polling it from Python waits for the same condition without ever evaluating a string in the page.
"""

from __future__ import annotations

import time
from typing import Any

from playwright.sync_api import Error as PlaywrightError

POLL_MS = 15


def wait_until(page, predicate: str, arg: Any = None, *, timeout_ms: float = 30_000) -> Any:
    """Poll `predicate` (a JS function, given `arg`) until it returns a truthy value; return that value.

    A page that is navigating has no document to ask: that counts as not yet. Raises AssertionError
    naming the predicate after `timeout_ms`.
    """
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        try:
            value = page.evaluate(predicate, arg)
        except PlaywrightError as error:
            if "Execution context was destroyed" not in str(error) and "navigat" not in str(error):
                raise
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"still false after {timeout_ms / 1000:.0f} s: {predicate}")
        page.wait_for_timeout(POLL_MS)
