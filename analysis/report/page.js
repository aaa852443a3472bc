// analysis.report's page: sort a table by a column (click or Enter on its header; again to
// reverse), filter the rows table by text and status. Missing numbers sort last either way.
(function () {
  "use strict";

  function sortKey(cell, numeric) {
    if (!numeric) return cell.textContent.trim().toLowerCase();
    var v = cell.getAttribute("data-v");
    return v === null || v === "" ? null : parseFloat(v);
  }

  function sortTable(table, col) {
    var th = table.tHead.rows[0].cells[col];
    var numeric = th.getAttribute("data-type") === "num";
    var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
    var body = table.tBodies[0];
    var keyed = Array.prototype.map.call(body.rows, function (row, i) {
      return { key: sortKey(row.cells[col], numeric), i: i, row: row };
    });
    keyed.sort(function (a, b) {
      if (a.key === null || b.key === null || a.key === "" || b.key === "") {
        var ma = a.key === null || a.key === "", mb = b.key === null || b.key === "";
        if (ma !== mb) return ma ? 1 : -1;  // missing last, whichever the direction
        return a.i - b.i;
      }
      if (a.key < b.key) return -dir;
      if (a.key > b.key) return dir;
      return a.i - b.i;  // stable
    });
    var frag = document.createDocumentFragment();
    keyed.forEach(function (k) { frag.appendChild(k.row); });
    body.appendChild(frag);
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) { h.setAttribute("aria-sort", "none"); });
    th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
  }

  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
      th.addEventListener("click", function () { sortTable(table, col); });
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortTable(table, col); }
      });
    });
  });

  function applyFilter(id) {
    var table = document.getElementById(id);
    if (!table) return;
    var box = document.querySelector('input[data-filter="' + id + '"]');
    var text = box ? box.value.trim().toLowerCase() : "";
    var hidden = {};
    Array.prototype.forEach.call(document.querySelectorAll("input[data-status]"), function (c) {
      if (!c.checked) hidden["st-" + c.getAttribute("data-status")] = true;
    });
    var shown = 0, total = 0;
    Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
      total += 1;
      var statusHidden = Array.prototype.some.call(row.cells, function (c) { return hidden[c.className]; });
      var ok = !statusHidden && (!text || row.textContent.toLowerCase().indexOf(text) >= 0);
      row.hidden = !ok;
      if (ok) shown += 1;
    });
    var count = document.querySelector('[data-count="' + id + '"]');
    if (count) count.textContent = shown + " of " + total + " rows shown";
  }

  Array.prototype.forEach.call(document.querySelectorAll("input[data-filter], input[data-status]"), function (input) {
    input.addEventListener("input", function () { applyFilter("rows-table"); });
    input.addEventListener("change", function () { applyFilter("rows-table"); });
  });
  applyFilter("rows-table");
})();
