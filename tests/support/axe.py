"""axe-core in the browser tests: its script injected into the page under test, its violations read back.

The script is axe-core's own `axe.min.js` (MPL-2.0, its licence header kept in the file), as the
`axe-playwright-python` package ships it (requirements-dev.in pins both): nothing is fetched at test
time, and it is injected through Playwright (the DevTools protocol), so the page's Content Security
Policy is not loosened for it.
"""

from __future__ import annotations

from typing import Any

from axe_playwright_python.sync_playwright import Axe

#: What axe checks: WCAG 2.0, 2.1 and 2.2 at levels A and AA, and its best practices.
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]
#: The impacts a page must have none of (issue 34): axe's two highest.
BLOCKING = ("serious", "critical")

_axe = Axe()


def violations(page, *, impacts: tuple[str, ...] = BLOCKING) -> list[str]:
    """axe's violations of these impacts on the page as it is now, one readable line each (rule, impact,
    what it asks, and the first elements it found)."""
    options: dict[str, Any] = {"runOnly": {"type": "tag", "values": TAGS}, "resultTypes": ["violations"]}
    response = _axe.run(page, options=options).response
    found = []
    for violation in response["violations"]:
        if violation["impact"] not in impacts:
            continue
        where = "; ".join(
            f"{' '.join(map(str, node['target']))}: {node.get('failureSummary', '').splitlines()[-1].strip()}"
            for node in violation["nodes"][:4]
        )
        found.append(f"{violation['id']} ({violation['impact']}, {len(violation['nodes'])} node(s)) {where}")
    return found
