"""How fast the dashboard (`launcher ui`) is: the runs page with 1,000 runs, the metrics
endpoint on a run of 100k steps, and the latency of a log line from the run to the page.

Goals: runs page under 300 ms, metrics endpoint under 300 ms warm, a log line on screen
under 1 s after the run wrote it. The browser figures need Debian's chromium and
playwright (the dev extra); without them the script says so and measures over HTTP only.

    .venv/bin/python bench/bench_ui.py [--runs 1000] [--steps 100000]

The 1,000 runs are written straight into a private local-backend state database (as
finished runs: submitting a thousand real runs would take most of an hour); the metrics
and log runs are real runs submitted with `launcher run`.
"""

from __future__ import annotations

import argparse
import http.client
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.ui.browser import browser, chromium_path, dashboard  # noqa: E402


def timed_get(url: str, path: str, headers: dict[str, str] | None = None) -> tuple[float, float, int, bytes]:
    """(time to first byte, time to the last byte, status, body) of one GET, new connection."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    start = time.perf_counter()
    conn.request("GET", path, headers=headers or {})
    resp = conn.getresponse()
    first = time.perf_counter() - start  # the status line and headers have arrived
    body = resp.read()
    total = time.perf_counter() - start
    conn.close()
    return first, total, resp.status, body


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def spread(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[min(len(values) - 1, int(round(0.95 * (len(values) - 1))))]
    return f"median {ms(statistics.median(values))}, p95 {ms(p95)}, max {ms(values[-1])} ({len(values)} samples)"


def seed_runs(home: Path, n: int) -> None:
    """n finished runs in the local backend's state database, a second apart."""
    from datetime import datetime, timedelta, timezone

    from launcher.backends.local.state import State

    state = State(home)
    start = datetime.now(timezone.utc) - timedelta(seconds=n)
    outcomes = [("COMPLETED", None, 0), ("FAILED", "rank 0 exited with code 1", 1), ("STOPPED", "stopped by the user", None)]
    with state.tx() as db:
        for i in range(n):
            name = f"bench-run-{i:05d}"
            created = (start + timedelta(seconds=i)).isoformat()
            ended = (start + timedelta(seconds=i + 0.5)).isoformat()
            status, reason, code = outcomes[1 if i % 7 == 3 else 2 if i % 11 == 5 else 0]
            spec = {"name": name, "image": "x", "command": "true", "compute": {"gpus": 8 * (i % 3), "nodes": 1 + i % 2}}
            db.execute("INSERT INTO runs (name, status, created_at, started_at, ended_at, reason, exit_code, spec,"
                       " secrets, workdir) VALUES (?, ?, ?, ?, ?, ?, ?, ?, '[]', '/tmp')",
                       (name, status, created, created, ended, reason, code, json.dumps(spec)))
            db.execute("INSERT INTO attempts VALUES (?, 1, ?, ?, ?, ?)", (name, status, created, ended, reason))
            db.execute("INSERT INTO ranks (run, attempt, rank, status, exit_code) VALUES (?, 1, 0, ?, ?)",
                       (name, status, code))
            for s, at in (("PENDING", created), ("RUNNING", created), (status, ended)):
                db.execute("INSERT INTO events VALUES (?, 1, ?, ?, ?)", (name, s, at, reason if s == status else None))


def bench_runs_page(work: Path, n: int, chromium: str | None) -> None:
    home = work / "runs-home"
    home.mkdir()
    seed_runs(home, n)
    os.environ["LAUNCHER_HOME"] = str(home)
    from launcher.ui.runs import PageAt, RunFilter, RunsSource

    start = time.perf_counter()
    first = RunsSource().page(RunFilter(), PageAt(), 50)
    listing = time.perf_counter() - start
    assert len(first.runs) == min(n, 50), len(first.runs)
    print(f"listing the runs page's first 50 of {n} runs through the SDK's listing: {ms(listing)}")

    with dashboard(home, "--no-token") as url:
        first, total, status, body = timed_get(url, "/")
        assert status == 200 and b"bench-run-" in body, status
        print(f"runs page, first request: TTFB {ms(first)}, full {ms(total)}")
        ttfb, full = [], []
        for _ in range(30):
            a, b, _, _ = timed_get(url, "/")
            ttfb.append(a)
            assets = sum(timed_get(url, p)[1] for p in ("/static/app.css", "/static/runs.js"))
            full.append(b + assets)
        print(f"runs page, TTFB:                      {spread(ttfb)}")
        print(f"runs page + its CSS and JS over HTTP: {spread(full)}")
        page2 = [timed_get(url, "/?page=20&name=bench")[1] for _ in range(10)]
        print(f"runs page 20, filtered by name:       {spread(page2)}")
        api = [timed_get(url, "/api/runs?per_page=500")[1] for _ in range(10)]
        print(f"/api/runs?per_page=500:               {spread(api)}")
        if chromium:
            with browser(chromium) as b:
                page = b.new_page()
                loads, firsts = [], []
                for _ in range(8):
                    page.goto(url, wait_until="load")
                    nav = page.evaluate("JSON.stringify(performance.getEntriesByType('navigation')[0])")
                    nav = json.loads(nav)
                    firsts.append((nav["responseStart"] - nav["startTime"]) / 1000)
                    loads.append((nav["loadEventEnd"] - nav["startTime"]) / 1000)
                print(f"runs page in chromium, TTFB:          {spread(firsts)}")
                print(f"runs page in chromium, load event:    {spread(loads)}")


def submit(work: Path, env: dict[str, str], name: str, command: str, follow: bool) -> str:
    (work / f"{name}.yaml").write_text(json.dumps({"name": name, "image": "x", "command": command,
                                                   "compute": {"gpus": 0}}))
    r = subprocess.run([sys.executable, "-m", "launcher", "run", "-f", f"{name}.yaml", *(["--follow"] if follow else [])],
                       cwd=work, env=env, capture_output=True, text=True, check=True)
    import re

    return re.search(r"Run (\S+) (?:submitted|started)", r.stdout + r.stderr).group(1)


def bench_metrics(work: Path, steps: int) -> None:
    spec = importlib.util.spec_from_file_location("bench_metrics", REPO / "bench" / "bench_metrics.py")
    printer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(printer)  # type: ignore[union-attr]
    home = work / "metrics-home"
    env = {**os.environ, "LAUNCHER_HOME": str(home)}
    (work / "printer.py").write_text(printer.PRINTER)
    start = time.perf_counter()
    name = submit(work, env, "bench-ui-metrics", f"{sys.executable} {work / 'printer.py'} {steps}", follow=True)
    print(f"\nrun of {steps} steps written in {time.perf_counter() - start:.1f} s")
    path = f"/api/runs/{name}/metrics"
    with dashboard(home, "--no-token") as url:
        first, total, status, body = timed_get(url, path)
        assert status == 200, body[:300]
        curve = json.loads(body)["series"][0]
        assert curve["points"] == steps and curve["steps"][-1] == steps, (curve["points"], curve["steps"][-1])
        print(f"metrics endpoint, cold (parses the log, no cache):   {ms(total)}  "
              f"({len(curve['steps'])} of {curve['points']} points sent, {len(body) / 1e3:.0f} kB)")
        warm = [timed_get(url, path)[1] for _ in range(20)]
        print(f"metrics endpoint, warm (same curve):                 {spread(warm)}")
        other = [timed_get(url, f"{path}?smoothing={0.5 + i / 100}")[1] for i in range(10)]
        print(f"metrics endpoint, warm, new smoothing each call:     {spread(other)}")
        every = [timed_get(url, f"{path}?metric=*")[1] for _ in range(5)]
        print(f"metrics endpoint, warm, every metric ({len(json.loads(timed_get(url, path + '?metric=*')[3])['series'])} curves): "
              f"{spread(every)}")
        logs = [timed_get(url, f"/api/runs/{name}/logs?tail=5000&follow=0")[1] for _ in range(3)]
        print(f"its log's last 5,000 lines (of {steps * 11 // 10:,}) as events: {spread(logs)}")
    with dashboard(home, "--no-token") as url:  # a restarted dashboard: the index is on disk
        restart = timed_get(url, path)[1]
        print(f"metrics endpoint, after a restart (cached index):   {ms(restart)}")


# Per line the page adds, when it appeared (the page's clock), to compare with the time
# the run wrote in the line.
OBSERVE_JS = """() => {
  window.__seen = [];
  new MutationObserver((muts) => {
    const now = Date.now() / 1000;
    for (const m of muts) for (const n of m.addedNodes)
      for (const line of (n.textContent || '').split('\\n')) if (line.startsWith('LAT ')) window.__seen.push([line, now]);
  }).observe(document.getElementById('log'), { childList: true });
}"""


def bench_log_latency(work: Path, lines: int, chromium: str | None) -> None:
    home = work / "log-home"
    env = {**os.environ, "LAUNCHER_HOME": str(home)}
    command = (f"{sys.executable} -c \"import time\ntime.sleep(4)\nfor i in range({lines}):\n"
               f"    print('LAT %.6f' % time.time(), flush=True); time.sleep(0.25)\"")
    name = submit(work, env, "bench-ui-log", command, follow=False)
    with dashboard(home, "--no-token") as url:
        if not chromium:
            print("\nlog latency: skipped (no chromium; apt-get install -y chromium)")
            return
        with browser(chromium) as b:
            page = b.new_page(bypass_csp=True)  # wait_for_function polls with eval, which the CSP forbids
            page.goto(url + f"runs/{name}")
            page.evaluate(OBSERVE_JS)
            page.wait_for_function(f"window.__seen.length >= {lines}", timeout=(lines * 0.25 + 60) * 1000)
            seen = page.evaluate("window.__seen")
    delays = [at - float(text.split()[1]) for text, at in seen]
    print(f"\nlog line written by the run -> shown in chromium: {spread(delays)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--log-lines", type=int, default=40)
    args = ap.parse_args()
    chromium = chromium_path()
    if chromium is None:
        print("! no chromium: browser figures are skipped (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory(prefix="bench-ui-") as tmp:
        work = Path(tmp)
        bench_runs_page(work, args.runs, chromium)
        bench_metrics(work, args.steps)
        bench_log_latency(work, args.log_lines, chromium)
    print(f"\nload average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
