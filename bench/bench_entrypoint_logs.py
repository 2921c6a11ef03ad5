"""The entrypoint's log throughput: a command printing 2 million 100-byte lines, run
through `python -m launcher.entrypoint` with masking on (three secret values, one of
them multi-line) and its stdout a file, as on the local backend, against the same
command writing straight to a file. Goal: >= 0.8x.

The command times itself (from its first to its last line written), so the figure is
what the command sees: how fast the pipeline takes its output. The entrypoint's total
wall time (Python start-up and the final drain included) is printed too.

    .venv/bin/python bench/bench_entrypoint_logs.py [--lines 2000000] [--repeat 3]
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

GENERATORS = {
    # A Python program printing line by line, as a training script does.
    "python print": "{python} -c \"line = 'x' * 99\nfor _ in range({n}): print(line)\"",
    # As fast as a pipe can be filled: the hardest case for the pipeline.
    "yes | head": "yes \"$(printf 'y%.0s' $(seq 99))\" | head -n {n}",
}

# Two env tokens, as most runs have (HF_TOKEN, a W&B key); then the same with a
# multi-line key too, masked whole and line by line.
SECRET_SETS = {
    "2 tokens": {"TOKEN_A": "hf_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "TOKEN_B": "bench-secret-value-2"},
    "2 tokens + 4-line key": {"TOKEN_A": "hf_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "TOKEN_B": "bench-secret-value-2",
                              "KEY_C": "-----BEGIN KEY-----\nline-one-of-the-key\nline-two-of-the-key\n-----END KEY-----"},
}


def timed_command(generator: str, stamps: Path) -> str:
    return f"date +%s.%N > {stamps}.0; {generator}; date +%s.%N > {stamps}.1"


def command_seconds(stamps: Path) -> float:
    return float(Path(f"{stamps}.1").read_text()) - float(Path(f"{stamps}.0").read_text())


def cpu_seconds() -> float:
    """CPU time of every child process waited for so far (their children included)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def direct(cmd: str, tmp: Path) -> tuple[float, float, float]:
    stamps = tmp / "direct"
    out = tmp / "direct.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # as the entrypoint sets it for every command
    began, cpu = time.monotonic(), cpu_seconds()
    with open(out, "wb") as f:
        subprocess.run(["bash", "-c", timed_command(cmd, stamps)], stdout=f, env=env, check=True)
    wall, cpu = time.monotonic() - began, cpu_seconds() - cpu
    size = out.stat().st_size
    out.unlink()
    return size / command_seconds(stamps), size / wall, cpu


def through_entrypoint(cmd: str, tmp: Path, secrets: dict[str, str],
                       extra_env: dict[str, str] | None = None) -> tuple[float, float, float]:
    """(MB/s the command saw, MB/s of the entrypoint's wall time, CPU seconds); `extra_env`
    for the entrypoint too (bench_log_archive.py: LAUNCHER_LOG_ARCHIVE)."""
    stamps = tmp / "entry"
    spec = tmp / "spec.json"
    spec.write_text(json.dumps({"name": "bench", "command": timed_command(cmd, stamps)}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAUNCHER_", "MASTER_"))}
    env.update(secrets)
    env.update({"LAUNCHER_SPEC": str(spec), "LAUNCHER_BACKEND": "local", "LAUNCHER_CONFIG_DIR": str(tmp / "config"),
                "LAUNCHER_WORKDIR": str(tmp), "LAUNCHER_NODES": "1", "NODE_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": "29500", "LAUNCHER_MASK_ENV": ",".join(secrets)})
    env.update(extra_env or {})
    out = tmp / "entry.log"
    began, cpu = time.monotonic(), cpu_seconds()
    with open(out, "wb") as f:
        subprocess.run([sys.executable, "-m", "launcher.entrypoint"], stdout=f, stderr=subprocess.STDOUT,
                       env=env, cwd=tmp, check=True)
    wall, cpu = time.monotonic() - began, cpu_seconds() - cpu
    size = out.stat().st_size
    out.unlink()
    return size / command_seconds(stamps), size / wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    mb = 1e6
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        print(f"{args.lines} lines of 100 bytes ({args.lines * 100 / mb:.0f} MB), best of {args.repeat}")
        for name, template in GENERATORS.items():
            cmd = template.format(n=args.lines, python=sys.executable)
            base = max(direct(cmd, tmp) for _ in range(args.repeat))
            print(f"{name}: to a file {base[0] / mb:.0f} MB/s ({base[2]:.2f} CPU-s)")
            for label, secrets in SECRET_SETS.items():
                ours = max(through_entrypoint(cmd, tmp, secrets) for _ in range(args.repeat))
                print(f"  through the entrypoint, masking {label}: {ours[0] / mb:.0f} MB/s = {ours[0] / base[0]:.2f}x"
                      f"  (wall time, start-up and drain included: {ours[1] / mb:.0f} vs {base[1] / mb:.0f} MB/s"
                      f" = {ours[1] / base[1]:.2f}x; {ours[2]:.2f} CPU-s)")


if __name__ == "__main__":
    main()
