/* The study page's "precision so far" card, loaded after the page (issue 15: the page must not
 * grow with the study; the card reads every label). #precision carries data-src, the card's own
 * route; without this file the card's link leads there. No inline script (CSP script-src 'self').
 */
(function () {
  "use strict";

  var card = document.getElementById("precision");
  if (!card || !window.fetch) { return; }
  fetch(card.getAttribute("data-src"), { credentials: "same-origin", headers: { "Accept": "text/html" } })
    .then(function (response) { return response.ok ? response.text() : null; })
    .then(function (html) {
      if (!html) { return; }
      var holder = document.createElement("template");
      holder.innerHTML = html;
      var loaded = holder.content.querySelector("#precision");
      if (loaded) { card.replaceWith(loaded); }
    })
    .catch(function () { /* the link stays */ });
}());
