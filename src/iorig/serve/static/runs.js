// The run list sorted by a column: a click on its header, again to reverse.
// Cells sort by their data-sort (the start as a sortable number) or their text.
"use strict";
(function () {
  var table = document.querySelector("table.runs");
  if (!table) { return; }
  var heads = Array.prototype.slice.call(table.querySelectorAll("thead th"));
  function key(row, column) {
    var cell = row.cells[column];
    return cell ? (cell.dataset.sort || cell.textContent).trim().toLowerCase() : "";
  }
  heads.forEach(function (th, column) {
    if (!th.classList.contains("sort")) { return; }
    th.tabIndex = 0;
    function sort() {
      var down = th.getAttribute("aria-sort") !== "descending";
      heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", down ? "descending" : "ascending");
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows).filter(function (r) { return r.cells.length > 1; });
      rows.sort(function (a, b) {
        var x = key(a, column), y = key(b, column);
        return (x < y ? -1 : x > y ? 1 : 0) * (down ? -1 : 1);
      });
      rows.forEach(function (r) { body.appendChild(r); });
      document.body.dataset.sortedBy = th.textContent + (down ? " descending" : " ascending");
    }
    th.addEventListener("click", sort);
    th.addEventListener("keydown", function (e) { if (e.key === "Enter") { sort(); } });
  });
})();
