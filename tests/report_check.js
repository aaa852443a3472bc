// Injected first into a copy of an analysis.report page by tests/test_report_browser.py: records
// every error the page raises, then on load checks that every image rendered, that nothing is
// wider than the viewport and that every sortable table sorts, and writes what it found as JSON
// into a pre element, id report-check (read back with chromium --dump-dom). It logs nothing itself, so
// any console line of the page is the page's.
(function () {
  "use strict";
  var errors = [];
  window.addEventListener("error", function (e) {
    var t = e.target;
    errors.push(t && t !== window && t.tagName ? "failed to load <" + t.tagName.toLowerCase() + ">"
                                               : "error: " + e.message);
  }, true);  // capture: an <img> that fails does not bubble
  window.addEventListener("securitypolicyviolation", function (e) {
    errors.push("blocked by the page's Content-Security-Policy: " + e.blockedURI);
  });
  ["error", "warn"].forEach(function (level) {
    var orig = console[level];
    console[level] = function () {
      errors.push("console." + level + ": " + Array.prototype.join.call(arguments, " "));
      return orig.apply(console, arguments);
    };
  });

  function column(table, col, numeric) {
    return Array.prototype.map.call(table.tBodies[0].rows, function (row) {
      var cell = row.cells[col];
      if (!numeric) return cell.textContent.trim().toLowerCase();
      var v = cell.getAttribute("data-v");
      return v === null || v === "" ? null : parseFloat(v);
    });
  }

  function inOrder(values, dir) {
    var present = values.filter(function (v) { return v !== null && v !== ""; });
    var firstMissing = values.findIndex(function (v) { return v === null || v === ""; });
    if (firstMissing >= 0 && values.slice(firstMissing).some(function (v) { return v !== null && v !== ""; })) {
      return "a missing value sorts before a present one";
    }
    for (var i = 1; i < present.length; i++) {
      if (dir * (present[i] < present[i - 1] ? -1 : present[i] > present[i - 1] ? 1 : 0) < 0) {
        return "out of order at row " + i + ": " + present[i - 1] + " then " + present[i];
      }
    }
    return "";
  }

  function checkSort(table) {
    var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
    var out = [];
    ["num", "text"].forEach(function (kind) {
      var numeric = kind === "num";
      // the column with the most distinct values: sorting it must move rows
      var best = -1, most = 1;
      heads.forEach(function (th, col) {
        if (th.getAttribute("data-type") !== kind) return;
        var n = new Set(column(table, col, numeric).filter(function (v) { return v !== null && v !== ""; })).size;
        if (n > most) { most = n; best = col; }
      });
      if (best < 0) return;
      var th = heads[best], name = th.textContent.trim();
      th.click();
      var up = inOrder(column(table, best, numeric), 1);
      var upSort = th.getAttribute("aria-sort");
      th.click();
      var down = inOrder(column(table, best, numeric), -1);
      var downSort = th.getAttribute("aria-sort");
      if (up) out.push(name + " ascending: " + up);
      if (down) out.push(name + " descending: " + down);
      if (upSort !== "ascending" || downSort !== "descending") out.push(name + ": aria-sort " + upSort + ", " + downSort);
    });
    return {id: table.id, rows: table.tBodies[0].rows.length, problems: out};
  }

  window.addEventListener("load", function () {
    var result = {errors: errors, images: [], tables: [], innerWidth: window.innerWidth};
    Array.prototype.forEach.call(document.images, function (img) {
      result.images.push({alt: img.alt.slice(0, 80), complete: img.complete, naturalWidth: img.naturalWidth,
                          width: img.getBoundingClientRect().width});
    });
    result.scrollWidth = Math.max(document.documentElement.scrollWidth, document.body.scrollWidth);
    var wide = [];  // what sticks out on the right, for the message
    Array.prototype.forEach.call(document.body.querySelectorAll("*"), function (e) {
      var r = e.getBoundingClientRect();
      if (r.right > window.innerWidth + 0.5 && wide.length < 5) wide.push(e.tagName.toLowerCase() + "." + e.className);
    });
    result.tooWide = wide;
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (t) {
      try { result.tables.push(checkSort(t)); } catch (e) { result.tables.push({id: t.id, problems: ["" + e]}); }
    });
    var pre = document.createElement("pre");
    pre.id = "report-check";
    pre.textContent = JSON.stringify(result);
    document.body.appendChild(pre);
  });
})();
