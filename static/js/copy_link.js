/* Copy buttons beside a link shown on the page (issue 34): the invite link shown once, the crowd
 * participant link. A button[data-copy] names the element whose text it copies and, in
 * data-copy-status, an aria-live region that says what happened. The Clipboard API copies where
 * the browser offers it; elsewhere the text is selected, ready for Ctrl+C. The buttons are
 * hidden in the page and shown here, so without this file nothing useless is on screen.
 * No inline script (CSP script-src 'self').
 */
(function () {
  "use strict";

  function select(node) {
    var range = document.createRange();
    range.selectNodeContents(node);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  Array.prototype.forEach.call(document.querySelectorAll("button[data-copy]"), function (button) {
    var source = document.getElementById(button.getAttribute("data-copy"));
    var status = document.getElementById(button.getAttribute("data-copy-status"));
    if (!source) { return; }

    function say(text) { if (status) { status.textContent = text; } }

    function selectOnly() {
      select(source);
      say("Selected: press Ctrl+C (⌘C on a Mac) to copy.");
    }

    button.hidden = false;
    button.addEventListener("click", function () {
      var text = source.textContent.trim();
      say("");
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(function () { say("Copied."); }, selectOnly);
      } else {
        selectOnly();
      }
    });
  });
}());
