// The runs page: rows change in place as the runs do, from the page's update stream
// (/api/events/runs: only the rows that are new, changed or gone, never the page again),
// the filters apply on change, and ticked runs open in the compare view.
(function () {
  const rows = document.getElementById("rows");
  const form = document.getElementById("filters");
  const compare = document.getElementById("compare-selected");
  const picked = new Set();
  let view = rows.dataset.view;  // what the page shows: the server sends what changed since
  let source = null;

  form.querySelectorAll("select").forEach((s) => s.addEventListener("change", () => form.submit()));

  function wire(root) {
    root.querySelectorAll("input.pick").forEach((box) => {
      box.checked = picked.has(box.value);
      box.addEventListener("change", () => {
        box.checked ? picked.add(box.value) : picked.delete(box.value);
        compare.disabled = picked.size < 1;
      });
    });
  }
  compare.addEventListener("click", () => {
    location.href = "/compare?runs=" + encodeURIComponent([...picked].join(","));
  });

  // --- times that tick: the same words as launcher.sdk.records.ago and duration ----------
  function ago(iso) {
    if (!iso) return "-";
    const secs = Math.trunc((Date.now() - Date.parse(iso)) / 1000);
    for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60]]) {
      if (secs >= size) return Math.floor(secs / size) + unit + " ago";
    }
    return secs + "s ago";
  }
  function duration(start, end) {
    if (!start) return "-";
    const secs = Math.trunc(((end ? Date.parse(end) : Date.now()) - Date.parse(start)) / 1000);
    const h = Math.floor(secs / 3600), m = Math.floor((secs % 3600) / 60), s = secs % 60;
    const two = (n) => String(n).padStart(2, "0");
    return h ? h + ":" + two(m) + ":" + two(s) : m + ":" + two(s);
  }
  function tick() {
    rows.querySelectorAll("td.ago").forEach((td) => { td.textContent = ago(td.dataset.at); });
    rows.querySelectorAll("td.duration").forEach((td) => {
      if (td.dataset.since) td.textContent = duration(td.dataset.since, null);  // an attempt is running
    });
  }

  // --- patching the table --------------------------------------------------------------
  function fragment(html) {
    const t = document.createElement("template");
    t.innerHTML = html;  // the server's own templates, escaped; a template runs no script
    return t.content;
  }
  function rowOf(name) {
    return rows.querySelector('tr[data-run="' + CSS.escape(name) + '"]');
  }
  function place(tr) {  // newest first
    const tbody = rows.querySelector("table.runs tbody");
    const at = Date.parse(tr.dataset.created);
    for (const other of tbody.querySelectorAll("tr[data-run]")) {
      if (Date.parse(other.dataset.created) < at) { tbody.insertBefore(tr, other); return; }
    }
    tbody.append(tr);
  }
  function apply(data) {
    if (data.reset !== undefined) {
      rows.innerHTML = data.reset;
      wire(rows);
      return;
    }
    for (const name of data.removed || []) { const tr = rowOf(name); if (tr) tr.remove(); }
    for (const change of data.changed || []) {
      const tr = fragment(change.html).querySelector("tr");
      const old = rowOf(change.name);
      if (old) old.replaceWith(tr); else place(tr);
      wire(tr);
    }
    if (data.nav !== undefined) {
      const nav = document.getElementById("pages");
      if (nav) nav.replaceWith(fragment(data.nav));
    }
    if (data.errors !== undefined) {
      document.getElementById("errors").replaceChildren(...data.errors.map((e) => {
        const line = document.createElement("p");
        line.className = "error";
        line.textContent = e;
        return line;
      }));
    }
  }

  // The runs could not be listed: say why in place of rows that may be stale by now (the
  // next listing that works draws the page whole again).
  function showError(message) {
    const line = document.createElement("p");
    line.className = "error";
    line.textContent = message;
    rows.replaceChildren(line);
  }

  function open() {
    const query = rows.dataset.query;
    source = new EventSource("/api/events/runs?" + (query ? query + "&" : "") + "since=" + encodeURIComponent(view));
    source.addEventListener("runs", (e) => {
      view = e.lastEventId;
      apply(JSON.parse(e.data));
      tick();
    });
    source.addEventListener("failure", (e) => showError(JSON.parse(e.data).message));
    source.addEventListener("error", () => {
      // The browser reconnects by itself (with the last event's id) unless the server
      // refused the stream (too many open: 503): then try again in a while.
      if (source.readyState === EventSource.CLOSED) { source = null; setTimeout(() => { if (!document.hidden) open(); }, 5000); }
    });
  }
  function close() {
    if (source) { source.close(); source = null; }
  }
  // A hidden tab keeps no stream open (each lists its page every few seconds).
  document.addEventListener("visibilitychange", () => {
    if (document.hidden) close(); else if (!source) open();
  });

  wire(rows);
  setInterval(tick, 5000);
  if (!document.hidden) open();
  performance.mark("runs-interactive");  // bench/bench_history.py times the page to here
})();
