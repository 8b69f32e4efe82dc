/* Claimlab report page: while it shows an older report, ask whether the new one is ready.
 *
 * #report-stale carries data-status-url (JSON: {"current": bool, "computed_at": ...}).
 * Every few seconds, while the tab is visible, the server is asked; once the report of
 * the data as it is now is ready, the notice says so with a link that shows it (the page
 * does not reload by itself: the researcher may be reading). On the page of a study's first
 * report (data-reload: nothing is shown yet) it reloads to show it. No inline script, no eval
 * (CSP script-src 'self'); without this file the notice's reload link does the same.
 */
(function () {
  "use strict";

  var notice = document.getElementById("report-stale");
  var status = document.getElementById("report-stale-status");
  if (!notice || !status || !window.fetch) { return; }

  var url = notice.getAttribute("data-status-url");
  var delay = 3000;
  var timer = null;

  function ready() {
    if (notice.hasAttribute("data-reload")) { window.location.reload(); return; }  /* nothing shown yet to keep */
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
        if (answer && answer.current) { ready(); return; }
        delay = Math.min(delay * 1.5, 30000);  /* a long build: ask less and less often */
        schedule();
      })
      .catch(function () { delay = 30000; schedule(); });
  }

  document.addEventListener("visibilitychange", function () { if (!notice.classList.contains("report-ready")) { schedule(); } });
  schedule();
})();
