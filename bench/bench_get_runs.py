"""Wall time of `launcher get runs` (a fresh process, as a user runs it) with the local
backend only, and with one and two unreachable cluster profiles added: one whose
server refuses connections, one whose connect hangs (what an unreachable IP does).

Every profile is asked at once with a 0.5 s connect timeout and no second try of a
failed connection, so the unreachable ones should cost about that once, not a turn
each. Goal: under 1 s on an idle machine. On a busy one the wall time grows with the
load; the CPU time shows what the command itself costs.

Then, against the fake API server (run as a program) with one Kubernetes profile,
`run -f runspecs/hello.yaml --dry-run --backend kubernetes`, `run` and `get runs`
with LAUNCHER_DEBUG=1: what each read (config.yaml, profiles parsed, kubeconfigs;
goal: 1 each per profile, the debug counter's totals) and the wall time.

    .venv/bin/python bench/bench_get_runs.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def time_get_runs(home: Path, repeat: int) -> tuple[float, float, float, str]:
    """Median and worst wall time, median CPU time (user + system: what the wall time
    would be on an idle machine, less any connect wait), and the last stderr."""
    env = {**os.environ, "LAUNCHER_HOME": str(home)}
    walls, cpus = [], []
    err = ""
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "launcher", "get", "runs"], env=env, cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        err = r.stderr
    return statistics.median(walls), max(walls), statistics.median(cpus), err


COUNTED = "debug: counted: "


def counted_reads(home: Path, repeat: int) -> None:
    """Per command: the reads the debug counter totals, and the median wall time."""
    from tests.fakes.kube.fixtures import KubeProgram, write_profile

    workdir = Path(tempfile.mkdtemp(prefix="bench-get-runs-kube-"))
    kube = KubeProgram(workdir)
    try:
        write_profile(home, kube)
        env = {**os.environ, "LAUNCHER_HOME": str(home), "LAUNCHER_DEBUG": "1"}
        spec = str(ROOT / "runspecs" / "hello.yaml")
        for args in (["run", "-f", spec, "--dry-run", "--backend", "kubernetes"],
                     ["run", "-f", spec, "--backend", "kubernetes"], ["get", "runs"]):
            walls, counts = [], ""
            submits = args[0] == "run" and "--dry-run" not in args
            for _ in range(1 if submits else repeat):  # one run submitted, so the listing has one
                started = time.perf_counter()
                r = subprocess.run([sys.executable, "-m", "launcher", *args], env=env, cwd=ROOT,
                                   capture_output=True, text=True, timeout=60)
                walls.append(time.perf_counter() - started)
                if r.returncode != 0:
                    raise SystemExit(f"launcher {' '.join(args)} exited {r.returncode}: {r.stderr[-2000:]}")
                counts = next((line[len(COUNTED):] for line in r.stderr.splitlines() if line.startswith(COUNTED)),
                              "(no counter)").replace(str(home), "$LAUNCHER_HOME")
            shown = " ".join(a if a != spec else "hello.yaml" for a in args)
            print(f"{shown:52s} wall median {statistics.median(walls):.2f} s  {counts}")
    finally:
        kube.stop()


def main() -> None:
    from tests.fakes.kube.faults import unreachable_server
    from tests.kubernetes.test_api_faults import add_profile

    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    home = Path(tempfile.mkdtemp(prefix="bench-get-runs-"))
    with contextlib.ExitStack() as stack:
        refused = stack.enter_context(unreachable_server("refused"))
        stalled = stack.enter_context(unreachable_server("stalled"))
        for label, profiles in (("local only", []), ("+ refused", [("refused", refused)]),
                                ("+ refused + stalled", [("refused", refused), ("stalled", stalled)])):
            for name, url in profiles:
                add_profile(home, name, url)
            median, worst, cpu, err = time_get_runs(home, args.repeat)
            warnings = sum(1 for line in err.splitlines() if line.startswith("!"))
            print(f"get runs, {label:22s} wall median {median:.2f} s  max {worst:.2f} s  "
                  f"cpu {cpu:.2f} s  warnings {warnings}")
    counted_reads(Path(tempfile.mkdtemp(prefix="bench-get-runs-counted-")), args.repeat)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
