"""The health gate's meeting of all ranks (issue 38: under 30 s for 64 ranks): N processes,
each one rank, run launcher.entrypoint.preflight.rendezvous (the standard library's
stand-in for the all-reduce, where torch is not importable) against rank 0 on this machine;
the figure is from the first process's start to the last one's answer, Python start-up
included. Where torch is importable, the same N ranks run the gloo all-reduce of the gate
(--torch). Devices are not checked here (no GPU): bench_gpu.py's machine runs the gate there.

    .venv/bin/python bench/bench_preflight.py [--ranks 64] [--torch] [--quick] [--rows FILE]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

RANK = """
import sys
from launcher.entrypoint.preflight import rendezvous
answer = rendezvous("127.0.0.1", int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), False, 60.0)
sys.exit(0 if answer == 0 else 1)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gate(ranks: int, use_torch: bool) -> float:
    port = free_port()
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    began = time.monotonic()
    if use_torch:
        from launcher.entrypoint.preflight import _TORCH_GATE

        argv = lambda r: [sys.executable, "-c", _TORCH_GATE, str(r), str(ranks), "0", "60"]  # noqa: E731
    else:
        argv = lambda r: [sys.executable, "-c", RANK, str(port), str(r), str(ranks)]  # noqa: E731
    procs = [subprocess.Popen(argv(r), env=env, stdout=subprocess.DEVNULL) for r in range(ranks)]
    codes = [p.wait(timeout=120) for p in procs]
    spent = time.monotonic() - began
    assert codes == [0] * ranks, codes
    return spent


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from rows import Row, add_row_args, write_rows

    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--torch", action="store_true", help="the gloo all-reduce (torch must import)")
    add_row_args(parser)
    args = parser.parse_args()
    how = "gloo all-reduce" if args.torch else "standard-library rendezvous"
    spent = gate(args.ranks, args.torch)
    print(f"{args.ranks} ranks, {how}: {spent:.2f} s from the first start to the last answer (goal < 30 s)")
    write_rows(
        args, [Row(f"health gate, {args.ranks} ranks ({how})", "-", f"{spent:.2f} s", None, "< 30 s", spent < 30)]
    )


if __name__ == "__main__":
    main()
