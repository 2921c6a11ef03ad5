"""What /mnt/config costs a local run: choosing the mount plan at submit (a probe in a
forked child), and starting a rank through the namespace wrapper instead of directly.

    .venv/bin/python bench/bench_local_mounts.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from launcher.backends.local.mounts import MountPlan, plan_mounts


def _ms(times: list[float]) -> str:
    return f"median {statistics.median(times) * 1000:.1f} ms, max {max(times) * 1000:.1f} ms"


def main(runs: int = 20) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config"
        config.mkdir()
        (config / "parameters.yaml").write_text("a: 1\n")
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            plan = plan_mounts(config, {})
            times.append(time.perf_counter() - t)
        print(f"plan_mounts ({plan.mode}{': ' + plan.reason if plan.reason else ''}): {_ms(times)} over {runs}")
        if plan.mode != "namespace":
            return
        plan_file = Path(tmp) / "mounts.json"
        MountPlan("namespace", [(str(config), "/mnt/config")]).save(plan_file)
        direct = [sys.executable, "-c", "pass"]
        wrapped = [sys.executable, "-m", "launcher.backends.local.mounts", str(plan_file), "--",
                   sys.executable, "-c", "open('/mnt/config/parameters.yaml').read()"]
        for label, cmd in (("rank start, direct", direct), ("rank start, namespace wrapper", wrapped)):
            subprocess.run(cmd, check=True)
            times = []
            for _ in range(runs):
                t = time.perf_counter()
                subprocess.run(cmd, check=True)
                times.append(time.perf_counter() - t)
            print(f"{label}: {_ms(times)} over {runs}")


if __name__ == "__main__":
    main()
