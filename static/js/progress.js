/* Claimlab progress page: the numbers refresh themselves.
 *
 * #progress-live carries data-live-url (an HTML fragment of the same
 * numbers, rendered and escaped by the server) and data-refresh-seconds.
 * Every interval, while the tab is visible, the fragment is fetched and
 * swapped in; a hidden tab asks for nothing and catches up as soon as it is
 * shown again. "Refresh now" asks at once. The page itself shows the
 * annotator table only as last computed (issue 15; read from the counters
 * since issue 35, and still kept); when there is none yet or it is outdated, the page marks it
 * data-quality-pending and the fragment, which computes it, is asked for at
 * once (and every 2 s while another request is computing it). No inline script, no eval (CSP script-src 'self'); without this file
 * the page still works: a reload shows the latest numbers, and the pending
 * table's link (?quality=now) computes it.
 */
(function () {
  "use strict";

  var live = document.getElementById("progress-live");
  var status = document.getElementById("progress-live-status");
  var button = document.getElementById("progress-refresh");
  if (!live || !window.fetch || !window.DOMParser) { return; }

  var url = live.getAttribute("data-live-url");
  var seconds = Math.max(2, parseInt(live.getAttribute("data-refresh-seconds"), 10) || 10);
  var timer = null;
  var busy = false;

  function isHidden() { return document.visibilityState === "hidden"; }

  function say(text) { if (status) { status.textContent = text; } }

  function swap(html) {
    var parsed = new DOMParser().parseFromString(html, "text/html");
    var nodes = Array.prototype.slice.call(parsed.body.childNodes);
    live.replaceChildren.apply(live, nodes);
  }

  // Another request is computing the table (one at a time, issue 15): ask again soon, not in `seconds`.
  var PENDING_SECONDS = 2;

  function nextWait() {
    return live.querySelector("[data-quality-pending]") ? Math.min(PENDING_SECONDS, seconds) : seconds;
  }

  function schedule() {
    window.clearTimeout(timer);
    timer = isHidden() ? null : window.setTimeout(refresh, nextWait() * 1000);
  }

  function refresh() {
    if (busy) { return; }
    busy = true;
    window.fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" }, cache: "no-store" })
      .then(function (response) {
        if (!response.ok) { throw new Error("the server answered " + response.status); }
        return response.text();
      })
      .then(function (html) {
        swap(html);
        say("Refreshed at " + new Date().toLocaleTimeString() + "; next in " + nextWait() + " s while this tab is visible.");
      })
      .catch(function (error) {
        say("Could not refresh (" + error.message + "); trying again in " + seconds + " s.");
      })
      .then(function () {
        busy = false;
        schedule();
      });
  }

  document.addEventListener("visibilitychange", function () {
    if (isHidden()) {
      window.clearTimeout(timer);
      timer = null;
      say("Paused while this tab is hidden.");
    } else {
      refresh();
    }
  });

  if (button) {
    button.hidden = false;
    button.addEventListener("click", refresh);
  }
  if (live.querySelector("[data-quality-pending]") && !isHidden()) {
    refresh();
  } else {
    schedule();
  }
})();
