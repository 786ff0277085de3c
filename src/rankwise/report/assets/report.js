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
  // the drill-down's order, stable (ties keep build order): by the size of the selected metric's difference, largest
  // first; with a failure class chosen, by the baseline's value of that metric, worst first
  function orderBy(attr, metric, sign) {
    var list = document.getElementById("query-list");
    if (!list) { return; }
    var items = Array.prototype.slice.call(list.querySelectorAll("details.query"));
    function key(e) {
      var v = JSON.parse(e.getAttribute(attr) || "{}")[metric];
      return typeof v === "number" ? v : 0;
    }
    items.sort(function (a, b) {
      return sign * (key(a) - key(b)) || (Number(a.getAttribute("data-index")) - Number(b.getAttribute("data-index")));
    });
    for (var i = 0; i < items.length; i++) { list.appendChild(items[i]); }
  }
  function sortQueries(metric) {
    if (classFilter && classFilter.value) { orderBy("data-value", metric, 1); } else { orderBy("data-size", metric, -1); }
    var label = document.getElementById("order-metric");
    if (label) { label.textContent = metric; }
  }
  if (select) {
    select.addEventListener("change", function () { showMetric(select.value); sortQueries(select.value); });
    showMetric(select.value);
  }
  // the stripe beside each chunk shows the selected verdict source's verdict
  var sourceSelect = document.getElementById("source-select");
  function showSource(source) {
    var chunks = document.querySelectorAll("ol.chunks li[data-verdicts]");
    for (var i = 0; i < chunks.length; i++) {
      var verdicts = JSON.parse(chunks[i].getAttribute("data-verdicts") || "{}");
      chunks[i].className = verdicts[source] || "";
    }
    var badges = document.querySelectorAll(".badge[data-source]");
    for (var j = 0; j < badges.length; j++) {
      badges[j].classList.toggle("selected", badges[j].getAttribute("data-source") === source);
    }
  }
  if (sourceSelect) {
    sourceSelect.addEventListener("change", function () { showSource(sourceSelect.value); });
    showSource(sourceSelect.value);
  }
  // the drill-down's filters: text (id or question) and failure class; with a class chosen, the worst cases of
  // that class (lowest baseline value of the selected metric) come first
  var filter = document.getElementById("query-filter");
  var classFilter = document.getElementById("class-filter");
  function applyFilters() {
    var text = filter ? filter.value.toLowerCase() : "";
    var wanted = classFilter ? classFilter.value : "";
    var items = document.querySelectorAll("details.query");
    var shown = 0;
    for (var i = 0; i < items.length; i++) {
      var hit = !text || items[i].getAttribute("data-search").indexOf(text) >= 0;
      if (hit && wanted) {
        var classes = JSON.parse(items[i].getAttribute("data-classes") || "{}");
        hit = Object.keys(classes).some(function (s) { return classes[s] === wanted; });
      }
      items[i].hidden = !hit;
      if (hit) { shown++; }
    }
    var count = document.getElementById("query-count");
    if (count) { count.textContent = shown + " shown" + (wanted ? ", worst first" : ""); }
    sortQueries(select ? select.value : "");
  }
  if (filter) { filter.addEventListener("input", applyFilters); }
  if (classFilter) { classFilter.addEventListener("change", applyFilters); }
  // a long chunk shows its first lines; the button shows the whole chunk (no scroll box)
  var more = document.querySelectorAll("button.more");
  for (var m = 0; m < more.length; m++) {
    more[m].addEventListener("click", function (event) {
      var text = event.target.previousElementSibling;
      var open = text.classList.toggle("open");
      event.target.textContent = open ? "show less" : event.target.getAttribute("data-label");
    });
    more[m].setAttribute("data-label", more[m].textContent);
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
