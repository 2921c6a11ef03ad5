"""`launcher logs RUN > file` on a 200 MB log, against `cat` of the same log file.
Goal: >= 200 MB/s.

Submits a local run (in a private LAUNCHER_HOME, with two secrets, so reading masks
too) whose command prints 2 million 100-byte lines, waits for it, then times the
whole `launcher logs` process (Python start-up included) writing to a file.

    .venv/bin/python bench/bench_logs_read.py [--lines 2000000] [--repeat 3] [--records-every K]

--records-every K makes every K-th line a metric record (@@launcher.metrics ...), which
`launcher logs` leaves out (--raw shows them): what hiding them costs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LAUNCHER = [sys.executable, "-m", "launcher"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--records-every", type=int, default=0, metavar="K")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        env = {**os.environ, "LAUNCHER_HOME": str(tmp / "home")}

        def launcher(*a: str, **kw) -> subprocess.CompletedProcess:
            return subprocess.run([*LAUNCHER, *a], env=env, cwd=tmp, check=True, **kw)

        for key, value in (("HF_TOKEN", "hf_bench_aaaaaaaaaaaaaaaaaaaaaaaa"), ("OTHER_TOKEN", "bench-other-value-22")):
            launcher("secret", "create", "env", key, input=value, text=True, capture_output=True)
        spec = tmp / "spec.yaml"
        every = args.records_every
        records = (f" | awk 'NR % {every} == 0 {{print \"@@launcher.metrics {{\\\"step\\\":\" NR \"}}\"; next}} {{print}}'"
                   if every else "")
        spec.write_text(f"name: logbench\ncommand: |\n  yes \"$(printf 'y%.0s' $(seq 99))\" | head -n {args.lines}{records}\n")
        launcher("run", "-f", str(spec), "--follow", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        name = json.loads(launcher("describe", "run", "-o", "json", capture_output=True).stdout)["name"]
        log = tmp / "home" / "runs" / name / "attempt-1" / "rank-0.log"
        size = log.stat().st_size
        out = tmp / "out.log"

        def timed(argv: list[str]) -> float:
            best = None
            for _ in range(args.repeat):
                began = time.monotonic()
                with open(out, "wb") as f:
                    subprocess.run(argv, stdout=f, env=env, cwd=tmp, check=True)
                took = time.monotonic() - began
                best = took if best is None else min(best, took)
            return best

        cat = timed(["cat", str(log)])
        ours = timed([*LAUNCHER, "logs", name])
        kept = out.stat().st_size
        hidden = size * (1 / every if every else 0)
        assert kept >= size - hidden * 1.1 - 1000, (kept, size)
        mb = size / 1e6
        what = f", every {every}th line a record" if every else ""
        print(f"log of {mb:.0f} MB{what}, best of {args.repeat}: cat {mb / cat:.0f} MB/s ({cat:.2f}s); "
              f"launcher logs {mb / ours:.0f} MB/s ({ours:.2f}s, Python start-up included; {kept / 1e6:.0f} MB out)")


if __name__ == "__main__":
    main()
