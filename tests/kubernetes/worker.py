"""A stand-in for a distributed training program, run by the fake kubelet's pods.

Stdlib only, so a pod starts fast. Node rank 0 listens on MASTER_PORT (as torch's
store would) until every other rank's entrypoint has connected to it, or the work
is done. Every rank prints numbered lines; options make one rank fail, print a
secret, or run until stopped.

    python worker.py --lines 20 --interval 0.01 [--fail-rank 1 --fail-code 3 --fail-attempt 1]
                     [--print-env NAME] [--print-file PATH] [--forever] [--metrics] [--sync-dir DIR]

--sync-dir: each rank notes there how many lines it printed, and the failing rank fails only
once every rank printed as many as it did (a directory all pods see: the fake's run on the
host), so what the others printed before the restart does not depend on when each started.

--metrics: rank 0 also prints a metric record (launcher.metrics.records) after each line
n, step first_step + n (--first-step, default 0: a resumed run starts later) with loss 1/(step+1).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
import time


def listen(port: int, expected: int) -> None:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("", port))  # every interface: on a real cluster the other pods connect over the network
    s.listen(64)
    s.settimeout(30)

    def accept() -> None:
        for _ in range(expected):
            try:
                conn, _ = s.accept()
                conn.close()
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()


def note(sync_dir: str, rank: int, attempt: int, lines: int) -> None:
    path = os.path.join(sync_dir, f"attempt-{attempt}-rank-{rank}")
    with open(path + ".tmp", "w") as f:
        f.write(str(lines))
    os.replace(path + ".tmp", path)


def wait_for_others(sync_dir: str, rank: int, attempt: int, nodes: int, lines: int, timeout: float = 60) -> None:
    def printed(r: int) -> int:
        try:
            with open(os.path.join(sync_dir, f"attempt-{attempt}-rank-{r}")) as f:
                return int(f.read() or 0)
        except (OSError, ValueError):
            return 0

    deadline = time.monotonic() + timeout
    while any(printed(r) < lines for r in range(nodes) if r != rank) and time.monotonic() < deadline:
        time.sleep(0.02)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--lines", type=int, default=5)
    p.add_argument("--interval", type=float, default=0.0)
    p.add_argument("--fail-rank", type=int)
    p.add_argument("--fail-code", type=int, default=3)
    p.add_argument("--fail-attempt", type=int)
    p.add_argument("--print-env")
    p.add_argument("--print-file")
    p.add_argument("--forever", action="store_true")
    p.add_argument("--metrics", action="store_true")
    p.add_argument("--first-step", type=int, default=0)
    p.add_argument("--sync-dir")
    a = p.parse_args()
    rank = int(os.environ["NODE_RANK"])
    nodes = int(os.environ.get("LAUNCHER_NODES", "1"))
    attempt = int(os.environ.get("LAUNCHER_ATTEMPT", "1"))
    if rank == 0 and nodes > 1:
        listen(int(os.environ["MASTER_PORT"]), nodes - 1)
    print(f"rank {rank} attempt {attempt} starting", flush=True)
    if a.print_env:
        print(f"the secret is {os.environ.get(a.print_env)}", flush=True)
    if a.print_file:
        with open(a.print_file) as f:
            print(f"the file secret is {f.read().strip()}", flush=True)
    failing = a.fail_rank == rank and (a.fail_attempt is None or a.fail_attempt == attempt)
    n = 0
    while a.forever or n < a.lines:
        print(f"rank {rank} line {n}", flush=True)
        if a.metrics and rank == 0:
            step = a.first_step + n
            record = {"step": step, "time": time.time(), "rank": 0, "metrics": {"loss/train/total": 1 / (step + 1)}}
            print("@@launcher.metrics " + json.dumps(record), flush=True)
        n += 1
        if a.sync_dir:
            note(a.sync_dir, rank, attempt, n)
        if failing and n >= a.lines // 2:
            if a.sync_dir:
                wait_for_others(a.sync_dir, rank, attempt, nodes, n)
            print(f"rank {rank} fails with code {a.fail_code}", flush=True)
            return a.fail_code
        time.sleep(a.interval)
    print(f"rank {rank} done", flush=True)
    # Give the other ranks' entrypoints time to reach rank 0 before its port closes.
    time.sleep(0.5 if rank == 0 and nodes > 1 else 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
