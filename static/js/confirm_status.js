/* Close and Pause ask first (issue 34). A status button with data-confirm opens #status-dialog,
 * a native <dialog>: "Yes" sends its form with the button's status and confirm=yes; Cancel or
 * Escape sends nothing and gives the focus back to the button. Without this file (or without
 * <dialog>) the server asks on a page of its own. No inline script (CSP script-src 'self').
 */
(function () {
  "use strict";

  var dialog = document.getElementById("status-dialog");
  if (!dialog || typeof dialog.showModal !== "function") { return; }
  var question = document.getElementById("status-dialog-question");
  var yes = document.getElementById("status-dialog-yes");
  var pending = null;

  function hidden(form, name, value) {
    var input = document.createElement("input");
    input.type = "hidden";
    input.name = name;
    input.value = value;
    form.appendChild(input);
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("button[data-confirm]") : null;
    if (!button || !button.form) { return; }
    event.preventDefault();
    pending = button;
    question.textContent = button.getAttribute("data-confirm");
    yes.textContent = "Yes, " + button.textContent.trim().toLowerCase() + " it";
    dialog.returnValue = "";
    dialog.showModal();
  });

  dialog.addEventListener("close", function () {
    var button = pending;
    pending = null;
    if (!button) { return; }
    if (dialog.returnValue !== "confirm") { button.focus(); return; }
    hidden(button.form, button.name, button.value);
    hidden(button.form, "confirm", "yes");
    button.form.submit();
  });
}());
