// Renders every .tw-chart element with vega-embed (shipped with the site, no CDN) and
// re-renders them when MkDocs Material's palette switches between light and dark.
// Chart specs come from <script type="application/json"> elements: data, never code.
(function () {
  "use strict";

  function isDark() {
    var scheme = document.body && document.body.getAttribute("data-md-color-scheme");
    return scheme === "slate";
  }

  function render(el) {
    var source = document.getElementById(el.getAttribute("data-tw-spec"));
    if (!source || typeof window.vegaEmbed !== "function") {
      return;
    }
    var spec = JSON.parse(source.textContent);
    var dark = isDark();
    if (el.twView) {
      el.twView.finalize();
      el.twView = null;
    }
    el.textContent = "";
    window
      .vegaEmbed(el, spec, {
        actions: false,
        renderer: "svg",
        theme: dark ? "dark" : undefined,
        // The dark theme leaves text marks (value labels) black; make them readable.
        config: dark ? { text: { color: "#e0e0e0" } } : { background: "#ffffff" },
        tooltip: { theme: dark ? "dark" : "light" }
      })
      .then(function (result) {
        el.twView = result.view;
        el.setAttribute("data-tw-theme", dark ? "dark" : "light");
        var count = Number(el.getAttribute("data-tw-renders") || "0") + 1;
        el.setAttribute("data-tw-renders", String(count));
      })
      .catch(function (error) {
        el.setAttribute("data-tw-error", String(error));
        el.textContent = "This chart could not be drawn: " + error;
      });
  }

  function renderAll() {
    document.querySelectorAll(".tw-chart").forEach(render);
  }

  function start() {
    renderAll();
    var last = isDark();
    new MutationObserver(function () {
      var now = isDark();
      if (now !== last) {
        last = now;
        renderAll();
      }
    }).observe(document.body, { attributes: true, attributeFilter: ["data-md-color-scheme"] });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
