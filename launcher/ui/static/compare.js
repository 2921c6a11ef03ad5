// The compare view: one metric of several runs overlaid on one chart.
(function () {
  const box = document.getElementById("compare");
  const runs = box.dataset.runs ? box.dataset.runs.split(",").filter(Boolean) : [];
  const metricSel = document.getElementById("compare-metric");
  const logScale = document.getElementById("log-scale");
  const note = document.getElementById("chart-note");
  const smoothing = Charts.wireSmoothing(() => refresh());
  if (!runs.length) return;
  const el = document.createElement("div");
  el.className = "chart";
  box.append(el);
  const chart = new Charts.Chart(el, "");
  let metric = metricSel.dataset.current || null;

  async function refresh() {
    if (!metric) {
      const first = await Charts.fetchMetrics(runs[0], [], 0);
      metric = first.series.length ? first.series[0].metric : null;
      if (!metric) { note.textContent = runs[0] + " has no metrics yet"; return false; }
    }
    const results = await Promise.all(runs.map((r) => Charts.fetchMetrics(r, [metric], smoothing())
      .then((b) => ({ run: r, body: b }), (e) => ({ run: r, error: String(e.message || e) }))));
    const names = new Set();
    const lines = [];
    const problems = [];
    let live = false;
    results.forEach(({ run, body, error }, i) => {
      if (error) { problems.push(run + ": " + error); return; }
      body.metrics.forEach((m) => names.add(m));
      live = live || !Charts.TERMINAL.has(body.status);
      const curve = body.series[0];
      const color = Charts.PALETTE[i % Charts.PALETTE.length];
      lines.push({ label: run, xs: curve.steps, ys: curve.smoothed || curve.values, color });
    });
    const sorted = [...names].sort();
    if (JSON.stringify(sorted) !== JSON.stringify([...metricSel.options].map((o) => o.value))) {
      metricSel.innerHTML = "";
      sorted.forEach((m) => metricSel.add(new Option(m, m, false, m === metric)));
    }
    el.dataset.metric = metric;
    chart.title = metric;
    chart.update(lines, { log: logScale.checked });
    note.textContent = problems.join(" · ");
    return live;
  }
  metricSel.addEventListener("change", () => { metric = metricSel.value; chart.key = null; refresh(); });
  logScale.addEventListener("change", refresh);
  refresh().then((live) => {
    if (!live) return;
    const timer = setInterval(async () => { if (!document.hidden && !(await refresh())) clearInterval(timer); }, 3000);
  });
})();
