"""Every benchmark in quick mode, one table: measure, yardstick, ours, ratio, goal.

    .venv/bin/python bench/all.py [--only NAME ...] [--out bench/RESULTS.md] [--full]

Each benchmark below is run as its own program with `--quick --rows FILE` (bench/rows.py),
one after another (they would disturb each other's timings), each with a time limit. The
table is printed and written, with a description of the machine and its load before and
after, to bench/RESULTS.md. A benchmark that fails or runs out of time is a row that says
so, not a missing row. `--full` runs them without --quick (tens of minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from rows import Row  # noqa: E402

BENCH = Path(__file__).parent
ROOT = BENCH.parent


@dataclass(frozen=True)
class Benchmark:
    name: str
    script: str
    limit_s: float
    """How long its quick mode may take before it is stopped."""
    args: tuple[str, ...] = ()


BENCHMARKS = (
    Benchmark("startup", "bench_startup.py", 300),
    Benchmark("logs", "bench_entrypoint_logs.py", 600),
    Benchmark("watch", "bench_watch.py", 300),
    Benchmark("preflight", "bench_preflight.py", 300),
    Benchmark("trainer", "bench_trainer.py", 900),
    Benchmark("data", "bench_data_convert.py", 900),
    Benchmark("placement", "bench_placement.py", 300),
    Benchmark("history", "bench_history.py", 900),
    Benchmark("gpu", "bench_gpu.py", 900),
)


def machine() -> dict[str, str]:
    """What the numbers were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f"{kib / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    gpu = "none"
    if shutil.which("nvidia-smi"):
        done = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30)
        gpu = ", ".join(done.stdout.split("\n")).strip(", ") or "none"
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    return {"cpu": cpu, "cores": str(os.cpu_count()), "memory": memory, "gpu": gpu,
            "os": f"{platform.system()} {platform.release()}", "python": platform.python_version(),
            "commit": commit or "unknown"}


def load() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def run_one(bench: Benchmark, full: bool) -> tuple[list[Row], float]:
    """Its rows, and how long it took."""
    script = BENCH / bench.script
    started = time.monotonic()
    if not script.exists():
        return [Row(bench.name, "", f"not run: {bench.script} is missing", None, "", None)], 0.0
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.json"
        argv = [sys.executable, str(script), *([] if full else ["--quick"]), "--rows", str(out), *bench.args]
        try:
            done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=bench.limit_s)
        except subprocess.TimeoutExpired:
            return [Row(bench.name, "", f"not finished within {bench.limit_s:.0f}s", None, "", None)], bench.limit_s
        took = time.monotonic() - started
        sys.stdout.write(done.stdout)
        if out.exists():  # rows, even from a benchmark that says why it could not run (no GPU)
            return [Row(**r) for r in json.loads(out.read_text())], took
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return [Row(bench.name, "", f"failed (exit {done.returncode}): {last[:160]}", None, "", None)], took


def ratio_text(row: Row) -> str:
    return "" if row.ratio is None else f"{row.ratio:.2f}×"


def met_text(row: Row) -> str:
    return {True: "yes", False: "no", None: ""}[row.met]


def table(rows: list[Row]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|")
    lines = ["| measure | yardstick | ours | ratio | goal | met |", "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {cell(r.measure)} | {cell(r.yardstick)} | {cell(r.ours)} | {ratio_text(r)} | {cell(r.goal)} | "
              f"{met_text(r)} |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", action="append", choices=[b.name for b in BENCHMARKS], help="run only these (repeatable)")
    p.add_argument("--out", type=Path, default=BENCH / "RESULTS.md", help="where to write the table")
    p.add_argument("--full", action="store_true", help="run each benchmark in its full mode, not --quick")
    args = p.parse_args()
    chosen = [b for b in BENCHMARKS if not args.only or b.name in args.only]
    host, load_before, began = machine(), load(), datetime.now(timezone.utc)
    rows, times = [], []
    for bench in chosen:
        print(f"== {bench.name}: {bench.script}", flush=True)
        got, took = run_one(bench, args.full)
        rows += got
        times.append(f"{bench.name} {took:.0f} s")
    text = table(rows)
    print()
    print(text)
    described = ", ".join(f"{k} {v}" for k, v in host.items())
    args.out.write_text(
        "# Benchmark results\n\n"
        f"Written by `bench/all.py{' --full' if args.full else ''}` on {began:%Y-%m-%d %H:%M} UTC: "
        f"{'full' if args.full else 'quick'} mode, one benchmark at a time.\n\n"
        f"Machine: {described}. Load average (1, 5, 15 min) before: {load_before}; after: {load()}.\n"
        f"Time per benchmark: {', '.join(times)}.\n\n"
        "A ratio is ours against the yardstick, stated the way the goal is (for a throughput, ours / "
        "yardstick: above 1 is faster; for a wall time, ours / yardstick: below 1 is faster).\n\n"
        f"{text}\n")
    print(f"\nwritten to {args.out}")


if __name__ == "__main__":
    main()
