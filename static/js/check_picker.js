/* The check-item picker (crowd settings, issue 34). Without this file the page is plain forms: a GET
 * search with a pager, checkboxes, and a POST that saves the list. With it:
 *  - the search runs as you type (and the pager and the "Show" choice) without leaving the page: the
 *    same page is fetched with the new query and its results are swapped in; the address follows, so
 *    saving comes back to the same search;
 *  - items ticked on one page of results stay ticked across searches and are sent with the save;
 *  - the count beside the save button (usable items against what a full quota needs) follows every tick,
 *    with the warning when there are too few.
 * No inline script (CSP script-src 'self').
 */
(function () {
  "use strict";

  var form = document.getElementById("picker-form");
  var search = document.getElementById("picker-search-form");
  var results = document.getElementById("picker-results");
  if (!form || !search || !results) { return; }
  var query = document.getElementById("picker-q");
  var gold = document.getElementById("picker-gold");
  var paste = form.querySelector("textarea[name=add_ids]");
  var announce = document.getElementById("picker-announce");
  var needed = parseInt(form.getAttribute("data-needed"), 10) || 0;
  // Ticked in the results, maybe on another page of them now, in the order ticked (the list's order):
  // id -> whether it counts as a usable check.
  var pending = new Map();

  function usableRow(box) { return !box.closest("tr").hasAttribute("data-not-usable"); }

  Array.prototype.forEach.call(results.querySelectorAll("input[name=add]:checked"), function (box) {
    pending.set(box.value, usableRow(box));
  });

  function pastedIds() {
    if (!paste) { return []; }
    return paste.value.split(/[,\r\n]+/).map(function (part) { return part.trim(); })
      .filter(function (part) { return part; });
  }

  function tally() {
    var counted = {};
    var chosen = 0;
    var usable = 0;
    function count(id, isUsable) {
      if (counted[id]) { return; }
      counted[id] = true;
      chosen += 1;
      if (isUsable) { usable += 1; }
    }
    Array.prototype.forEach.call(form.querySelectorAll("input[name=keep]:checked"), function (box) {
      count(box.value, usableRow(box));
    });
    pending.forEach(function (isUsable, id) { count(id, isUsable); });
    pastedIds().forEach(function (id) { count(id, true); });
    var tallyNode = document.getElementById("picker-tally");
    tallyNode.textContent = "";
    var strong = document.createElement("strong");
    strong.id = "picker-usable";
    strong.textContent = String(usable);
    tallyNode.appendChild(strong);
    var rest = " usable" + (usable !== chosen ? " of " + chosen + " chosen" : "") +
      (pending.size ? " (" + pending.size + " ticked to add, saved with the list)" : "") + " · a full quota needs ";
    tallyNode.appendChild(document.createTextNode(rest));
    var need = document.createElement("strong");
    need.id = "picker-needed";
    need.textContent = String(needed);
    tallyNode.appendChild(need);
    var short = usable < needed;
    document.getElementById("picker-short").hidden = !short;
    var line = document.getElementById("picker-need");
    line.classList.toggle("msg", short);
    line.classList.toggle("msg-warning", short);
  }

  form.addEventListener("change", function (event) {
    var box = event.target;
    if (box.name === "add") {
      if (box.checked) {
        pending.set(box.value, usableRow(box));
      } else {
        pending.delete(box.value);
      }
    }
    tally();
  });
  if (paste) { paste.addEventListener("input", tally); }

  form.addEventListener("submit", function () {
    // Every ticked result goes with the save, those no longer on screen (another search or page) too,
    // in the order ticked: the boxes on screen give way to one hidden field per item.
    Array.prototype.forEach.call(results.querySelectorAll("input[name=add]"), function (box) {
      box.removeAttribute("name");
    });
    pending.forEach(function (isUsable, id) {
      var hidden = document.createElement("input");
      hidden.type = "hidden";
      hidden.name = "add";
      hidden.value = id;
      form.appendChild(hidden);
    });
  });

  var latest = 0;
  function load(url) {
    var ticket = ++latest;
    fetch(url, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
      .then(function (response) { return response.ok ? response.text() : Promise.reject(response.status); })
      .then(function (html) {
        if (ticket !== latest) { return; } // a later search answered first
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("picker-results");
        if (!fresh) { return; }
        results.innerHTML = fresh.innerHTML;
        Array.prototype.forEach.call(results.querySelectorAll("input[name=add]"), function (box) {
          box.checked = pending.has(box.value);
        });
        var address = new URL(url, window.location.href);
        window.history.replaceState(null, "", address.pathname + address.search);
        form.setAttribute("action", address.pathname + address.search);
        var counted = document.getElementById("picker-count");
        if (announce && counted) { announce.textContent = counted.textContent; }
        tally();
      })
      .catch(function () { search.submit(); }); // the plain search, as without JavaScript
  }

  function searchUrl() {
    var params = new URLSearchParams();
    params.set("q", query.value.trim());
    params.set("gold", gold.value);
    return window.location.pathname + "?" + params.toString();
  }

  var timer = null;
  query.addEventListener("input", function () {
    window.clearTimeout(timer);
    timer = window.setTimeout(function () { load(searchUrl()); }, 300);
  });
  gold.addEventListener("change", function () { load(searchUrl()); });
  search.addEventListener("submit", function (event) {
    event.preventDefault();
    window.clearTimeout(timer);
    load(searchUrl());
  });
  results.addEventListener("click", function (event) {
    var link = event.target.closest("#picker-pager a");
    if (!link) { return; }
    event.preventDefault();
    load(link.getAttribute("href"));
  });
}());
