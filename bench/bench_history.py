"""Listings against a long history: `launcher get runs` (its default 50 rows) and
`launcher describe RUN` (the oldest run) as fresh processes, as a user runs them (the
best of --repeat walls), with
N runs in the history, for N in 100, 1,000 and 10,000 (--quick: 100 and 1,000), on the
local backend and on the fake cluster; each time and its ratio to N=100.
Goal: 50 rows at 10,000 within 1.5x of at 100. With Debian's chromium and playwright (the dev
extra), also the dashboard: `launcher ui` on the history, the runs page in headless chromium
(as tests/ui drives it), from navigation to its script having run (the table drawn, its rows
wired, its update stream opened: the `runs-interactive` mark of static/runs.js), the best of
--repeat navigations, each more than a second apart (the dashboard keeps a page a second).
Goal: under 1 s at 10,000 runs.

The history is built through the launcher's own submit path (the SDK's create_run, as
`launcher run` submits; the command `true`), never by writing a database: on the local
backend each run has its supervisor and ends COMPLETED; on the fake cluster (the program
tests/fakes/kube_api.py, run with --no-controllers so that 10,000 JobSets start no pods)
each run is its record ConfigMap and its JobSet, as a submit leaves them. Each size adds
runs to the same history.

    .venv/bin/python bench/bench_history.py [--quick] [--sizes 100 1000 10000]
        [--where local kubernetes] [--repeat 5] [--rows FILE] [--reuse N:HOME]

--reuse N:HOME measures size N on HOME, a history of N runs this script built before (a
LAUNCHER_HOME; a copy, since the listings bring it up to date), instead of building one:
10,000 local runs take half an hour to an hour to submit on a busy 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))
from rows import Row, add_row_args, write_rows  # noqa: E402

ROWS = 50
GOAL = 1.5
DASHBOARD_GOAL = 1.0
SPEC = {"name": "hist", "image": "ghcr.io/example/launcher:test", "command": "true", "compute": {"gpu_type": "none"}}


def launcher(home: Path, *args: str) -> tuple[float, subprocess.CompletedProcess]:
    env = {**os.environ, "LAUNCHER_HOME": str(home), "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "launcher", *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"launcher {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    return took, done


def best_wall(home: Path, repeat: int, *args: str, rows: int | None = None) -> float:
    """The shortest of `repeat` wall times: on a machine shared with other work, what the
    command costs when nothing else interferes (a median moved by 30 % from run to run)."""
    walls = []
    for _ in range(repeat):
        took, done = launcher(home, *args)
        if rows is not None:
            shown = len(done.stdout.splitlines()) - 1  # the header
            if shown != rows:
                raise SystemExit(f"launcher {' '.join(args)} showed {shown} rows, not {rows}")
        walls.append(took)
    return min(walls)


def build(home: Path, count: int, where: str) -> float:
    """Submit `count` more runs through the SDK (in a child process, so that this one
    imports nothing of the launcher's) and wait until none is active; its wall time."""
    target = "backend='local'" if where == "local" else "cluster='fake'"
    code = (
        "import sys, time\n"
        "from launcher import sdk\n"
        f"for _ in range({count}):\n"
        f"    sdk.create_run({SPEC!r}, {target})\n"
        "if sys.argv[1] == 'local':\n"
        "    active = [s for s in sdk.RunStatus if not s.is_terminal]\n"
        "    while sdk.get_runs(status=active, limit=1):\n"
        "        time.sleep(0.5)\n"
    )
    env = {**os.environ, "LAUNCHER_HOME": str(home), "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, where], env=env, cwd=ROOT, check=True, timeout=6 * 3600)
    return time.perf_counter() - started


def oldest(home: Path) -> str:
    _, done = launcher(home, "get", "runs", "--limit", "100000", "-o", "name")
    return done.stdout.split()[-1]


def dashboard_time(home: Path, repeat: int, rows: int) -> float | None:
    """The runs page in headless chromium, navigation to interactive, the best of `repeat`;
    None without chromium or playwright."""
    from tests.ui.browser import browser, chromium_path, dashboard

    chromium = chromium_path()
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        chromium = None
    if chromium is None:
        print("dashboard: not measured (needs Debian's chromium and playwright)", flush=True)
        return None
    times = []
    with dashboard(home, "--no-token", timeout=120) as url, browser(chromium) as b:
        page = b.new_page()
        for _ in range(repeat + 1):  # the first opens the backends: not counted
            time.sleep(1.2)  # past the page's max_age: each navigation lists it again
            page.goto(url, wait_until="load")
            page.wait_for_selector("tr[data-run]")
            mark = None
            for _ in range(200):
                mark = page.evaluate("performance.getEntriesByName('runs-interactive')[0]?.startTime ?? null")
                if mark is not None:
                    break
                time.sleep(0.05)
            shown = page.locator("tr[data-run]").count()
            if mark is None or shown != rows:
                raise SystemExit(f"the runs page showed {shown} rows, not {rows}, or never became interactive")
            times.append(mark / 1000)
    return min(times[1:])


def measure(where: str, sizes: list[int], repeat: int, reuse: dict[int, Path] | None = None) -> list[tuple]:
    """(N, get runs, describe: the best of `repeat` walls, dashboard) for each size, on one
    growing history (or the one `reuse` names for that size)."""
    home = Path(tempfile.mkdtemp(prefix=f"bench-history-{where}-"))
    kube = None
    if where == "kubernetes":
        from tests.fakes.kube.fixtures import KubeProgram, write_profile

        kube = KubeProgram(Path(tempfile.mkdtemp(prefix="bench-history-kube-")), "--no-controllers")
        write_profile(home, kube, entrypoint_mode="image")
    out = []
    first = ""
    try:
        have = 0
        for n in sizes:
            at = home
            if reuse and n in reuse:
                at = reuse[n]
                print(f"{where}: the history of {n} runs in {at}, built before", flush=True)
            else:
                built = build(home, n - have, where)
                print(f"{where}: {n - have} runs submitted in {built:.0f} s ({built / (n - have) * 1000:.0f} ms each)",
                      flush=True)
                have = n
            first = oldest(at) if at != home or not first else first
            listing = best_wall(at, repeat, "get", "runs", rows=min(ROWS, n))
            describe = best_wall(at, repeat, "describe", first)
            board = dashboard_time(at, repeat, min(ROWS, n)) if where == "local" else None
            out.append((n, listing, describe, board))
            shown = f", dashboard {board:.2f} s" if board is not None else ""
            print(f"{where} N={n:>6}: get runs ({min(ROWS, n)} rows) {listing:.2f} s, describe {describe:.2f} s{shown} "
                  f"(ratio to N={sizes[0]}: {listing / out[0][1]:.2f}x, {describe / out[0][2]:.2f}x)"
                  f"  load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        if kube is not None:
            kube.stop()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_row_args(p)
    p.add_argument("--sizes", type=int, nargs="+")
    p.add_argument("--where", nargs="+", choices=["local", "kubernetes"], default=["local", "kubernetes"])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--reuse", action="append", default=[], metavar="N:HOME",
                   help="measure size N on HOME, a history of N runs built before by this script (local)")
    args = p.parse_args()
    reuse = {int(n): Path(h) for n, _, h in (r.partition(":") for r in args.reuse)}
    sizes = args.sizes or ([100, 1000] if args.quick else [100, 1000, 10000])
    rows = []
    for where in args.where:
        results = measure(where, sizes, args.repeat, reuse if where == "local" else None)
        n0, list0, desc0, board0 = results[0]
        backend = "the local backend" if where == "local" else "the fake cluster"
        if board0 is not None:
            rows.append(Row(f"dashboard runs page interactive in chromium ({ROWS} rows), {n0:,} runs on {backend}",
                            "-", f"{board0 * 1000:.0f} ms", None, f"< {DASHBOARD_GOAL:g} s at 10,000 runs", None))
        for n, listing, describe, board in results[1:]:
            if board is not None:
                rows.append(Row(f"dashboard runs page interactive in chromium ({ROWS} rows), {n:,} runs on {backend}",
                                f"{n0:,} runs: {board0 * 1000:.0f} ms", f"{board * 1000:.0f} ms",
                                round(board / board0, 2), f"< {DASHBOARD_GOAL:g} s at 10,000 runs",
                                board < DASHBOARD_GOAL if n == 10000 else None))
            ratio = listing / list0
            rows.append(Row(f"`launcher get runs` ({ROWS} rows), {n:,} runs on {backend}",
                            f"{n0:,} runs: {list0 * 1000:.0f} ms", f"{listing * 1000:.0f} ms", round(ratio, 2),
                            f"<= {GOAL}x at 10,000 runs", ratio <= GOAL if n == 10000 else None))
            rows.append(Row(f"`launcher describe RUN` (the oldest), {n:,} runs on {backend}",
                            f"{n0:,} runs: {desc0 * 1000:.0f} ms", f"{describe * 1000:.0f} ms",
                            round(describe / desc0, 2), "reported (flat in the history)", None))
    write_rows(args, rows)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
