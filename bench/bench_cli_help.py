"""Wall time of `launcher --help` (goal: under 0.15 s), and the heavy modules it must not import.

    .venv/bin/python bench/bench_cli_help.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

HEAVY = ("torch", "kubernetes", "databricks", "composer", "streaming", "transformers", "matplotlib", "pydantic")


def main(runs: int = 20) -> None:
    cmd = [sys.executable, "-m", "launcher", "--help"]
    subprocess.run(cmd, capture_output=True, check=True)  # warm the page cache
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True)
        times.append(time.perf_counter() - t)
    trace = subprocess.run([sys.executable, "-X", "importtime", *cmd[1:]], capture_output=True, text=True).stderr
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in trace.splitlines() if "|" in line}
    heavy = sorted(imported & set(HEAVY))
    print(f"launcher --help: median {statistics.median(times) * 1000:.0f} ms, "
          f"min {min(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms over {runs} runs (goal < 150 ms)")
    print(f"heavy modules imported: {', '.join(heavy) or 'none'}")


if __name__ == "__main__":
    main()
