/* The report's section index (issue 34; made by metaeval/templatetags/report_index.py). Its links
 * are plain in-page links and work without this file. Here: the index's height is kept in
 * --report-index-height (static/css/fit.css leaves that much room above a section scrolled to, or a
 * control focused, so the sticky index covers neither), and the link of the section being read is
 * marked aria-current and, on a phone, where the index is one line that scrolls, kept in view.
 * No inline script, no eval (CSP script-src 'self').
 */
(function () {
  "use strict";

  var nav = document.getElementById("report-index");
  if (!nav) { return; }
  var list = nav.querySelector("ul");
  var links = Array.prototype.slice.call(nav.querySelectorAll("ul a[href^='#']"));
  var sections = links.map(function (link) { return document.getElementById(link.getAttribute("href").slice(1)); });
  var current = null;

  function measure() {
    document.documentElement.style.setProperty("--report-index-height", nav.offsetHeight + "px");
  }

  function mark(link) {
    if (link === current) { return; }
    if (current) { current.removeAttribute("aria-current"); }
    current = link;
    if (!link) { return; }
    link.setAttribute("aria-current", "location");
    if (list.scrollWidth > list.clientWidth) {  /* one line that scrolls (a phone): keep the link in view */
      var left = link.offsetLeft - list.offsetLeft;
      if (left < list.scrollLeft || left + link.offsetWidth > list.scrollLeft + list.clientWidth) {
        list.scrollLeft = Math.max(0, left - 24);
      }
    }
  }

  /* The section being read: the last one whose top has reached the index (give or take the room left
   * above a section scrolled to); at the foot of the page, where the last short sections cannot reach
   * the top, the one jumped to if it is on screen. */
  function follow() {
    var line = nav.getBoundingClientRect().bottom + 32;
    var found = null;
    sections.forEach(function (section, index) {
      if (section && section.getBoundingClientRect().top <= line) { found = links[index]; }
    });
    var root = document.documentElement;
    if (window.innerHeight + window.scrollY >= root.scrollHeight - 2 && window.location.hash) {
      var index = links.map(function (link) { return link.getAttribute("href"); }).indexOf(window.location.hash);
      var target = index >= 0 ? sections[index] : null;
      if (target && target.getBoundingClientRect().top < window.innerHeight) { found = links[index]; }
    }
    mark(found);
  }

  var pending = false;
  function later() {
    if (pending) { return; }
    pending = true;
    window.requestAnimationFrame(function () { pending = false; measure(); follow(); });
  }

  measure();
  follow();
  window.addEventListener("scroll", later, { passive: true });
  window.addEventListener("resize", later);
  window.addEventListener("hashchange", later);
}());
