/* Claimlab report page: while it shows an older report, ask whether the new one is ready.
 *
 * #report-stale carries data-status-url (JSON: {"current": bool, "computed_at": ...}).
 * Every few seconds, while the tab is visible, the server is asked; once the report of
 * the data as it is now is ready, the notice says so with a link that shows it (the page
 * does not reload by itself: the researcher may be reading). On the pages of a study's first
 * report it reloads by itself, asking every tenth of a second at first: data-reload="pending" (nothing shown
 * yet) as soon as its first sections or the whole report are stored, data-reload="partial" (the
 * first sections shown) once the whole report is. No inline script, no eval (CSP script-src
 * 'self'); without this file the notice's reload link does the same.
 */
(function () {
  "use strict";

  var notice = document.getElementById("report-stale");
  var status = document.getElementById("report-stale-status");
  if (!notice || !status || !window.fetch) { return; }

  var url = notice.getAttribute("data-status-url");
  var reload = notice.getAttribute("data-reload");  /* a first report: nothing shown yet to keep */
  /* A first report: every tenth of a second for 30 asks (a cheap request, about 10 ms of the
   * server's; the first sections of a 100,000-item study take about 1.6 s), then less and less
   * often. benchmarks/report_speed.py counts these waits in its cold figure. */
  var FAST_ASKS = 30;
  var asked = 0;
  var delay = reload ? 100 : 3000;
  var longest = reload ? 5000 : 30000;
  var timer = null;

  function shows(answer) {
    if (reload === "pending") { return answer.current || answer.whole || answer.first_sections; }
    if (reload === "partial") { return answer.current || answer.whole; }
    return answer.current;
  }

  function ready() {
    if (reload) { window.location.reload(); return; }
    var link = document.createElement("a");
    link.href = window.location.href;
    link.id = "report-reload";
    link.className = "button primary";
    link.textContent = "Show the new report";
    status.replaceChildren(document.createTextNode("A newer report is ready. "), link);
    notice.classList.add("report-ready");
  }

  function schedule() {
    window.clearTimeout(timer);
    if (document.visibilityState !== "hidden") { timer = window.setTimeout(ask, delay); }
  }

  function ask() {
    fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (answer) {
        if (answer && shows(answer)) { ready(); return; }
        asked += 1;
        if (!reload || asked >= FAST_ASKS) { delay = Math.min(delay * 1.5, longest); }  /* a long build: ask less and less often */
        schedule();
      })
      .catch(function () { delay = 30000; schedule(); });
  }

  document.addEventListener("visibilitychange", function () { if (!notice.classList.contains("report-ready")) { schedule(); } });
  schedule();
})();
