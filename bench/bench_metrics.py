"""How long `launcher metrics -o json` and `--plot` take on a run of 100k steps, recovered from its logs.

Submits a run to the local backend (in a private LAUNCHER_HOME) whose command prints
what the trainer prints: a fit_start record, then per step one metrics record with the
metrics Composer logs, among noise lines. Then it times `launcher metrics -o json`
twice: the first call parses the log, the second one reads the cached index.

    .venv/bin/python bench/bench_metrics.py [--steps 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LAUNCHER = [sys.executable, "-m", "launcher"]

# Writes the log the way the trainer does (rank 0 only, one record per step), with the
# metric names Composer's callbacks use, plus the noise a real log has.
PRINTER = r"""
import json, math, sys
steps = int(sys.argv[1])
out = sys.stdout
P = "@@launcher.metrics "
t0 = 1764000000.0
out.write(P + json.dumps({"event": "fit_start", "step": 0, "time": t0, "rank": 0,
                          "max_duration": f"{steps}ba", "max_batches": steps}) + "\n")
for s in range(1, steps + 1):
    if s % 10 == 0:
        out.write(f"[batch={s}/{steps}]: Train time/batch: {s} Train loss/train/total: 2.5\n")
    loss = 2.0 + 8.0 * math.exp(-s / 20000) + 0.05 * math.sin(s)
    m = {"loss/train/total": loss, "throughput/batches_per_sec": 1.9, "throughput/samples_per_sec": 15.2,
         "throughput/device/batches_per_sec": 1.9, "throughput/device/samples_per_sec": 15.2,
         "throughput/tokens_per_sec": 15564.8, "throughput/device/tokens_per_sec": 15564.8,
         "lr-DecoupledAdamW/group0": 0.0006 * min(1.0, s / 1000), "time/sample": 8.0 * s, "time/epoch": 0.0,
         "time/token": 8192.0 * s}
    out.write(P + json.dumps({"step": s, "time": round(t0 + 0.52 * s, 3), "rank": 0, "metrics": m}) + "\n")
"""


def launcher(*args: str, env: dict[str, str], cwd: Path, stdout=subprocess.DEVNULL) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one `launcher` call. The CPU time says
    what the call costs even when other work shares the machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([*LAUNCHER, *args], env=env, cwd=cwd, check=True, stdout=stdout)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def best(calls: list[tuple[float, float]]) -> str:
    wall, cpu = min(calls)
    return f"{wall:.3f} s wall, {cpu:.3f} s CPU"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3, help="repeated calls to time (the best is printed)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "LAUNCHER_HOME": str(work / "home")}
        (work / "printer.py").write_text(PRINTER)
        (work / "spec.yaml").write_text(
            "name: bench-metrics\nimage: x\n"
            f"command: {sys.executable} printer.py {args.steps}\n"
            "compute: {gpus: 0}\n"
        )
        took, _ = launcher("run", "-f", "spec.yaml", "--follow", env=env, cwd=work)
        log = next((work / "home" / "runs").glob("bench-metrics-*/attempt-1/rank-0.log"))
        print(f"run with {args.steps} steps written in {took:.1f} s; log {log.stat().st_size / 1e6:.1f} MB")

        out = work / "points.json"
        with open(out, "w") as f:
            first = launcher("metrics", "-o", "json", env=env, cwd=work, stdout=f)
        points = json.loads(out.read_text())
        assert len(points) == args.steps, f"expected {args.steps} points, got {len(points)}"
        repeated = [launcher("metrics", "-o", "json", env=env, cwd=work) for _ in range(args.repeat)]
        table = [launcher("metrics", env=env, cwd=work) for _ in range(args.repeat)]
        plot = [launcher("metrics", "--plot", env=env, cwd=work) for _ in range(args.repeat)]
        startup = [launcher("--help", env=env, cwd=work) for _ in range(args.repeat)]
        print(f"launcher metrics -o json, first call (parses the log):  {best([first])}")
        print(f"launcher metrics -o json, repeated call (cached index): {best(repeated)}")
        print(f"launcher metrics (table), repeated call:                {best(table)}")
        print(f"launcher metrics --plot (the curve sampled), repeated:  {best(plot)} (goal: under 2 s)")
        print(f"launcher --help (interpreter and CLI start-up):         {best(startup)}")
        print(f"load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")

if __name__ == "__main__":
    main()
