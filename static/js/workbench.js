/* Claimlab annotator workbench: keyboard shortcuts, active-time timer, hints,
 * and the next item kept ready (issue 15).
 *
 * Progressive enhancement only: the page is a plain form that works without
 * this file. The keys come from the page itself (data-keys on each choice,
 * data-judgement on each passage judgement), so the hints shown and the keys
 * handled cannot disagree. No inline script, no eval: CSP script-src 'self'.
 *
 * The next item: when the page's config has `prefetch`, the item after the one
 * on screen is claimed on the server (so exact N, leases, order and sides are
 * the service's, unchanged) and parsed here, off-screen. Submitting shows it at
 * once and sends the answer in the background (an outbox kept in the page and
 * in localStorage until the server confirms it, retried through brief network
 * losses); the server's reply carries the item after that. An item fetched
 * ahead and never shown is given back when the annotator leaves the page.
 *
 * The same machinery serves a crowd participant's item page (participant/_item.html):
 * its config points at the participant's routes, and its server may say `go` (a
 * check, the end of the session): the page goes there once its answers are sent.
 *
 * For screen readers and other assistive technology (issue 34): what happened (an answer sent,
 * an item skipped or flagged) and the item now shown are said through a polite live region
 * (#wb-announce); the single-key shortcuts can be turned off in the shortcuts help (WCAG 2.1.4),
 * remembered in this browser (localStorage), while Enter, Esc and Ctrl+Enter keep working.
 */
(function () {
  "use strict";

  var STUDY_PREFIX = "claimlab:";

  function storage() { try { return window.localStorage; } catch (error) { return null; } }
  function readJson(element) {
    try { return element ? JSON.parse(element.textContent) : {}; } catch (error) { return {}; }
  }

  /* === single-key shortcuts on or off, for this browser ========================= */
  var SHORTCUTS_KEY = STUDY_PREFIX + "shortcuts";
  function shortcutsOn() { var store = storage(); return !(store && store.getItem(SHORTCUTS_KEY) === "off"); }
  function showShortcuts(on) {
    document.documentElement.classList.toggle("wb-keys-off", !on);
    document.querySelectorAll("[data-shortcuts-toggle]").forEach(function (box) { box.checked = on; });
  }
  function setShortcuts(on) {
    var store = storage();
    if (store) {
      try { if (on) { store.removeItem(SHORTCUTS_KEY); } else { store.setItem(SHORTCUTS_KEY, "off"); } } catch (error) { /* blocked */ }
    }
    showShortcuts(on);
  }
  showShortcuts(shortcutsOn());
  window.addEventListener("storage", function (event) { if (event.key === SHORTCUTS_KEY) { showShortcuts(shortcutsOn()); } });

  /* === said to screen readers: a polite live region, empty when the page loads ==== */
  var announcer = document.getElementById("wb-announce");
  var announceTimer = null;
  function announce(text) {
    if (!announcer || !text) { return; }
    announcer.textContent = "";
    window.clearTimeout(announceTimer);
    // Emptied first and filled a moment later, so the same words twice are said twice.
    announceTimer = window.setTimeout(function () { announcer.textContent = text; }, 120);
  }
  /* === the answer bar pinned to the bottom of a narrow screen (workbench.css): the page keeps
   * room for it below the last passage, and a control reached by Tab is scrolled clear of it. */
  var shownBar = null;
  var barObserver = window.ResizeObserver ? new window.ResizeObserver(fitBar) : null;
  function fitBar() {
    var style = document.documentElement.style;
    if (shownBar && shownBar.isConnected && window.getComputedStyle(shownBar).position === "fixed") {
      style.setProperty("--wb-bar-height", shownBar.offsetHeight + "px");
    } else {
      style.removeProperty("--wb-bar-height");
    }
  }
  function watchBar(bar) {
    if (barObserver && shownBar) { barObserver.unobserve(shownBar); }
    shownBar = bar;
    if (barObserver && bar) { barObserver.observe(bar); }
    fitBar();
  }
  window.addEventListener("resize", fitBar);

  function itemShown(root) {
    var count = (root || document).querySelector(".wb-count");
    var claim = (root || document).querySelector("#wb-claim");
    var words = "Next item shown" + (count ? ": " + count.textContent.trim() : "") + ".";
    return claim ? words + " Claim: " + claim.textContent.trim() : words;
  }

  /* === one item on screen: its form, timer, keys ============================== */
  function mount(root, hooks) {
    var form = root.querySelector("#answer-form") || document.getElementById("answer-form");
    if (!form) { return null; }
    var config = readJson(root.querySelector('script[type="application/json"]') || document.getElementById("wb-config"));
    var activeField = form.querySelector("#wb-active-ms");
    var textBox = root.querySelector("#id_justification");
    var help = root.querySelector("#wb-help");
    var skipPanel = root.querySelector("#wb-skip");
    var flagPanel = root.querySelector("#wb-flag");
    var backLink = root.querySelector("#wb-back");
    var labelField = root.querySelector("#wb-label");
    var answerBar = root.querySelector("#wb-answer-bar");
    var submitButtons = Array.prototype.slice.call(root.querySelectorAll("#wb-submit, #wb-bar-submit"));
    var passages = Array.prototype.slice.call(form.querySelectorAll("[data-passage]"));
    var choiceKeys = {};
    var submitting = false;
    var current = 0;

    /* --- active time: counts only while the item is on screen and the page visible.
     * Kept in localStorage per assignment, so closing the tab or going "back"
     * and returning does not lose the time already spent on the current item.
     * Opening the next item of the study forgets the previous item's entry. */
    var PREFIX = STUDY_PREFIX + "active:" + config.study + ":";
    var storageKey = config.persist ? PREFIX + config.assignment : null;
    var accumulated = (config.base_ms || 0) + loadStored();
    var since = document.visibilityState === "visible" ? performance.now() : null;

    function loadStored() {
      var store = storage();
      if (!store || !storageKey) { return 0; }
      var stale = [];
      for (var i = 0; i < store.length; i += 1) {
        var key = store.key(i);
        if (key && key.indexOf(PREFIX) === 0 && key !== storageKey) { stale.push(key); }
      }
      stale.forEach(function (key) { store.removeItem(key); });
      var value = parseInt(store.getItem(storageKey) || "0", 10);
      return isFinite(value) && value > 0 ? value : 0;
    }
    function activeMs() {
      return Math.round(accumulated + (since === null ? 0 : performance.now() - since));
    }
    function save() {
      var store = storage();
      if (store && storageKey) { try { store.setItem(storageKey, String(activeMs())); } catch (error) { /* full or blocked */ } }
    }
    function pause() {
      if (since !== null) { accumulated += performance.now() - since; since = null; }
      save();
    }
    function resume() { if (since === null && document.visibilityState === "visible") { since = performance.now(); } }

    /* --- instructions: open on the first item; once an answer is given they stay
     * closed on later items unless asked for with "?". */
    var seenKey = STUDY_PREFIX + "instructions-seen:" + config.study;
    function instructionsSeen() { var store = storage(); return !!(store && store.getItem(seenKey)); }
    function markInstructionsSeen() {
      var store = storage();
      if (store) { try { store.setItem(seenKey, "1"); } catch (error) { /* blocked */ } }
    }
    if (help && help.open && config.persist && instructionsSeen()) { help.open = false; }
    if (help && config.persist) {
      help.addEventListener("toggle", function () { if (!help.open) { markInstructionsSeen(); } });
    }

    /* --- the shortcuts switch in the help (hidden without this script: no shortcuts then) */
    root.querySelectorAll("[data-shortcuts-switch]").forEach(function (line) { line.hidden = false; });
    root.querySelectorAll("[data-shortcuts-toggle]").forEach(function (box) {
      box.checked = shortcutsOn();
      box.addEventListener("change", function () {
        setShortcuts(box.checked);
        announce(box.checked ? "Single-key shortcuts on." : "Single-key shortcuts off.");
      });
    });

    watchBar(answerBar);

    /* --- choices ----------------------------------------------------------------- */
    form.querySelectorAll("input[data-keys]").forEach(function (input) {
      input.getAttribute("data-keys").split(" ").forEach(function (key) {
        if (key) { choiceKeys[key] = input; }
      });
    });

    function choose(input) {
      input.checked = true;
      input.dispatchEvent(new Event("change", { bubbles: true }));
    }

    /* --- extra questions: q moves to the next one (unanswered first); while one has the
     * focus, its numbers (data-qkey) choose and the label keys rest (they cannot collide). */
    var questions = Array.prototype.slice.call(form.querySelectorAll("[data-question]"));
    var nextQuestionKey = "q"; // annotation/questions/forms.NEXT_QUESTION_KEY, shown in the page's hints
    function questionAnswered(group) {
      if (group.querySelector("input:checked")) { return true; }
      return Array.prototype.some.call(group.querySelectorAll("input[type=number], input[type=text]"),
        function (input) { return input.value.trim() !== ""; });
    }
    function focusQuestion(group) {
      questions.forEach(function (other) { other.classList.toggle("is-current", other === group); });
      var first = group.querySelector("input:checked") || group.querySelector("input");
      if (first) { first.focus(); }
      group.scrollIntoView({ block: "nearest" });
    }
    function nextQuestion(from) {
      if (!questions.length) { return false; }
      var start = from ? questions.indexOf(from) + 1 : 0;
      var order = questions.slice(start).concat(questions.slice(0, start));
      var open = order.filter(function (group) { return !questionAnswered(group); });
      focusQuestion(open.length ? open[0] : order[0]);
      return true;
    }
    function answerQuestion(group, key) {
      var input = group.querySelector('input[data-qkey="' + key + '"]');
      if (!input) { return false; }
      if (input.type === "checkbox") {
        input.checked = !input.checked;
        input.dispatchEvent(new Event("change", { bubbles: true }));
      } else {
        choose(input);
      }
      input.focus();
      return true;
    }

    /* --- evidence passages: a "current" passage that y / n / x / u act on ------- */
    function judged(passage) { return passage.querySelector("input[data-judgement]:checked") !== null; }

    function setCurrent(index, scroll) {
      if (!passages.length) { return; }
      current = Math.max(0, Math.min(passages.length - 1, index));
      passages.forEach(function (passage, i) { passage.classList.toggle("is-current", i === current); });
      if (scroll) { passages[current].scrollIntoView({ block: "nearest" }); }
    }

    var judgedNote = root.querySelector("#wb-judged");
    function countJudged() {
      if (!judgedNote) { return; }
      var done = passages.filter(judged).length;
      judgedNote.textContent = done + " of " + passages.length + " passages judged" +
        (done < passages.length ? (shortcutsOn() ? " (y / n / x on the highlighted one)" : "") : " \u2713");
    }

    function judge(key) {
      var passage = passages[current];
      var input = passage && passage.querySelector('input[data-judgement="' + key + '"]');
      if (!input) { return false; }
      choose(input);
      var open = passages.findIndex(function (other) { return !judged(other); });
      if (current < passages.length - 1 && !(open === -1 && labelField)) {
        setCurrent(current + 1, true);
      } else if (labelField && open === -1) {
        // every passage judged: on to the label
        labelField.classList.add("is-next");
        labelField.scrollIntoView({ block: "nearest" });
      } else if (open !== -1) {
        setCurrent(open, true);
      }
      return true;
    }

    function toggleUseful() {
      var box = passages[current] && passages[current].querySelector("input[data-useful]");
      if (!box) { return false; }
      box.checked = !box.checked;
      box.dispatchEvent(new Event("change", { bubbles: true }));
      return true;
    }

    passages.forEach(function (passage, index) {
      passage.addEventListener("focusin", function () { setCurrent(index, false); });
      passage.addEventListener("click", function () { setCurrent(index, false); });
    });
    if (passages.length && passages[0].querySelector("input[data-judgement]")) {
      var firstOpen = passages.findIndex(function (passage) { return !judged(passage); });
      setCurrent(firstOpen === -1 ? 0 : firstOpen, false);
    }

    /* --- required-field hints ---------------------------------------------------- */
    form.noValidate = true; // our hints replace the browser's bubbles; the server checks again

    function hintFor(name) { return form.querySelector('[data-hint-for="' + name + '"]'); }
    function markMissing(name, missing) {
      var hint = hintFor(name);
      if (hint) {
        hint.hidden = !missing;
        var field = hint.closest(".wb-field");
        if (field) { field.classList.toggle("is-missing", missing); }
        var passage = hint.closest("[data-passage]");
        if (passage) { passage.classList.toggle("is-missing", missing); }
      }
    }

    function missingFields() {
      var missing = [];
      var seen = {};
      form.querySelectorAll("input[type=radio][required]").forEach(function (input) {
        if (seen[input.name]) { return; }
        seen[input.name] = true;
        if (!form.querySelector('input[name="' + input.name + '"]:checked')) { missing.push(input); }
      });
      form.querySelectorAll("[data-required-text]").forEach(function (input) {
        if (!input.value.trim()) { missing.push(input); }
      });
      if (textBox && textBox.required && !textBox.value.trim()) { missing.push(textBox); }
      return missing;
    }

    function validate() {
      var missing = missingFields();
      var names = {};
      missing.forEach(function (element) { names[element.name] = true; });
      form.querySelectorAll("[data-hint-for]").forEach(function (hint) {
        markMissing(hint.getAttribute("data-hint-for"), !!names[hint.getAttribute("data-hint-for")]);
      });
      if (!missing.length) { return true; }
      var first = missing[0];
      var passage = first.closest("[data-passage]");
      if (passage) { setCurrent(passages.indexOf(passage), true); }
      else if (first === textBox) { textBox.focus(); }
      else { (first.closest(".wb-field") || first).scrollIntoView({ block: "nearest" }); }
      return false;
    }

    form.addEventListener("change", function (event) {
      if (event.target.name) { markMissing(event.target.name, false); }
      countJudged();
    });
    countJudged();
    if (textBox) {
      textBox.addEventListener("input", function () { if (textBox.value.trim()) { markMissing("justification", false); } });
    }

    /* --- submitting -------------------------------------------------------------- */
    function setBusy(busy) {
      submitButtons.forEach(function (button) { button.disabled = busy; button.classList.toggle("is-busy", busy); });
    }

    form.addEventListener("submit", function (event) {
      if (submitting || !validate()) { event.preventDefault(); return; }
      submitting = true; // a double click or a repeated Enter sends one request
      activeField.value = String(activeMs());
      pause();
      if (config.persist) { markInstructionsSeen(); }
      if (hooks.answered && hooks.answered(bench)) { event.preventDefault(); return; }
      hooks.leaving();
      setBusy(true);
    });

    function submitAnswer() {
      if (submitting) { return; }
      if (typeof form.requestSubmit === "function") { form.requestSubmit(); }
      else if (form.dispatchEvent(new Event("submit", { cancelable: true }))) { form.submit(); }
    }

    /* Leaving through the workbench's own links and forms (skip, flag, back, return)
     * keeps the item fetched ahead: the next page shows it. */
    root.querySelectorAll("#wb-skip form, #wb-flag form").forEach(function (other) {
      other.addEventListener("submit", function () { hooks.leaving(); });
    });
    root.querySelectorAll("#wb-back, #wb-return").forEach(function (link) {
      link.addEventListener("click", function (event) {
        event.preventDefault();
        hooks.navigate(link.href);
      });
    });

    /* --- panels: instructions (?), skip (k), flag (f) ---------------------------- */
    var panels = [help, skipPanel, flagPanel].filter(Boolean);
    function openPanel(panel, focus) {
      panels.forEach(function (other) { if (other !== panel && other !== help) { other.open = false; } });
      panel.open = true;
      if (focus) { focus.focus(); }
    }
    function closePanels() {
      var closed = false;
      panels.forEach(function (panel) { if (panel.open) { panel.open = false; closed = true; } });
      return closed;
    }

    /* --- the keyboard ------------------------------------------------------------ */
    var TYPING = "textarea, select, [contenteditable], input:not([type]), " +
      "input[type=text], input[type=search], input[type=email], input[type=url], input[type=number], input[type=password]";
    var NATIVE_ENTER = "a[href], button, summary, select";

    function onKey(event) {
      if (event.defaultPrevented || event.isComposing || submitting) { return; }
      var target = event.target instanceof Element ? event.target : document.body;
      var typing = target.matches(TYPING);
      var key = event.key;
      var question = target.closest("[data-question]");

      if (key === "Escape" && question && !typing) {
        target.blur();
        question.classList.remove("is-current");
        event.preventDefault();
        return;
      }
      if (key === "Escape") {
        if (typing) { target.blur(); }
        if (closePanels() || typing) { event.preventDefault(); }
        return;
      }
      if (key === "Enter" && (event.ctrlKey || event.metaKey)) {
        if (typing && !form.contains(target)) { return; } // e.g. the flag reason: its own form
        event.preventDefault();
        submitAnswer();
        return;
      }
      if (typing || event.ctrlKey || event.metaKey || event.altKey) { return; }
      if (key === "Enter") {
        if (target.matches(NATIVE_ENTER) || !form.contains(target) && target !== document.body) { return; }
        event.preventDefault();
        submitAnswer();
        return;
      }
      if (key.length !== 1 || !shortcutsOn()) { return; } // letters, digits and signs: only while shortcuts are on
      var lower = key.toLowerCase();
      if (lower === nextQuestionKey && nextQuestion(question)) { event.preventDefault(); return; }
      if (question && /^[1-9]$/.test(key)) {
        answerQuestion(question, key);
        event.preventDefault();
        return;
      }
      var handled = true;
      var choice = choiceKeys[key] || choiceKeys[lower];
      if (choice) {
        choose(choice);
        // One keystroke per label when the study asks for nothing else (and nothing else is missing).
        if (config.submit_on_label && !missingFields().length) { submitAnswer(); }
      } else if (lower === "y" || lower === "n" || lower === "x") {
        handled = judge(lower);
      } else if (lower === "u") {
        handled = toggleUseful();
      } else if (key === "]") {
        setCurrent(current + 1, true);
      } else if (key === "[") {
        setCurrent(current - 1, true);
      } else if (lower === "j" && textBox) {
        textBox.focus();
      } else if (lower === "b" && backLink) {
        hooks.navigate(backLink.href);
      } else if (lower === "k" && skipPanel) {
        openPanel(skipPanel, root.querySelector("#wb-skip-confirm"));
      } else if (lower === "f" && flagPanel) {
        openPanel(flagPanel, root.querySelector("#wb-flag-reason"));
      } else if (key === "?" && help) {
        help.open = !help.open;
      } else {
        handled = false;
      }
      if (handled) { event.preventDefault(); }
    }

    var bench = {
      root: root,
      form: form,
      config: config,
      id: config.assignment,
      onKey: onKey,
      pause: pause,
      resume: resume,
      forget: function () { var store = storage(); if (store && storageKey) { store.removeItem(storageKey); } },
      unlock: function () { submitting = false; setBusy(false); },
    };
    return bench;
  }

  /* === the page ================================================================= */
  var stage = document.getElementById("wb-stage");
  var firstRoot = stage ? stage.querySelector(".wb") : document.querySelector(".wb") || document.body;
  var leavingInside = false;
  var hooks = {
    answered: null,
    leaving: function () { leavingInside = true; },
    navigate: function (href) { leavingInside = true; bench.pause(); window.location.assign(href); },
  };
  var bench = mount(firstRoot, hooks);
  if (!bench) { return; }
  // A page loaded after an answer, a skip or a flag (no item fetched ahead, or no script before): what the
  // server said ("Saved.", "Skipped. ...") and the item now shown.
  var said = document.querySelector(".messages");
  if (stage && said && said.textContent.trim()) {
    announce(said.textContent.trim().replace(/\s+/g, " ") + " " + itemShown(stage));
  }

  document.addEventListener("keydown", function (event) { bench.onKey(event); });
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "hidden") { bench.pause(); } else { bench.resume(); }
  });
  window.addEventListener("pagehide", function () { bench.pause(); });
  window.addEventListener("pageshow", function (event) {
    if (event.persisted) { leavingInside = false; bench.unlock(); bench.resume(); }
  });

  var prefetch = bench.config.prefetch;
  if (!stage || !prefetch || !window.fetch || !window.URLSearchParams) { return; }

  /* === the next item, ready before it is needed ================================= */
  var outboxNote = document.getElementById("wb-outbox");
  var OUTBOX_KEY = STUDY_PREFIX + "outbox:" + bench.config.study;
  var csrfToken = (bench.form.querySelector("[name=csrfmiddlewaretoken]") || {}).value || "";
  var annotateUrl = prefetch.annotate_url;
  var ahead = null;          // {id, root, config}: parsed, not shown, its lease held
  var aheadAsked = false;    // an ahead request is on its way
  var nothingLeft = false;   // the server said there is no item after the one on screen
  var waiting = false;       // an answer was given and no next item was ready: show it on arrival
  var sending = false;
  var retryDelay = 0;
  var failures = [];
  var outbox = loadOutbox();
  var done = prefetch.progress || null; // the server's count of answers (confirmed ones), from its last word

  function loadOutbox() {
    var store = storage();
    try { return store ? JSON.parse(store.getItem(OUTBOX_KEY) || "[]") : []; } catch (error) { return []; }
  }
  function saveOutbox() {
    var store = storage();
    if (!store) { return; }
    try {
      if (outbox.length) { store.setItem(OUTBOX_KEY, JSON.stringify(outbox)); } else { store.removeItem(OUTBOX_KEY); }
    } catch (error) { /* full or blocked: the page still holds them */ }
    document.documentElement.setAttribute("data-outbox", String(outbox.length));
    showOutbox();
  }

  function showOutbox() {
    var lines = failures.slice();
    if (outbox.length && retryDelay) {
      lines.push(outbox.length + " answer" + (outbox.length === 1 ? " is" : "s are") +
        " kept in this page and not yet saved: the server cannot be reached. They are sent when it can; keep this tab open.");
    }
    outboxNote.hidden = !lines.length;
    outboxNote.classList.toggle("is-error", failures.length > 0);
    outboxNote.textContent = lines.join(" ");
  }

  function parseItem(html) {
    var holder = document.createElement("template");
    holder.innerHTML = html;
    var root = holder.content.querySelector(".wb");
    if (!root) { return null; }
    return { id: parseInt(root.getAttribute("data-assignment"), 10), root: root,
      config: readJson(root.querySelector('script[type="application/json"]')) };
  }

  function setProgress(progress) {
    if (progress) { done = progress; }
    if (!done) { return; }
    var shownDone = done.done + outbox.length;
    var count = stage.querySelector(".wb-count");
    var bar = stage.querySelector("#wb-progress");
    if (count) { count.innerHTML = "<strong>" + shownDone + "</strong> of " + done.total + " done"; }
    if (bar) { bar.max = Math.max(done.total, 1); bar.value = shownDone; }
  }

  function show(item) {
    stage.replaceChildren(item.root);
    bench = mount(item.root, hooks);
    hooks.answered = answered;
    prefetch = bench.config.prefetch || prefetch;
    waiting = false;
    setProgress(null);
    announce("Answer sent. " + itemShown(stage));
    window.scrollTo(0, 0);
    var focused = document.activeElement;
    if (focused && focused !== document.body && !stage.contains(focused)) { focused.blur(); }
  }

  function showWaiting() {
    stage.querySelector(".wb").classList.add("is-waiting");
    outboxNote.hidden = false;
    outboxNote.textContent = "Loading the next item\u2026";
  }

  function request(url, body) {
    return fetch(url, {
      method: "POST",
      body: body,
      credentials: "same-origin",
      redirect: "manual",
      headers: { "X-CSRFToken": csrfToken, "X-Claimlab-Workbench": "1", "Accept": "application/json" },
    });
  }

  var signedOut = false;    // the server no longer knows who this is: answers wait in the outbox
  function loggedOut(reason) {
    signedOut = true;
    failures = [(reason || "You are no longer logged in.") +
      " Your answers are kept in this browser: " +
      (reason ? "they are sent when you are back." : "log in again and open this study to send them.")];
    showOutbox();
  }

  /* The server says the page's flow goes on elsewhere (a crowd participant's check, or the end of
   * their session): nothing fetched ahead is shown; the page goes there once its answers are sent. */
  var leaving = false;
  function leaveFor(url) {
    ahead = null;
    nothingLeft = true;
    markAhead();
    if (!leaving) { leaving = true; hooks.navigate(url); }
  }

  /* Ask for the item after the one on screen (its lease is renewed with it). */
  function askAhead() {
    if (ahead || aheadAsked || nothingLeft || outbox.length) { return; }
    aheadAsked = true;
    var asking = bench.id;
    // The item on screen is no longer theirs (409), or it was answered meanwhile ("answered": the answer
    // reached the server first, and its own reply brings the next item). Either way, a page still showing
    // it with no answer given here goes back to the annotate page, which says what is current.
    function notOnScreenAnyMore() {
      if (asking === bench.id && !waiting) { hooks.navigate(annotateUrl); }
      return null;
    }
    request(prefetch.ahead_url, new URLSearchParams()).then(function (response) {
      if (response.type === "opaqueredirect") { loggedOut(); return null; }
      if (response.status === 409) { return notOnScreenAnyMore(); }
      if (response.status === 403 || response.status === 404) { nothingLeft = true; return null; }
      if (!response.ok) { throw new Error("HTTP " + response.status); }
      return response.json().then(function (body) { return body.answered ? notOnScreenAnyMore() : body; });
    }).then(function (body) {
      aheadAsked = false;
      if (body && body.go) { leaveFor(body.go); return; }
      if (asking === bench.id) {
        if (body) { takeAhead(body.ahead); }
      } else if (!waiting && !leaving) {
        askAhead(); // for the item swapped in while this request was on its way
      }
    }).catch(function () {
      aheadAsked = false;
      window.setTimeout(askAhead, 2000);
    });
  }

  function takeAhead(item) {
    if (item === undefined) { return; }
    if (item === null) {
      nothingLeft = true;
    } else if (item.id !== bench.id && !(ahead && ahead.id === item.id)) {
      ahead = parseItem(item.html);
    }
    if (waiting) { showNext(); }
    markAhead();
  }

  /* On the root element, for tests and benchmarks: "ready" once the next item is here. */
  function markAhead() {
    document.documentElement.setAttribute("data-ahead", ahead ? "ready" : nothingLeft ? "none" : "pending");
  }

  function showNext() {
    if (ahead && ahead.id !== bench.id) {
      var next = ahead;
      ahead = null;
      show(next);
      markAhead();
      return;
    }
    if (nothingLeft && !outbox.length) {
      leaveFor(annotateUrl); // the finish page (or whatever is current now: a participant's next step)
    }
  }

  /* A crowd participant's time budget (progress.budget_ms): the answer that reaches it ends their
   * session, so the item fetched ahead is not shown; the server gives its lease back. */
  function reachesBudget() {
    if (!done || !done.budget_ms) { return false; }
    var spent = done.active_ms || 0;
    outbox.forEach(function (entry) { spent += parseInt(new URLSearchParams(entry.body).get("active_ms"), 10) || 0; });
    return spent >= done.budget_ms;
  }

  /* The form was submitted and is valid: keep the answer, show the next item. */
  function answered(answeredBench) {
    failures = [];
    var data = new URLSearchParams(new FormData(answeredBench.form));
    // The attribute, not form.action: a participant's form has a field named "action".
    var url = answeredBench.form.getAttribute("action") || window.location.pathname;
    outbox.push({ id: answeredBench.id, url: url, body: data.toString() });
    // Said at once (tests and benchmarks wait on it); storing it waits until the next item is on screen.
    document.documentElement.setAttribute("data-outbox", String(outbox.length));
    if (reachesBudget()) { ahead = null; nothingLeft = true; markAhead(); }
    waiting = true;
    if (ahead) { showNext(); } else { showWaiting(); }
    // The next item first; storing and sending the answer wait until it is on screen.
    afterPaint(function () {
      saveOutbox();
      answeredBench.forget();
      send();
    });
    return true;
  }

  function afterPaint(callback) {
    if (window.requestAnimationFrame) {
      window.requestAnimationFrame(function () { window.setTimeout(callback, 0); });
    } else {
      window.setTimeout(callback, 0);
    }
  }
  hooks.answered = answered;

  function send() {
    if (sending || !outbox.length) { return; }
    sending = true;
    var entry = outbox[0];
    var body = new URLSearchParams(entry.body);
    // The item on screen (fetched ahead) comes back renewed, with the one after it.
    if (!waiting && bench.id !== entry.id) { body.set("holding", String(bench.id)); }
    request(entry.url, body).then(function (response) {
      if (response.type === "opaqueredirect") { loggedOut(); return { stop: true }; }
      if (response.status === 401) {  // a crowd participant's session is gone: kept until they are back
        return response.json().then(function (reply) { loggedOut(reply.error); return { stop: true }; });
      }
      if (response.status >= 500 || response.status === 429) { throw new Error("HTTP " + response.status); }
      return response.json().then(function (reply) { return { status: response.status, reply: reply }; });
    }).then(function (result) {
      sending = false;
      if (result.stop) { return; }
      retryDelay = 0;
      outbox.shift();
      if (result.reply.saved) {
        if (result.reply.holding_lost) {
          failures = ["The item that was on your screen had been given to someone else (your time on it ran out); here is your next one."];
          if (result.reply.ahead) { ahead = parseItem(result.reply.ahead.html); waiting = true; }
        } else if (signedOut) {
          signedOut = false;
          failures = [];
        }
        saveOutbox();
        setProgress(result.reply.progress);
        takeAhead(result.reply.ahead);
      } else {
        failures = ["Your answer to an earlier item was not saved: " + (result.reply.error || "refused") + "."];
        saveOutbox();
        if (waiting) { showNext(); }
      }
      if (result.reply.go) { leaveFor(result.reply.go); }
      if (outbox.length) { send(); } else if (waiting && !leaving) { showNext(); } else if (!leaving) { askAhead(); }
    }).catch(function () {
      // Offline or the server failed: keep the answer, try again a little later.
      sending = false;
      retryDelay = Math.min(retryDelay ? retryDelay * 2 : 1000, 15000);
      showOutbox();
      window.setTimeout(send, retryDelay);
    });
  }
  window.addEventListener("online", function () { if (retryDelay) { retryDelay = 500; send(); } });
  window.addEventListener("pageshow", function (event) { if (event.persisted) { leaving = false; } });

  /* Leaving the workbench with answers unsent: the browser asks first (they stay in
   * localStorage and go out on the next visit anyway). */
  window.addEventListener("beforeunload", function (event) {
    if (outbox.length) { event.preventDefault(); event.returnValue = ""; }
  });
  /* An item fetched ahead and never shown goes back when the annotator leaves for elsewhere. */
  window.addEventListener("pagehide", function (event) {
    if (!ahead || leavingInside || event.persisted || !navigator.sendBeacon) { return; }
    var release = ahead.config.prefetch;
    var form = new FormData();
    form.append("csrfmiddlewaretoken", csrfToken);
    form.append("updated_at", release.updated_at);
    if (navigator.sendBeacon(release.release_url, form)) { ahead = null; }
  });
  hooks.navigate = function (href) {
    leavingInside = true;
    bench.pause();
    if (!outbox.length) { window.location.assign(href); return; }
    // "back" revises the answer just given: it must be on the server first.
    outboxNote.hidden = false;
    outboxNote.textContent = "Saving your answer\u2026";
    var wait = window.setInterval(function () {
      if (!outbox.length) { window.clearInterval(wait); window.location.assign(href); }
    }, 50);
  };

  document.documentElement.setAttribute("data-outbox", String(outbox.length));
  if (outbox.length) {
    // Answers kept from an earlier visit: send them first. If the item on screen is one of
    // them, it is already answered: wait for the server's next item instead.
    if (outbox.some(function (entry) { return entry.id === bench.id; })) { waiting = true; showWaiting(); }
    send();
  } else {
    askAhead();
  }
}());
