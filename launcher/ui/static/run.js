// The run page: details refresh until the run ends, loss curves update while it trains,
// and the log streams over server-sent events (a reconnect resumes from the last batch).
(function () {
  const details = document.getElementById("details");
  const run = details.dataset.run;
  const base = "/api/runs/" + encodeURIComponent(run);
  let status = details.dataset.status;
  let attempts = Number(details.dataset.attempts);
  const ended = () => Charts.TERMINAL.has(status);

  // --- status, timeline, attempts -----------------------------------------------------
  // The goodput bar: each part's segment as wide as its share of the wall time.
  function sizeGoodput() {
    for (const seg of details.querySelectorAll("#goodput-bar .gp")) {
      seg.style.flexGrow = String(Math.max(Number(seg.dataset.seconds) || 0, 0));
    }
  }
  sizeGoodput();

  async function refreshDetails() {
    try {
      const r = await fetch("/runs/" + encodeURIComponent(run) + "?partial=details");
      if (!r.ok) return;
      details.innerHTML = await r.text();
      sizeGoodput();
      const head = details.querySelector(".run-head");
      status = head.dataset.status;
      const now = Number(head.dataset.attempts);
      if (now > attempts) {
        const sel = document.getElementById("log-attempt");
        for (let a = attempts + 1; a <= now; a++) sel.add(new Option(String(a), String(a)));
        attempts = now;
      }
    } catch (e) { /* retried on the next tick */ }
  }

  // --- loss curves --------------------------------------------------------------------
  const list = document.getElementById("metric-list");
  const chartsEl = document.getElementById("charts");
  const note = document.getElementById("chart-note");
  const logScale = document.getElementById("log-scale");
  const smoothing = Charts.wireSmoothing(() => refreshCharts());
  const charts = new Map();
  let chosen = null;  // null: the server's default (the training loss)
  let known = [];

  function renderList(names) {
    if (JSON.stringify(names) === JSON.stringify(known)) return;
    known = names;
    list.innerHTML = "<legend>Metrics</legend>";
    if (!names.length) { list.insertAdjacentHTML("beforeend", '<span class="muted">none yet</span>'); return; }
    for (const name of names) {
      const label = document.createElement("label");
      const box = document.createElement("input");
      box.type = "checkbox";
      box.value = name;
      box.checked = (chosen || []).includes(name);
      box.addEventListener("change", () => {
        chosen = [...list.querySelectorAll("input:checked")].map((b) => b.value);
        refreshCharts();
      });
      label.append(box, " " + name);
      list.append(label);
    }
  }

  async function refreshCharts() {
    let body;
    try {
      body = await Charts.fetchMetrics(run, chosen || [], smoothing());
    } catch (e) { note.textContent = String(e.message || e); return false; }
    if (chosen === null && body.series.length) chosen = body.series.map((s) => s.metric);
    renderList(body.metrics);
    const wanted = new Set(body.series.map((s) => s.metric));
    for (const [name, c] of charts) if (!wanted.has(name)) { c.el.remove(); charts.delete(name); }
    body.series.forEach((curve, i) => {
      let c = charts.get(curve.metric);
      if (!c) {
        const el = document.createElement("div");
        el.className = "chart";
        el.dataset.metric = curve.metric;
        chartsEl.append(el);
        c = new Charts.Chart(el, curve.metric);
        charts.set(curve.metric, c);
      }
      c.update(Charts.curveLines(curve, curve.metric, Charts.PALETTE[i % Charts.PALETTE.length]),
               { log: logScale.checked, restarts: body.restarts });
    });
    const parts = body.series.map((s) => s.metric + ": " + s.points + " points, drawn " + s.steps.length);
    if (!body.metrics.length) parts.push(ended() ? "this run logged no metrics" : "no metrics yet; they appear as the run trains");
    note.textContent = [...parts, ...body.notes].join(" · ");
    return true;
  }
  logScale.addEventListener("change", refreshCharts);

  // --- logs -----------------------------------------------------------------------------
  const logEl = document.getElementById("log");
  const logState = document.getElementById("log-state");
  const rankSel = document.getElementById("log-rank");
  const attemptSel = document.getElementById("log-attempt");
  const follow = document.getElementById("log-follow");
  const raw = document.getElementById("log-raw");
  const MAX_LINES = 20000;  // each batch is one text node; the oldest go first past this
  let shownLines = 0;
  let source = null;

  function openLog(attempt) {
    if (source) source.close();
    logEl.textContent = "";
    shownLines = 0;
    const q = new URLSearchParams();
    if (rankSel.value !== "") q.set("rank", rankSel.value);
    if (raw.checked) q.set("raw", "1");
    if (attempt) q.set("attempt", attempt);
    else q.set("tail", "5000");
    const showRank = rankSel.value === "" && Number(details.dataset.nodes) > 1;
    source = new EventSource(base + "/logs?" + q.toString());
    logState.textContent = "connecting…";
    source.addEventListener("open", () => { logState.textContent = ended() ? "" : "live"; });
    source.addEventListener("lines", (ev) => {
      const lines = JSON.parse(ev.data).lines;
      const text = lines.map((l) => (showRank ? "[" + l.rank + "] " : "") + l.text + "\n").join("");
      const node = document.createTextNode(text);
      node.lines = lines.length;
      logEl.append(node);
      shownLines += lines.length;
      while (shownLines > MAX_LINES && logEl.childNodes.length > 1) {
        shownLines -= logEl.firstChild.lines || 0;
        logEl.firstChild.remove();
      }
      if (follow.checked) logEl.scrollTop = logEl.scrollHeight;
    });
    source.addEventListener("failure", (ev) => { logState.textContent = JSON.parse(ev.data).message; });
    source.addEventListener("end", (ev) => {
      const end = JSON.parse(ev.data);
      source.close();
      source = null;
      if (attemptSel.value === "" && !Charts.TERMINAL.has(end.status) && end.attempts > end.attempt) {
        logEl.append(document.createTextNode("── attempt " + end.attempts + " ──\n"));
        openLogAppend(end.attempts);
        return;
      }
      logState.textContent = "attempt " + end.attempt + " ended (" + end.status + ")";
    });
    source.addEventListener("error", () => { if (source) logState.textContent = "reconnecting…"; });
  }
  // The next attempt of a followed run, below what is shown.
  function openLogAppend(attempt) {
    const kept = [...logEl.childNodes];
    openLog(attempt);
    logEl.append(...kept);
    shownLines = kept.reduce((n, k) => n + (k.lines || 0), 0);
  }
  rankSel.addEventListener("change", () => openLog(attemptSel.value));
  attemptSel.addEventListener("change", () => openLog(attemptSel.value));
  raw.addEventListener("change", () => openLog(attemptSel.value));

  // --- the loop ---------------------------------------------------------------------------
  // Charts poll until one answer came after the run ended: a failed first fetch on the
  // page of a finished run is retried, not left as an empty chart area.
  openLog("");
  let chartsFinal = false;
  const chartsNow = async () => {
    const was = ended();
    if (await refreshCharts()) chartsFinal = was;
  };
  chartsNow();
  const timer = setInterval(async () => {
    if (document.hidden) return;
    const was = ended();
    await refreshDetails();
    if (!chartsFinal) await chartsNow();
    if (was && chartsFinal) clearInterval(timer);
  }, 2000);
})();
