(function () {
  "use strict";
  var select = document.getElementById("metric-select");
  function showMetric(metric) {
    var panels = document.querySelectorAll(".metric-panel");
    for (var i = 0; i < panels.length; i++) {
      panels[i].hidden = panels[i].getAttribute("data-metric") !== metric;
    }
    var vals = document.querySelectorAll("details.query .vals[data-metric]");
    for (var j = 0; j < vals.length; j++) {
      vals[j].hidden = vals[j].getAttribute("data-metric") !== metric;
    }
  }
  if (select) {
    select.addEventListener("change", function () { showMetric(select.value); });
    showMetric(select.value);
  }
  var filter = document.getElementById("query-filter");
  if (filter) {
    filter.addEventListener("input", function () {
      var text = filter.value.toLowerCase();
      var items = document.querySelectorAll("details.query");
      var shown = 0;
      for (var i = 0; i < items.length; i++) {
        var hit = !text || items[i].getAttribute("data-search").indexOf(text) >= 0;
        items[i].hidden = !hit;
        if (hit) { shown++; }
      }
      var count = document.getElementById("query-count");
      if (count) { count.textContent = shown + " shown"; }
    });
  }
  function setAll(open) {
    var items = document.querySelectorAll("details.query");
    for (var i = 0; i < items.length; i++) {
      if (!items[i].hidden) { items[i].open = open; }
    }
  }
  var expand = document.getElementById("expand-all");
  var collapse = document.getElementById("collapse-all");
  if (expand) { expand.addEventListener("click", function () { setAll(true); }); }
  if (collapse) { collapse.addEventListener("click", function () { setAll(false); }); }
  // document texts are stored once and shown when a question is opened
  var store = document.getElementById("doc-texts");
  var texts = store ? JSON.parse(store.textContent || "{}") : {};
  function fill(details) {
    var slots = details.querySelectorAll(".chunk-text[data-doc]");
    for (var i = 0; i < slots.length; i++) {
      if (!slots[i].textContent) {
        var text = texts[slots[i].getAttribute("data-doc")];
        if (text) { slots[i].textContent = text; }
      }
    }
  }
  var all = document.querySelectorAll("details.query");
  for (var i = 0; i < all.length; i++) {
    all[i].addEventListener("toggle", function (event) {
      if (event.target.open) { fill(event.target); }
    });
  }
  document.documentElement.setAttribute("data-ready", "1");
})();
