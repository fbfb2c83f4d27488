// Sortable tables: a click (or Enter) on a column's header sorts the rows
// by it, again to reverse. Numeric columns sort by their data-v value.
(function () {
  function key(td, num) {
    var v = td.getAttribute('data-v');
    if (v === null) v = td.textContent;
    return num ? (parseFloat(v) || 0) : v;
  }
  var tables = document.querySelectorAll('table.sortable');
  for (var t = 0; t < tables.length; t++) {
    (function (table) {
      var heads = table.tHead.rows[0].cells;
      for (var i = 0; i < heads.length; i++) {
        (function (th, col) {
          function sort() {
            var num = th.classList.contains('num');
            var asc = th.getAttribute('aria-sort') !== 'ascending';
            for (var h = 0; h < heads.length; h++) heads[h].removeAttribute('aria-sort');
            th.setAttribute('aria-sort', asc ? 'ascending' : 'descending');
            var body = table.tBodies[0];
            var rows = Array.prototype.slice.call(body.rows);
            rows.sort(function (a, b) {
              var x = key(a.cells[col], num), y = key(b.cells[col], num);
              var c = num ? x - y : String(x).localeCompare(String(y), undefined, {numeric: true});
              return asc ? c : -c;
            });
            for (var r = 0; r < rows.length; r++) body.appendChild(rows[r]);
          }
          th.tabIndex = 0;
          th.addEventListener('click', sort);
          th.addEventListener('keydown', function (e) {
            if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); sort(); }
          });
        })(heads[i], i);
      }
    })(tables[t]);
  }
})();
