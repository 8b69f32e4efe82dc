// Study form: live preview of the instructions (rendered by the server's one sanitised
// renderer, so the preview is what annotators see) and kind-specific fields shown for the
// chosen kind. Without JavaScript the "Preview" button does the same by a round trip.
(function () {
  "use strict";
  var form = document.getElementById("study-form");
  if (!form) return;
  var source = form.querySelector("[data-markdown-source]");
  var target = document.getElementById("instructions-preview");
  var url = form.getAttribute("data-preview-url");
  var token = form.querySelector("input[name=csrfmiddlewaretoken]");
  var timer = null;
  var sent = 0;

  function render() {
    var mine = ++sent;
    var body = new URLSearchParams();
    body.set("text", source.value);
    fetch(url, {
      method: "POST",
      body: body,
      credentials: "same-origin",
      headers: { "X-CSRFToken": token ? token.value : "" },
    })
      .then(function (response) {
        return response.text().then(function (text) {
          return { ok: response.ok, text: text };
        });
      })
      .then(function (result) {
        if (mine !== sent) return; // a newer keystroke's answer wins
        if (result.ok) {
          target.innerHTML = result.text; // sanitised HTML from annotation/markdown.py
        } else {
          target.textContent = result.text;
        }
        target.setAttribute("data-rendered", String(mine));
      })
      .catch(function () {
        if (mine === sent) target.textContent = "Preview unavailable (offline?): press Preview to try again.";
      });
  }

  if (source && target && url) {
    source.addEventListener("input", function () {
      window.clearTimeout(timer);
      timer = window.setTimeout(render, 250);
    });
    if (source.value.trim()) render();
  }

  // Extra questions: checked and rendered by the server (the study service's checker, the annotate
  // page's partials), so the preview shows what annotators will see, or the checker's error.
  var questionsSource = form.querySelector("[data-questions-source]");
  var questionsTarget = document.getElementById("questions-preview");
  var questionsUrl = form.getAttribute("data-questions-preview-url");
  var questionsTimer = null;
  var questionsSent = 0;
  function renderQuestions() {
    var mine = ++questionsSent;
    var body = new URLSearchParams();
    var kind = form.querySelector("input[name=kind]:checked");
    body.set("text", questionsSource.value);
    body.set("kind", kind ? kind.value : "verification");
    fetch(questionsUrl, {
      method: "POST",
      body: body,
      credentials: "same-origin",
      headers: { "X-CSRFToken": token ? token.value : "" },
    })
      .then(function (response) {
        return response.text().then(function (text) { return { ok: response.ok, text: text }; });
      })
      .then(function (result) {
        if (mine !== questionsSent) return;
        if (result.ok) {
          questionsTarget.innerHTML = result.text; // the server's own template, escaped there
        } else {
          questionsTarget.textContent = result.text;
        }
        questionsTarget.classList.toggle("is-invalid", !result.ok);
        questionsTarget.setAttribute("data-rendered", String(mine));
      })
      .catch(function () {
        if (mine === questionsSent) questionsTarget.textContent = "Preview unavailable (offline?); saving still checks the questions.";
      });
  }
  if (questionsSource && questionsTarget && questionsUrl) {
    questionsSource.addEventListener("input", function () {
      window.clearTimeout(questionsTimer);
      questionsTimer = window.setTimeout(renderQuestions, 300);
    });
    Array.prototype.forEach.call(form.querySelectorAll("input[name=kind]"), function (radio) {
      radio.addEventListener("change", function () { if (questionsSource.value.trim()) renderQuestions(); });
    });
    if (questionsSource.value.trim()) renderQuestions();
  }

  function showKind() {
    var chosen = form.querySelector("input[name=kind]:checked");
    if (!chosen) return;
    form.classList.toggle("is-preference", chosen.value === "preference");
    form.classList.toggle("is-verification", chosen.value === "verification");
  }
  Array.prototype.forEach.call(form.querySelectorAll("input[name=kind]"), function (radio) {
    radio.addEventListener("change", showKind);
  });
  showKind();
})();
