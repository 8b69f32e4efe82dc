"""Browser test fixtures (a pytest plugin the top conftest loads, so any test folder can use
`page` and `guard`): Playwright's sync API driving Debian's Chromium against the live server.

Playwright cannot download its own browser on these machines, so the tests use
/usr/bin/chromium and skip, with a reason, when it is missing (`.ci/run`
installs it, so CI always runs them). Each test gets a fresh browser context at
laptop size (1366x768) whose `guard` records console errors, page errors, CSP
violations and every request that would leave 127.0.0.1 (those are aborted).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.live_gate import close_and_drain, open_gate

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
MISSING = "Chromium not found at /usr/bin/chromium; install Debian's chromium package"
VIEWPORT = {"width": 1366, "height": 768}
LOCAL_HOSTS = {"127.0.0.1"}

# The live server listens on 127.0.0.1 (pytest-django's default is "localhost"),
# so "no request leaves 127.0.0.1" is literally checkable.
os.environ.setdefault("DJANGO_LIVE_TEST_SERVER_ADDRESS", "127.0.0.1")

# Collected by a recording listener that runs before any page script; not subject to the page's CSP.
RECORD_CSP = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", function (event) {
  window.__cspViolations.push(event.violatedDirective + " " + (event.blockedURI || "inline"));
});
"""


@pytest.fixture(autouse=True)
def _live_server_gate(request) -> Iterator[None]:
    """Requests to the live server pass only while its test runs (tests/support/live_gate.py says why).

    Every test opens it (the test client goes through it too); a test with the live server asks
    for the database first, so that its flush comes after the gate is closed and drained."""
    open_gate()
    if "live_server" not in request.fixturenames:
        yield
        return
    request.getfixturevalue("transactional_db")
    yield
    still_inside = close_and_drain()
    assert still_inside == 0, f"{still_inside} request(s) still in the live server 10 s after the test ended"


@pytest.fixture(scope="module")
def _allow_orm_beside_playwright() -> Iterator[None]:
    """Playwright's sync API keeps an asyncio loop running in this thread while it is started,
    and Django refuses ORM calls when it sees one. The test code (not the server) makes
    plain, sequential ORM calls, so allow them, for the browser modules only."""
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield
    if previous is None:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture(scope="module")
def browser(_allow_orm_beside_playwright):
    if not CHROMIUM.exists():
        pytest.skip(MISSING)
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="the playwright package is not installed (requirements-dev.txt)"
    )
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@dataclass
class Guard:
    """What a page did that it should not have."""

    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    external_requests: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def assert_clean(self, page) -> None:
        assert self.console_errors == [], self.console_errors
        assert self.page_errors == [], self.page_errors
        assert self.external_requests == [], self.external_requests
        violations = page.evaluate("window.__cspViolations || []")
        assert violations == [], violations


@pytest.fixture
def guard() -> Guard:
    return Guard()


@pytest.fixture
def shots(tmp_path) -> Path:
    """Where a test's screenshots go: $CLAIMLAB_SCREENSHOTS when set (to look at them), else its tmp dir."""
    directory = Path(os.environ.get("CLAIMLAB_SCREENSHOTS") or tmp_path)
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@pytest.fixture
def context(browser, live_server, guard):
    context = browser.new_context(viewport=VIEWPORT, base_url=live_server.url)
    context.set_default_timeout(10_000)
    context.add_init_script(RECORD_CSP)

    closing = []

    def route(route) -> None:
        url = route.request.url
        if closing:  # the test is over: nothing more reaches the server (see below)
            route.abort()
            return
        guard.requests.append(url)
        if urlsplit(url).hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            guard.external_requests.append(url)
            route.abort()

    context.route("**/*", route)
    in_flight: set = set()
    context.on("request", lambda request: in_flight.add(request))
    context.on("requestfinished", lambda request: in_flight.discard(request))
    context.on("requestfailed", lambda request: in_flight.discard(request))
    yield context
    finish_requests(context, in_flight, closing)
    context.close()


def finish_requests(context, in_flight: set, closing: list) -> None:
    """Let the pages' requests in flight end (up to 5 s), then refuse new ones, before the context closes.

    The workbench fetches the next item in the background and gives it back with a beacon
    when the page goes away; a request still running in the live server when the test's
    database is flushed deadlocks PostgreSQL's TRUNCATE.
    """
    pages = context.pages
    for _ in range(250):
        if not in_flight or not pages:
            break
        pages[0].wait_for_timeout(20)  # lets Playwright deliver the requests' events
    closing.append(True)


@pytest.fixture
def page(context, guard):
    page = context.new_page()
    page.on("console", lambda message: guard.console_errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: guard.page_errors.append(str(error)))
    return page


@pytest.fixture
def screen_context(browser, live_server, guard):
    """A browser context of the given screen size with the same guards as `page` (no external requests)."""
    from tests.browser import screens  # its study builders import the models: only once Django is set up

    contexts = []

    def make(screen: str):
        context = browser.new_context(viewport=screens.SCREENS[screen], base_url=live_server.url)
        context.set_default_timeout(10_000)

        def route(route) -> None:
            if route.request.url.startswith(live_server.url):
                route.continue_()
            else:
                guard.external_requests.append(route.request.url)
                route.abort()

        context.route("**/*", route)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: guard.page_errors.append(str(error)))
        page.on("console", lambda m: guard.console_errors.append(m.text) if m.type == "error" else None)
        return page

    yield make
    for context in contexts:
        context.close()
