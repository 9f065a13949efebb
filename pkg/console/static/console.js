// skillbus console: merges the live updates of the runs list (server-sent events
// from /live) into the table. Rows arrive rendered and escaped by the server.
(function () {
  "use strict";
  var es = null, src = "";
  var maxRows = 500;

  function connect() {
    var table = document.getElementById("runs");
    if (!table) { if (es) { es.close(); es = null; src = ""; } return; }
    var url = table.dataset.live;
    if (es && src === url) return;
    if (es) es.close();
    src = url;
    es = new EventSource(url);
    es.addEventListener("runs", function (e) { merge(e.data); });
    es.addEventListener("counts", function (e) { replace("counts", e.data); });
    es.addEventListener("reset", function () { reload(); });
  }

  function parse(html) {
    var t = document.createElement("template");
    t.innerHTML = html;
    return t.content;
  }

  function merge(html) {
    var table = document.getElementById("runs"), body = document.getElementById("run-rows");
    if (!table || !body) return;
    var head = table.dataset.head === "true";
    var rows = Array.prototype.slice.call(parse(html).querySelectorAll("tr"));
    // Newest first: insert from the oldest so the newest ends on top.
    for (var i = rows.length - 1; i >= 0; i--) {
      var row = rows[i], old = document.getElementById(row.id);
      if (row.dataset.gone === "true") { if (old) old.remove(); continue; }
      if (old) { old.replaceWith(row); }
      else if (head) { body.insertBefore(row, body.firstChild); }
    }
    while (body.rows.length > maxRows) body.deleteRow(body.rows.length - 1);
    var none = document.getElementById("no-runs");
    if (none && body.rows.length > 0) none.remove();
  }

  function replace(id, html) {
    var el = document.getElementById(id);
    var next = parse(html).querySelector("#" + id);
    if (el && next) el.replaceWith(next);
  }

  // Too much changed to merge: fetch the list again, in place.
  function reload() {
    if (window.htmx) {
      window.htmx.ajax("GET", window.location.pathname + window.location.search, { target: "#runs-region", select: "#runs-region", swap: "outerHTML" });
    }
  }

  document.addEventListener("DOMContentLoaded", connect);
  document.addEventListener("htmx:afterSettle", connect);
})();
