// Charts shared by the run page and the compare view: uPlot line charts of metric curves
// (already downsampled by the server), retries marked as dashed vertical lines.
const Charts = (function () {
  const PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#db2777", "#4b5563"];

  function metricsUrl(run, metrics, smoothing) {
    const q = new URLSearchParams();
    metrics.forEach((m) => q.append("metric", m));
    q.set("smoothing", String(smoothing));
    return "/api/runs/" + encodeURIComponent(run) + "/metrics?" + q.toString();
  }

  async function fetchMetrics(run, metrics, smoothing) {
    const r = await fetch(metricsUrl(run, metrics, smoothing));
    const body = await r.json();
    if (!r.ok) throw new Error(body.error || r.statusText);
    return body;
  }

  // Vertical dashed lines where a retry's points take over, labelled with the attempt.
  function restartsPlugin(getRestarts) {
    return {
      hooks: {
        draw: [(u) => {
          const ctx = u.ctx;
          ctx.save();
          ctx.strokeStyle = "#f59e0b";
          ctx.fillStyle = "#b45309";
          ctx.setLineDash([5, 4]);
          ctx.lineWidth = 1.5 * devicePixelRatio;
          ctx.font = 11 * devicePixelRatio + "px sans-serif";
          ctx.textAlign = "left";
          ctx.textBaseline = "top";
          for (const r of getRestarts()) {
            const x = Math.round(u.valToPos(r.step, "x", true));
            if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
            ctx.beginPath();
            ctx.moveTo(x, u.bbox.top);
            ctx.lineTo(x, u.bbox.top + u.bbox.height);
            ctx.stroke();
            ctx.fillText("↻ attempt " + r.attempt, x + 4 * devicePixelRatio, u.bbox.top + 4 * devicePixelRatio);
          }
          ctx.restore();
        }],
      },
    };
  }

  // One chart in `el`. lines: [{label, xs, ys, color, faint}]. Kept across updates
  // (setData) unless the set of lines or the scale changes, so zoom and hover survive.
  class Chart {
    constructor(el, title) {
      this.el = el;
      this.title = title;
      this.plot = null;
      this.key = null;
      this.restarts = [];
      new ResizeObserver(() => this.plot && this.plot.setSize(this.size())).observe(el);
    }
    size() { return { width: Math.max(this.el.clientWidth - 12, 200), height: 300 }; }
    update(lines, { log = false, restarts = [] } = {}) {
      this.restarts = restarts;
      const data = lines.length ? uPlot.join(lines.map((l) => [l.xs, l.ys])) : [[]];
      const key = JSON.stringify([lines.map((l) => l.label), log]);
      this.el.dataset.points = String(lines.reduce((n, l) => n + l.xs.length, 0));
      this.el.dataset.lines = lines.map((l) => l.label).join("\n");
      if (this.plot && key === this.key) { this.plot.setData(data); return; }
      if (this.plot) this.plot.destroy();
      this.key = key;
      const opts = {
        ...this.size(),
        title: this.title,
        scales: { x: { time: false }, y: { distr: log ? 3 : 1 } },
        axes: [{ label: "step" }, { size: 60 }],
        series: [{ label: "step" }, ...lines.map((l) => ({
          label: l.label, stroke: l.faint ? l.color + "55" : l.color, width: l.faint ? 1 : 2, spanGaps: false,
          points: { show: l.xs.length < 60 },
        }))],
        plugins: [restartsPlugin(() => this.restarts)],
        legend: { live: true },
      };
      this.plot = new uPlot(opts, data, this.el);
    }
  }

  // A curve's lines: the raw points (faint when smoothed) and the smoothed curve.
  function curveLines(curve, label, color) {
    if (!curve.smoothed) return [{ label, xs: curve.steps, ys: curve.values, color }];
    return [
      { label, xs: curve.steps, ys: curve.values, color, faint: true },
      { label: label + " (smoothed)", xs: curve.steps, ys: curve.smoothed, color },
    ];
  }

  function wireSmoothing(onChange) {
    const slider = document.getElementById("smoothing");
    const shown = document.getElementById("smoothing-value");
    let timer = null;
    slider.addEventListener("input", () => {
      shown.textContent = Number(slider.value).toFixed(2);
      clearTimeout(timer);
      timer = setTimeout(onChange, 200);
    });
    return () => Number(slider.value);
  }

  const TERMINAL = new Set(["COMPLETED", "FAILED", "STOPPED"]);
  return { PALETTE, TERMINAL, fetchMetrics, Chart, curveLines, wireSmoothing };
})();
