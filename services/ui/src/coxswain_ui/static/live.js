// Live refresh: pages that carry data-refresh on <main> are fetched again every so often and
// their <main> swapped in. Every page reads the same without this script; it never refreshes
// while focus is inside the page's content (so a reader or a keyboard user is not moved).
(function () {
  "use strict";
  var main = document.getElementById("main");
  var every = main ? Number(main.getAttribute("data-refresh") || 0) : 0;
  if (!every) { return; }
  var box = document.querySelector(".live");
  var toggle = document.getElementById("live-toggle");
  var status = document.getElementById("live-status");
  if (box) { box.hidden = false; }
  function busy() {
    var active = document.activeElement;
    return active && active !== main && main.contains(active);
  }
  function tick() {
    if ((toggle && !toggle.checked) || busy() || document.hidden) { return; }
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-Live-Refresh": "1" } })
      .then(function (response) { return response.text(); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("main");
        if (fresh && fresh.innerHTML !== main.innerHTML && !busy()) { main.innerHTML = fresh.innerHTML; }
        if (status) { status.textContent = "updated " + new Date().toLocaleTimeString(); }
      })
      .catch(function (err) {
        if (status) { status.textContent = "refresh failed (" + err.message + ")"; }
      });
  }
  window.setInterval(tick, every * 1000);
}());
