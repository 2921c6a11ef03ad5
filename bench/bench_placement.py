"""Time to a placement decision (launcher.sdk.placement: every profile asked for its free
GPUs at once, then decide()) across 1, 3 and 10 cluster profiles, with and without one
that hangs (accepts connections, never answers). Each profile is a small HTTP stub of
the two lists the decision reads (nodes, pods: one 8-GPU H100 node, half used) that
answers after LATENCY_MS, as a remote API server would; the hanging one costs the
per-profile deadline (ASK_SECONDS), once, whatever the number of profiles.

Measured in one process after a warm-up decision (the kubernetes client imported, the
kubeconfigs not yet cached: each decision opens each profile's backend afresh, as a
`launcher run` does). Repeats interleave every case; medians [best].

    .venv/bin/python bench/bench_placement.py [--repeat 5] [--latency-ms 20] [--quick] [--rows FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rows import Row, add_row_args, write_rows  # noqa: E402

H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "kubernetes.io/hostname": "h100-0"}
NODES = {"kind": "NodeList", "metadata": {"resourceVersion": "1"}, "items": [
    {"metadata": {"name": "h100-0", "labels": H100}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}}]}
PODS = {"kind": "PodList", "metadata": {"resourceVersion": "1"}, "items": [
    {"metadata": {"name": "other", "namespace": "default"},
     "spec": {"nodeName": "h100-0", "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "4"}}}]},
     "status": {"phase": "Running"}}]}


def stub(latency: float) -> ThreadingHTTPServer:
    """An API server that knows nodes and pods, answering after `latency` seconds."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            time.sleep(latency)
            body = json.dumps(NODES if self.path.startswith("/api/v1/nodes") else PODS).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def silent() -> socket.socket:
    """A socket that accepts connections and never answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(256)
    held = []

    def accept():
        while True:
            try:
                held.append(s.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return s


def kubeconfig(path: Path, port: int) -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "bench",
        "clusters": [{"name": "bench", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "bench", "user": {"token": "bench"}}],
        "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench", "namespace": "default"}}]}))
    return path


def write_config(home: Path, ports: list[int]) -> None:
    import yaml

    clusters = {f"c{i}": {"backend": "kubernetes", "kubeconfig": str(kubeconfig(home / f"kubeconfig-{i}", port)),
                          "context": "bench", "namespace": "default", "image": "ghcr.io/example/launcher:test"}
                for i, port in enumerate(ports)}
    (home / "config.yaml").write_text(yaml.safe_dump({"current": "local", "clusters": clusters}))


def decision_seconds(profiles: list[str]) -> tuple[float, str]:
    from launcher.config import load_config
    from launcher.sdk.placement import ask, decide
    from launcher.sdk.runs import named
    from launcher.sdk.config import RunConfig

    spec = named(RunConfig.from_dict({"name": "bench", "command": "true",
                                      "compute": {"gpus": 4, "gpu_type": "h100_80gb"}}))
    config = load_config()
    start = time.perf_counter()
    decision = decide(spec, ask(spec, [config.profile(p) for p in profiles]))
    return time.perf_counter() - start, decision.chosen or "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    add_row_args(parser)
    args = parser.parse_args()
    repeat = 2 if args.quick else args.repeat

    home = Path(tempfile.mkdtemp(prefix="bench-placement-"))
    os.environ["LAUNCHER_HOME"] = str(home)
    servers = [stub(args.latency_ms / 1000) for _ in range(10)]
    hang = silent()
    # The hanging profile comes first in its lists: the worst place for it.
    write_config(home, [hang.getsockname()[1]] + [s.server_address[1] for s in servers])
    cases = {}
    for n in (1, 3, 10):
        cases[f"{n} profiles"] = [f"c{i}" for i in range(1, n + 1)]
        cases[f"{n} profiles, one hanging"] = ["c0"] + [f"c{i}" for i in range(1, n)] if n > 1 else ["c0", "c1"]
    decision_seconds(cases["1 profiles"])  # warm-up: imports
    times: dict[str, list[float]] = {case: [] for case in cases}
    for _ in range(repeat):
        for case, profiles in cases.items():
            seconds, chosen = decision_seconds(profiles)
            assert chosen != "c0" and chosen != "-", (case, chosen)
            times[case].append(seconds)

    from launcher.sdk.placement import ASK_SECONDS

    print(f"time to a placement decision (stubs answering after {args.latency_ms:g} ms; "
          f"deadline {ASK_SECONDS:g} s per profile), median [best] of {repeat}:")
    rows = []
    for case, values in times.items():
        label = case if case != "1 profiles, one hanging" else "2 profiles, one hanging"
        med, best = statistics.median(values), min(values)
        print(f"  {label:<28} {med * 1000:8.0f} ms [{best * 1000:.0f}]")
        hanging = "hanging" in case
        goal = f"<= {ASK_SECONDS:g} s + 0.5 s" if hanging else "<= 1 s"
        met = med <= (ASK_SECONDS + 0.5 if hanging else 1.0)
        rows.append(Row(f"placement decision, {label}", "-", f"{med * 1000:.0f} ms", None, goal, met))
    write_rows(args, rows)
    for s in servers:
        s.shutdown()
    hang.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
