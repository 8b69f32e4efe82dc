/* Claimlab verifiers page: live progress of the runs in progress.
 *
 * Each run row carries data-run-status-url (its status JSON) and
 * data-run-active; cells to update carry data-field="<key of the JSON>".
 * Active rows are polled every few seconds until their run ends. Values are
 * set with textContent only (run data is untrusted). No inline script, no
 * eval: CSP script-src 'self'. Without this file the page still works; a
 * reload shows the latest numbers.
 */
(function () {
  "use strict";

  var INTERVAL_MS = 2000;
  var rows = Array.prototype.slice.call(document.querySelectorAll("tr[data-run-status-url]"));
  var active = rows.filter(function (row) { return row.getAttribute("data-run-active") === "1"; });
  if (!active.length || !window.fetch) { return; }

  var LABELS = {
    queued: "Queued", running: "Running", stopping: "Stopping", stopped: "Stopped",
    succeeded: "Succeeded", failed: "Failed"
  };

  function field(row, name) { return row.querySelector('[data-field="' + name + '"]'); }

  function setText(row, name, value) {
    var element = field(row, name);
    if (element) { element.textContent = value === null || value === undefined ? "\u2014" : String(value); }
  }

  function update(row, run) {
    var progress = field(row, "progress");
    if (progress) {
      progress.max = Math.max(run.total, 1);
      progress.value = run.done;
    }
    ["done", "total", "cached", "errors", "unparseable", "tokens_in", "tokens_out", "estimated_cost"].forEach(
      function (name) { setText(row, name, run[name]); }
    );
    var badge = field(row, "status");
    if (badge) {
      badge.textContent = LABELS[run.status] || run.status;
      badge.className = "badge badge-" + run.status;
    }
    var errorRow = row.nextElementSibling;
    if (errorRow && errorRow.hasAttribute("data-error-for")) {
      setText(errorRow, "error_message", run.error_message);
      errorRow.hidden = !run.error_message;
    }
    if (!run.active) {
      row.setAttribute("data-run-active", "0");
      var stop = field(row, "stop");
      if (stop) { stop.remove(); }
    }
  }

  function poll(row) {
    window.fetch(row.getAttribute("data-run-status-url"), {
      credentials: "same-origin", headers: { "Accept": "application/json" }
    }).then(function (response) {
      if (!response.ok) { throw new Error("HTTP " + response.status); }
      return response.json();
    }).then(function (run) {
      update(row, run);
      if (run.active) { window.setTimeout(function () { poll(row); }, INTERVAL_MS); }
    }).catch(function () {
      window.setTimeout(function () { poll(row); }, INTERVAL_MS * 3);
    });
  }

  active.forEach(function (row) { window.setTimeout(function () { poll(row); }, INTERVAL_MS); });
})();
