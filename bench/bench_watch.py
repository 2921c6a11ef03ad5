"""The cost of watching (issue 38): a trainer-like command's step time run through
`python -m launcher.entrypoint` with its watch on (resilience.hang_timeout set: evidence
lines, progress from metric records and heartbeats, the hang clock), against the same
command writing straight to a file. Goal: under 1 % on a trainer step.

Each step of the command busy-computes for --step-ms, then prints what a training loop
prints (10 log lines, a metric record, a heartbeat line); it times its own steps, and the
figure is the median step. The machine is shared: each repeat runs the yardstick and then
ours, interleaved, and the overhead is the median of each repeat's ours / its yardstick.
Also printed: Watch.feed's own throughput over 1 MiB chunks of such output (in-process).

    .venv/bin/python bench/bench_watch.py [--steps 200] [--step-ms 100] [--repeat 5] [--quick] [--rows FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TRAINER = r"""
import json, sys, time
steps, step_s, out = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
times = []
for step in range(steps):
    began = time.perf_counter()
    x = 0
    while time.perf_counter() - began < step_s:
        x += 1
    for i in range(10):
        print(f"step {step:7d} | microbatch {i} | loss {1.0 / (step + 1):.5f} | lr 3.0e-04 | tok/s 123456", flush=True)
    print("@@launcher.metrics " + json.dumps({"step": step, "time": time.time(), "rank": 0,
                                               "metrics": {"loss/train/total": 1.0 / (step + 1)}}), flush=True)
    print('@@launcher.heartbeat {"step": %d}' % step, flush=True)
    times.append(time.perf_counter() - began)
open(out, "w").write(json.dumps(times))
"""


def step_median(path: Path) -> float:
    times = json.loads(path.read_text())
    return statistics.median(times[len(times) // 10 :])  # the first tenth warms up


def direct(args, tmp: Path) -> float:
    out = tmp / "direct.json"
    with open(tmp / "direct.log", "wb") as log:
        subprocess.run(
            [sys.executable, "-c", TRAINER, str(args.steps), str(args.step_ms / 1000), str(out)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            check=True,
        )
    return step_median(out)


def through_entrypoint(args, tmp: Path) -> float:
    out = tmp / "entry.json"
    trainer = tmp / "trainer.py"
    trainer.write_text(TRAINER)
    spec = tmp / "spec.json"
    command = f"{sys.executable} {trainer} {args.steps} {args.step_ms / 1000} {out}"
    spec.write_text(json.dumps({"name": "bench", "command": command, "resilience": {"hang_timeout": 600}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAUNCHER_", "MASTER_"))}
    env.update(
        {
            "LAUNCHER_SPEC": str(spec),
            "LAUNCHER_BACKEND": "local",
            "LAUNCHER_CONFIG_DIR": str(tmp / "config"),
            "LAUNCHER_WORKDIR": str(tmp),
            "LAUNCHER_NODES": "1",
            "NODE_RANK": "0",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "29500",
        }
    )
    with open(tmp / "entry.log", "wb") as log:
        subprocess.run(
            [sys.executable, "-m", "launcher.entrypoint"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=tmp,
            check=True,
        )
    text = (tmp / "entry.log").read_text()
    assert "watching progress" in text, "the watch was not on"
    return step_median(out)


def feed_throughput() -> float:
    """MB/s of Watch.feed over 1 MiB chunks of training-log output (no evidence in it)."""
    from launcher.entrypoint.watch import Watch

    line = b"step 1234567 | microbatch 3 | loss 0.00012 | lr 3.0e-04 | tok/s 123456\n"
    record = b'@@launcher.metrics {"step": 12, "time": 1.0, "rank": 0, "metrics": {"loss": 1.0}}\n'
    chunk = (line * 10 + record) * ((1 << 20) // (len(line) * 10 + len(record)))
    watch = Watch(hang_timeout=600)
    began = time.perf_counter()
    n = 200
    for _ in range(n):
        watch.feed(chunk)
    return n * len(chunk) / (time.perf_counter() - began) / 1e6


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from rows import Row, add_row_args, write_rows

    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--step-ms", type=float, default=100.0)
    parser.add_argument("--repeat", type=int, default=5)
    add_row_args(parser)
    args = parser.parse_args()
    if args.quick:
        args.steps, args.repeat = min(args.steps, 60), min(args.repeat, 3)
    ratios, base, ours = [], [], []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for _ in range(args.repeat):
            b = direct(args, tmp)
            o = through_entrypoint(args, tmp)
            base.append(b)
            ours.append(o)
            ratios.append(o / b)
    overhead = statistics.median(ratios) - 1
    print(
        f"{args.steps} steps of {args.step_ms:g} ms, {args.repeat} repeats interleaved (medians): "
        f"to a file {statistics.median(base) * 1000:.2f} ms/step, through the watching entrypoint "
        f"{statistics.median(ours) * 1000:.2f} ms/step: overhead {overhead:+.2%} (goal < 1 %)"
    )
    mbs = feed_throughput()
    print(f"Watch.feed: {mbs:,.0f} MB/s over 1 MiB chunks of training-log output")
    write_rows(
        args,
        [
            Row(
                "trainer step through the watching entrypoint",
                f"to a file {statistics.median(base) * 1000:.1f} ms",
                f"{statistics.median(ours) * 1000:.1f} ms",
                round(1 + overhead, 4),
                "< 1.01x",
                overhead < 0.01,
            ),
            Row("Watch.feed throughput", "-", f"{mbs:,.0f} MB/s", None, "reported"),
        ],
    )


if __name__ == "__main__":
    main()
