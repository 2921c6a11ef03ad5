"""Round trip of `launcher exec RUN -- true` (a fresh process, as a user runs it) on the local
backend: a sleeping run with a private mount namespace, which each exec joins. Printed: the
median and worst wall time of the CLI, and of the SDK's exec_in_run in this process (what the
backend itself costs, without the interpreter's start). The Kubernetes rows (our client and
kubectl exec against the fake cluster) come with the Kubernetes backend's exec.

    .venv/bin/python bench/bench_exec.py [--repeat 10]
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def timed(fn, repeat: int) -> tuple[float, float]:
    walls = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t)
    return statistics.median(walls), max(walls)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        os.environ["LAUNCHER_HOME"] = str(home)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        cli = [sys.executable, "-m", "launcher"]
        spec = Path(tmp) / "sleeper.yaml"
        spec.write_text("name: bench-exec\ncommand: sleep 300\nscheduling: {max_duration: 0.1}\n")
        subprocess.run([*cli, "run", "-f", str(spec)], env=env, check=True, capture_output=True, cwd=tmp)
        name = json.loads(subprocess.run([*cli, "get", "runs", "-o", "json"], env=env, check=True,
                                         capture_output=True, text=True).stdout)[0]["name"]
        mode = json.loads((home / "runs" / name / "mounts.json").read_text())["mode"]
        try:
            from launcher.sdk.attach import exec_in_run

            assert exec_in_run(name, ["true"]) == 0  # waits for the rank's command: not timed
            sdk = timed(lambda: exec_in_run(name, ["true"]), args.repeat)
            run_cli = timed(lambda: subprocess.run([*cli, "exec", name, "--", "true"], env=env, check=True),
                            args.repeat)
        finally:
            subprocess.run([*cli, "stop", "run", "-y", name], env=env, capture_output=True)
    print(f"exec -- true on the local backend ({mode} mounts), {args.repeat} times:")
    print(f"  launcher exec (CLI process)   median {ms(run_cli[0])}  worst {ms(run_cli[1])}")
    print(f"  sdk exec_in_run (in process)  median {ms(sdk[0])}  worst {ms(sdk[1])}")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms"


if __name__ == "__main__":
    main()
