"""Submit -> next item visible, in a real browser (issue 15, §4).

Starts gunicorn (2 workers, production settings, whitenoise) on a SQLite file in a
temporary folder, or on PostgreSQL (`--db postgres`), with two studies: 50 preference
items and 50 verification items with 3 evidence passages each (evidence judgements on).
One annotator in Debian's Chromium (Playwright, /usr/bin/chromium), keyboard only, labels
every item three ways in the same run:

- **no-JS** (baseline): JavaScript off, so the page is plain forms: choose, submit, and the
  browser loads the next page (POST, redirect, GET, render). The choices are clicked (no
  shortcuts without JavaScript); the time measured is the same: from the submit until the
  next item is on screen.
- **page round trip**: JavaScript on, the next item NOT fetched ahead (the page as before
  issue 15), keyboard shortcuts.
- **prefetched**: JavaScript on, the next item fetched ahead and swapped in; the studies
  submit on the label key (one keystroke per label when nothing else is asked for).

The **crowd** scenario (issue 15 for the crowd) does the same for a crowd participant who
arrives through a study's participant link (Prolific's PROLIFIC_PID), consents, starts and
answers their quota of verification items (3 passages, judged) on the participant's item page:
no-JS (plain forms: POST, redirect to the step, GET) against prefetched (the next item claimed
ahead by the participant's own route and swapped in), in the same run, each on a study of its own.

"Visible" is when the next item's workbench is in the document with a new assignment id and
not greyed out waiting, measured from the key press (or click) in the page itself, to the
frame drawn after the swap (or the new page's first frame). Printed per path and
kind: p50 / p95 / max in ms and keys per label, and the ratios against the baseline.
Goal: p95 under 50 ms for the prefetched path.

    python benchmarks/annotate_browser.py [--items 50] [--db sqlite|postgres] [--scenario all|annotators|crowd]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

# Run as a script, so this folder is on the path: the server's environment and port are annotate_load's.
from annotate_load import free_port, server_env

REPO = Path(__file__).resolve().parents[1]
KINDS = ("preference", "verification")
ANNOTATOR_PATHS = ("nojs", "roundtrip", "prefetched")
CROWD_PATHS = ("nojs", "prefetched")
#: The page after the last item: the annotator's finish page, or the participant's end page.
FINISHED = "#wb-done, #end-title"
CHROMIUM = "/usr/bin/chromium"
PASSWORD = secrets.token_urlsafe(12)

#: In the page before its own scripts: when the submitting key went down (or the submit
#: button was clicked), and the first animation frame with another item on screen.
TIMING_SCRIPT = """
(() => {
  const marks = JSON.parse(sessionStorage.getItem("bench-marks") || "[]");
  window.__benchMarks = marks;
  const shown = () => {
    const wb = document.querySelector("#wb-stage .wb");
    return wb && !wb.classList.contains("is-waiting") ? wb.dataset.assignment : null;
  };
  let pending = sessionStorage.getItem("bench-pending");
  let last = null;
  const record = () => {
    const now = shown();
    if (pending && now && now !== pending.split("|")[0]) {
      const started = parseFloat(pending.split("|")[1]);
      // the frame that shows it: its animation-frame callbacks run before it is drawn, a task
      // queued from there runs after
      requestAnimationFrame(() => setTimeout(() => {
        marks.push(performance.timeOrigin + performance.now() - started);
        sessionStorage.setItem("bench-marks", JSON.stringify(marks));
      }, 0));
      pending = null;
      sessionStorage.removeItem("bench-pending");
    }
  };
  window.__benchStart = () => {
    pending = shown() + "|" + (performance.timeOrigin + performance.now());
    sessionStorage.setItem("bench-pending", pending);
  };
  document.addEventListener("DOMContentLoaded", () => {
    record();
    new MutationObserver(record).observe(document.body, { subtree: true, childList: true, attributes: true, attributeFilter: ["class"] });
  });
})();
"""


def item_records(kind: str, items: int) -> io.BytesIO:
    """The items of one study, as JSONL: preference lists, or claims with 3 evidence passages."""
    lines: list[str] = []
    for n in range(items):
        record: dict[str, object]
        if kind == "preference":
            record = {
                "id": f"p-{n}",
                "source": f"Source text number {n}. " * 6,
                "lists": {
                    "alpha": [f"Alpha claim {n}.{k}." for k in range(5)],
                    "beta": [f"Beta claim {n}.{k}." for k in range(4)],
                },
            }
        else:
            record = {
                "id": f"c-{n}",
                "claim": f"Claim number {n} about a river and a court in 1980.",
                "evidence": [
                    {
                        "text": "An evidence passage. " * 25,
                        "title": f"Doc {k}",
                        "url": f"https://example.org/{n}/{k}",
                        "source_type": "news",
                    }
                    for k in range(3)
                ],
            }
        lines.append(json.dumps(record))
    return io.BytesIO("\n".join(lines).encode())


def fresh_study(slug: str, kind: str, name: str, items: int, **options):
    """The study `slug`, made anew with `items` items (an earlier run's is deleted first)."""
    from annotation.models import Study
    from annotation.studies.services import create_study
    from annotation.transfer.services.item_import import import_items

    Study.objects.filter(slug=slug).delete()
    study = create_study(
        slug=slug,
        name=name,
        kind=kind,
        annotators_per_item=1,
        systems=["alpha", "beta"] if kind == "preference" else None,
        evidence_judgements=kind == "verification",
        instructions="Judge each item.",
        **options,
    )
    import_items(study=study, stream=item_records(kind, items), fmt="jsonl")
    return study


def setup_studies(items: int) -> dict[tuple[str, str], str]:
    """One preference and one verification study per path (so every path labels fresh items)."""
    from django.contrib.auth import get_user_model

    from annotation.members.services import add_members

    User = get_user_model()
    slugs: dict[tuple[str, str], str] = {}
    for path in ANNOTATOR_PATHS:
        user, _ = User.objects.get_or_create(username=f"bench-{path}")
        user.set_password(PASSWORD)
        user.save()
        for kind in KINDS:
            slug = f"bench-{kind[:4]}-{path}"
            name = f"Browser benchmark ({kind}, {path})"
            study = fresh_study(slug, kind, name, items, submit_on_label=path == "prefetched")
            add_members(study=study, usernames=[user.username], role="annotator")
            slugs[(path, kind)] = slug
    return slugs


def setup_crowd_studies(items: int) -> dict[str, str]:
    """One verification study per crowd path, its participant link on, a quota of every item: path -> link token."""
    from annotation.crowd.services import configure_link

    tokens: dict[str, str] = {}
    for path in CROWD_PATHS:
        study = fresh_study(f"bench-crowd-{path}", "verification", f"Crowd browser benchmark ({path})", items)
        changes = {"enabled": True, "code_completed": "BENCH1", "items_per_participant": items}
        tokens[path] = configure_link(study=study, changes={**changes, "time_limit_minutes": 600}).token
    return tokens


def label_keys(kind: str, turn: int, *, submit_on_label: bool) -> list[str]:
    """The keys of one label: the judgements of the passages, then the label (and Enter)."""
    if kind == "preference":
        keys = [str(1 + turn % 5)]
    else:
        keys = ["yxn"[(turn + k) % 3] for k in range(3)] + [str(1 + turn % 3)]
    return keys if submit_on_label else [*keys, "Enter"]


def log_in(page, path: str) -> None:
    page.goto("/accounts/login/")
    page.fill("#id_username", f"bench-{path}")
    page.fill("#id_password", PASSWORD)
    with page.expect_navigation():
        page.click("button[type=submit]")


def arrive(page, token: str, path: str) -> None:
    """A participant from the panel: the link with their ID, consent, the instructions' Start (plain forms)."""
    page.goto(f"/p/{token}/?PROLIFIC_PID=bench{path}{secrets.token_hex(4)}&STUDY_ID=S1&SESSION_ID=X1")
    page.check("#consent-agree")
    with page.expect_navigation():
        page.click("#consent-submit")
    with page.expect_navigation():
        page.click("#instructions-start")


def run_path(
    browser, base: str, path: str, slug: str, kind: str, items: int, lead: list[float], *, crowd: str | None = None
) -> tuple[list[float], float]:
    """Label every item of one study on one path: (submit -> next visible, ms each), keys per label.

    With `crowd` (a participant link's token), as a participant arriving through it, on their item page.
    """
    javascript = path != "nojs"
    context = browser.new_context(
        viewport={"width": 1280, "height": 900}, base_url=base, java_script_enabled=javascript
    )
    context.set_default_timeout(30_000)
    if javascript:
        context.add_init_script(TIMING_SCRIPT)
    page = context.new_page()
    if crowd is None:
        log_in(page, path)
    if path == "roundtrip":
        # The page as before issue 15: no item fetched ahead (prefetch config removed before the script reads it).
        context.add_init_script("""document.addEventListener("readystatechange", () => {
          if (document.readyState !== "interactive") return;
          const config = document.querySelector('#wb-stage .wb script[type="application/json"]');
          if (config) { const value = JSON.parse(config.textContent); delete value.prefetch; config.textContent = JSON.stringify(value); }
        });""")
    if crowd is None:
        page.goto(f"/studies/{slug}/annotate/")
    else:
        arrive(page, crowd, path)
    submit_on_label = path == "prefetched" and crowd is None  # a participant's page submits with Enter
    keys_sent = 0
    times: list[float] = []
    for turn in range(items):
        if not javascript:
            # No shortcuts without JavaScript: the choices are clicked, the time is the page load.
            if kind == "preference":
                page.check(
                    f'input[name="choice"][value="{("left_strong", "left_slight", "tie", "right_slight", "right_strong")[turn % 5]}"]'
                )
            else:
                for k in range(3):
                    page.check(
                        f'input[name="evidence_{k}"][value="{("support", "irrelevant", "not_support")[(turn + k) % 3]}"]'
                    )
                page.check(f'input[name="label"][value="{("supported", "contradicted", "inconclusive")[turn % 3]}"]')
            started = time.perf_counter()
            with page.expect_navigation(wait_until="commit"):
                page.click("#wb-submit")
            page.wait_for_selector(f"#wb-stage .wb, {FINISHED}", state="attached")
            page.wait_for_load_state("domcontentloaded")
            times.append((time.perf_counter() - started) * 1000)
            continue
        if path == "prefetched":
            # An annotator reads for a moment (at least 0.1 s; in practice seconds) while the
            # page fetches the item after this one; how long that took is reported.
            waited = time.perf_counter()
            page.wait_for_timeout(100)
            page.wait_for_function("() => document.documentElement.getAttribute('data-ahead') !== 'pending'")
            lead.append((time.perf_counter() - waited) * 1000)
        keys = label_keys(kind, turn, submit_on_label=submit_on_label)
        for key in keys[:-1]:
            page.keyboard.press(key)
        page.evaluate("window.__benchStart()")
        before = len(page.evaluate("window.__benchMarks"))
        if path == "roundtrip":
            with page.expect_navigation():
                page.keyboard.press(keys[-1])
        else:
            page.keyboard.press(keys[-1])
        keys_sent += len(keys)
        if turn < items - 1:
            page.wait_for_function(f"() => window.__benchMarks && window.__benchMarks.length > {before}")
        else:
            page.wait_for_selector(FINISHED)
    # the last submit shows the finish (or end) page, not an item
    times = page.evaluate("window.__benchMarks")[: items - 1] if javascript else times[: items - 1]
    context.close()
    return times, (keys_sent / items if javascript else float("nan"))


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def print_path(path: str, times: list[float], keys: float, base_p95: float, trip_p95: float | None) -> bool:
    """One row of figures; whether the prefetched goal holds for it."""
    p50, p95 = statistics.median(times), quantile(times, 0.95)
    keys_text = "mouse" if path == "nojs" else f"{keys:.1f} keys/label"
    ratios = f"p95 = {p95 / base_p95:.2f} x no-JS" + (f", {p95 / trip_p95:.2f} x round trip" if trip_p95 else "")
    print(f"  {path:<11} p50 {p50:7.1f} ms   p95 {p95:7.1f} ms   max {max(times):7.1f} ms   {keys_text:<16} {ratios}")
    return path != "prefetched" or p95 < 50


def print_lead(lead: list[float]) -> None:
    print(
        f"  the item after was ready {statistics.median(lead):.0f} ms (p50) after the previous one showed "
        f"(p95 {quantile(lead, 0.95):.0f} ms; at least 100 ms of reading is simulated)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--scenario", choices=["all", "annotators", "crowd"], default="all")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        sys.exit(f"{CHROMIUM} not found: install Debian's chromium package")
    annotators, crowd = args.scenario in ("all", "annotators"), args.scenario in ("all", "crowd")

    folder = Path(tempfile.mkdtemp(prefix="claimlab-browser-"))
    env = server_env(argparse.Namespace(db=args.db, no_pool=False), folder)
    for key in ("DJANGO_SETTINGS_MODULE", "DEBUG", "SECRET_KEY", "CLAIMLAB_VAR_DIR", "LOG_LEVEL", "STATIC_ROOT"):
        os.environ[key] = env[key]
    if "DATABASE_URL" in env:
        os.environ["DATABASE_URL"] = env["DATABASE_URL"]
    else:
        os.environ.pop("DATABASE_URL", None)
    manage = [sys.executable, str(REPO / "manage.py")]
    subprocess.run([*manage, "migrate", "--no-input", "-v", "0"], env=env, cwd=REPO, check=True)
    subprocess.run([*manage, "collectstatic", "--no-input", "-v", "0"], env=env, cwd=REPO, check=True)
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.db import connection

    slugs = setup_studies(args.items) if annotators else {}
    tokens = setup_crowd_studies(args.items) if crowd else {}
    connection.close()

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    gunicorn = str(Path(sys.executable).with_name("gunicorn"))
    server = subprocess.Popen(
        [
            gunicorn,
            "config.wsgi:application",
            "--workers",
            "2",
            "--bind",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
        ],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=open(folder / "gunicorn.log", "wb"),
    )
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"{base}/healthz", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        from playwright.sync_api import sync_playwright

        results: dict[tuple[str, str], tuple[list[float], float]] = {}
        leads: dict[str, list[float]] = {}
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"]
            )
            for kind in KINDS if annotators else ():
                for path in ANNOTATOR_PATHS:
                    results[(path, kind)] = run_path(
                        browser, base, path, slugs[(path, kind)], kind, args.items, leads.setdefault(kind, [])
                    )
            for path in CROWD_PATHS if crowd else ():
                slug = f"bench-crowd-{path}"
                lead = leads.setdefault("crowd", [])
                results[(path, "crowd")] = run_path(
                    browser, base, path, slug, "verification", args.items, lead, crowd=tokens[path]
                )
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)

    goal_met = True
    if annotators:
        print(
            f"submit -> next item visible, {args.items} items per study, one annotator, {args.db}, gunicorn 2 workers"
        )
        for kind in KINDS:
            base_p95 = quantile(results[("nojs", kind)][0], 0.95)
            trip_p95 = quantile(results[("roundtrip", kind)][0], 0.95)
            print(f"\n{kind}" + (" (3 evidence passages, judged)" if kind == "verification" else ""))
            for path in ANNOTATOR_PATHS:
                goal_met &= print_path(path, *results[(path, kind)], base_p95, trip_p95)
            print_lead(leads[kind])
    if crowd:
        print(
            f"\ncrowd participant: submit -> next item visible, a quota of {args.items} verification items "
            f"(3 evidence passages, judged; label + Enter), {args.db}, gunicorn 2 workers"
        )
        base_p95 = quantile(results[("nojs", "crowd")][0], 0.95)
        for path in CROWD_PATHS:
            goal_met &= print_path(path, *results[(path, "crowd")], base_p95, None)
        print_lead(leads["crowd"])
    print(f"\ngoal: prefetched p95 < 50 ms: {'met' if goal_met else 'MISSED'}")


if __name__ == "__main__":
    main()
