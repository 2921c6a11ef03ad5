"""What a locked change of a launcher home state file costs (launcher.homefile.update: flock,
temporary file, fsync, rename): one process alone, and 16 processes changing one file at once.

    .venv/bin/python bench/bench_homefile.py
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from launcher import homefile

WRITERS = 16
CHANGES = 50
WRITER = """
import json, sys
from pathlib import Path
from launcher import homefile
path, name, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
for i in range(n):
    homefile.update(path, lambda raw: json.dumps({**json.loads(raw or b"{}"), f"{name}-{i}": "x" * 64}).encode())
"""


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "secrets.json"
        times = []
        for i in range(200):
            t = time.perf_counter()
            homefile.update(path, lambda raw: json.dumps({**json.loads(raw or b"{}"), str(i): "x" * 64}).encode(),
                            mode=0o600)
            times.append(time.perf_counter() - t)
        print(f"one process: median {statistics.median(times) * 1000:.2f} ms a change, "
              f"max {max(times) * 1000:.2f} ms over {len(times)} (a 200-record file at the end)")

        path = Path(tmp) / "shared.json"
        t = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"w{w}", str(CHANGES)])
                 for w in range(WRITERS)]
        codes = [p.wait() for p in procs]
        took = time.perf_counter() - t
        kept = len(json.loads(path.read_text()))
        print(f"{WRITERS} processes x {CHANGES} changes: {took:.2f} s in all (process starts included), "
              f"{kept} of {WRITERS * CHANGES} changes kept, exit codes {sorted(set(codes))}")


if __name__ == "__main__":
    main()
