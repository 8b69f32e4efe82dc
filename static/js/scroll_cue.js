/* Tables that scroll sideways say so (issue 34). Every .table-scroll whose content is wider than
 * it (scrollWidth > clientWidth) gets .is-wide (static/css/fit.css draws shadows at the edges that
 * have more), a short text cue just before it, and tabindex="0" with a name, so that a keyboard
 * scrolls it too. Measured again when a box changes size, when a <details> opens and when a page
 * swaps content in (the progress page's live numbers). A table that fits has neither cue nor stop.
 * No inline script, no inline style (CSP 'self').
 */
(function () {
  "use strict";

  var CUE = "Scroll sideways for more columns";
  var counter = 0;
  var resizes = window.ResizeObserver ? new window.ResizeObserver(function (entries) {
    entries.forEach(function (entry) { update(entry.target); });
  }) : null;

  function cueOf(box) {
    var id = box.getAttribute("data-cue");
    var cue = id ? document.getElementById(id) : null;
    if (cue || !box.parentNode) { return cue; }
    counter += 1;
    cue = document.createElement("p");
    cue.className = "scroll-cue";
    cue.id = "scroll-cue-" + counter;
    cue.hidden = true;
    var arrow = document.createElement("span");
    arrow.className = "scroll-cue-arrow";
    arrow.setAttribute("aria-hidden", "true");
    arrow.textContent = "↔";
    cue.appendChild(arrow);
    cue.appendChild(document.createTextNode(CUE));
    box.parentNode.insertBefore(cue, box);
    box.setAttribute("data-cue", cue.id);
    return cue;
  }

  function name(box) {
    var caption = box.querySelector("caption");
    var text = caption ? caption.textContent.replace(/\s+/g, " ").trim() : "";
    return (text ? text + ": " : "") + "table, scrolls sideways";
  }

  function update(box) {
    var wide = box.clientWidth > 0 && box.scrollWidth > box.clientWidth + 1;
    if (wide === box.classList.contains("is-wide")) { return; }
    var cue = cueOf(box);
    box.classList.toggle("is-wide", wide);
    if (cue) { cue.hidden = !wide; }
    if (wide) {
      box.setAttribute("tabindex", "0");
      box.setAttribute("role", "region");
      box.setAttribute("aria-label", name(box));
      if (cue) { box.setAttribute("aria-describedby", cue.id); }
    } else {
      ["tabindex", "role", "aria-label", "aria-describedby"].forEach(function (attribute) { box.removeAttribute(attribute); });
    }
  }

  function scan() {
    Array.prototype.forEach.call(document.querySelectorAll(".table-scroll"), function (box) {
      if (resizes && !box.hasAttribute("data-cue-watched")) {
        box.setAttribute("data-cue-watched", "");
        resizes.observe(box);
      }
      update(box);
    });
  }

  var pending = false;
  function later() {
    if (pending) { return; }
    pending = true;
    window.requestAnimationFrame(function () { pending = false; scan(); });
  }

  scan();
  window.addEventListener("resize", later);
  window.addEventListener("load", later);
  document.addEventListener("toggle", later, true);  /* a <details> opened: its tables have a width now */
  if (window.MutationObserver) {
    new window.MutationObserver(function (changes) {
      var swapped = changes.some(function (change) {
        return Array.prototype.some.call(change.addedNodes, function (node) {
          return node.nodeType === 1 && !node.classList.contains("scroll-cue");
        });
      });
      if (swapped) { later(); }
    }).observe(document.body, { childList: true, subtree: true });
  }
}());
