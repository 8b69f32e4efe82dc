/* Claimlab annotator workbench: keyboard shortcuts, active-time timer, hints.
 *
 * Progressive enhancement only: the page is a plain form that works without
 * this file. The keys come from the page itself (data-keys on each choice,
 * data-judgement on each passage judgement), so the hints shown and the keys
 * handled cannot disagree. No inline script, no eval: CSP script-src 'self'.
 */
(function () {
  "use strict";

  var form = document.getElementById("answer-form");
  if (!form) { return; }
  var config = readConfig();
  var activeField = document.getElementById("wb-active-ms");
  var submitButton = document.getElementById("wb-submit");
  var textBox = document.getElementById("id_justification");
  var help = document.getElementById("wb-help");
  var skipPanel = document.getElementById("wb-skip");
  var flagPanel = document.getElementById("wb-flag");
  var backLink = document.getElementById("wb-back");
  var passages = Array.prototype.slice.call(form.querySelectorAll("[data-passage]"));
  var choiceKeys = {};
  var submitting = false;
  var current = 0;

  function readConfig() {
    var element = document.getElementById("wb-config");
    try { return element ? JSON.parse(element.textContent) : {}; } catch (error) { return {}; }
  }

  /* --- active time: counts only while the page is visible --------------------
   * Kept in localStorage per assignment, so closing the tab or going "back"
   * and returning does not lose the time already spent on the current item.
   * Opening the next item of the study forgets the previous item's entry. */
  var PREFIX = "claimlab:active:" + config.study + ":";
  var storageKey = config.persist ? PREFIX + config.assignment : null;
  var accumulated = (config.base_ms || 0) + loadStored();
  var since = document.visibilityState === "visible" ? performance.now() : null;

  function storage() { try { return window.localStorage; } catch (error) { return null; } }
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
  function resume() { if (since === null) { since = performance.now(); } }

  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "hidden") { pause(); } else { resume(); }
  });
  window.addEventListener("pagehide", pause);
  window.addEventListener("pageshow", function (event) {
    if (event.persisted) { submitting = false; setBusy(false); resume(); }
  });

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

  /* --- evidence passages: a "current" passage that y / n / x / u act on ------- */
  function judged(passage) { return passage.querySelector("input[data-judgement]:checked") !== null; }

  function setCurrent(index, scroll) {
    if (!passages.length) { return; }
    current = Math.max(0, Math.min(passages.length - 1, index));
    passages.forEach(function (passage, i) { passage.classList.toggle("is-current", i === current); });
    if (scroll) { passages[current].scrollIntoView({ block: "nearest" }); }
  }

  var judgedNote = document.getElementById("wb-judged");
  function countJudged() {
    if (!judgedNote) { return; }
    var done = passages.filter(judged).length;
    judgedNote.textContent = done + " of " + passages.length + " passages judged" +
      (done < passages.length ? " (y / n / x on the highlighted one)" : " \u2713");
  }

  function judge(key) {
    var passage = passages[current];
    var input = passage && passage.querySelector('input[data-judgement="' + key + '"]');
    if (!input) { return false; }
    choose(input);
    if (current < passages.length - 1) { setCurrent(current + 1, true); }
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
    if (submitButton) { submitButton.disabled = busy; submitButton.classList.toggle("is-busy", busy); }
  }

  form.addEventListener("submit", function (event) {
    if (submitting || !validate()) { event.preventDefault(); return; }
    submitting = true; // a double click or a repeated Enter sends one request
    activeField.value = String(activeMs());
    save();
    setBusy(true);
  });

  function submitAnswer() {
    if (submitting) { return; }
    if (typeof form.requestSubmit === "function") { form.requestSubmit(); }
    else if (form.dispatchEvent(new Event("submit", { cancelable: true }))) { form.submit(); }
  }

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

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.isComposing) { return; }
    var target = event.target instanceof Element ? event.target : document.body;
    var typing = target.matches(TYPING);
    var key = event.key;

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
    if (key.length !== 1) { return; }
    var lower = key.toLowerCase();
    var handled = true;
    if (choiceKeys[key] || choiceKeys[lower]) {
      choose(choiceKeys[key] || choiceKeys[lower]);
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
      pause();
      window.location.assign(backLink.href);
    } else if (lower === "k" && skipPanel) {
      openPanel(skipPanel, document.getElementById("wb-skip-confirm"));
    } else if (lower === "f" && flagPanel) {
      openPanel(flagPanel, document.getElementById("wb-flag-reason"));
    } else if (key === "?" && help) {
      help.open = !help.open;
    } else {
      handled = false;
    }
    if (handled) { event.preventDefault(); }
  });
}());
