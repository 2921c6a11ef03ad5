"""The fake cluster as a program:

    python tests/fakes/kube_api.py --kubeconfig PATH [--nodes N] [--gpus-per-node G]
        [--node-label KEY=VALUE ...] [--jobset] [--image REF_GLOB=DIR ...] [--no-isolation]
        [--history-limit N] [--grace-seconds S] [--exit-with-parent]

It serves the API server and runs its control plane and kubelet until SIGTERM or SIGINT,
then kills every pod process and exits 0. The kubeconfig is written (atomically) only
once the server listens, so a reader that sees the file can connect at once. The first
line on stdout is `fake-kube listening on URL`.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="kube_api.py", description="A fake Kubernetes API server with a local kubelet.")
    p.add_argument("--kubeconfig", required=True, type=Path, help="where to write a kubeconfig for it")
    p.add_argument("--context", default="fake")
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--gpus-per-node", type=int, default=0)
    p.add_argument("--node-label", action="append", default=[], metavar="KEY=VALUE",
                   help="a label on every node (repeatable)")
    p.add_argument("--jobset", action="store_true", help="serve jobset.x-k8s.io/v1alpha2 and run its controller")
    p.add_argument("--image", action="append", default=[], metavar="REF_GLOB=DIR",
                   help="run containers of matching images with PATH=DIR/bin and the pod's env only (repeatable)")
    p.add_argument("--no-isolation", action="store_true", help="never run containers in private mount namespaces")
    p.add_argument("--history-limit", type=int, default=10_000, help="watch events kept before 410 Gone")
    p.add_argument("--grace-seconds", type=float, default=3.0, help="longest SIGTERM-to-SIGKILL wait for a pod")
    p.add_argument("--exit-with-parent", action="store_true",
                   help="stop (and kill every pod) when the process that started it dies")
    args = p.parse_args(argv)
    for text in args.image + args.node_label:
        if "=" not in text:
            p.error(f"expected KEY=VALUE, got {text!r}")
    return args


def nodes_from(args: argparse.Namespace) -> list[dict]:
    extra = dict(t.split("=", 1) for t in args.node_label)
    return [{"name": f"fake-node-{i}", "gpus": args.gpus_per_node,
             "labels": {"kubernetes.io/hostname": f"fake-node-{i}", **extra}} for i in range(args.nodes)]


def main(argv: list[str] | None = None) -> int:
    from tests.fakes.kube.cluster import FakeKube

    args = parse_args(argv)
    images = dict(t.split("=", 1) for t in args.image)
    kube = FakeKube(nodes=nodes_from(args), jobset=args.jobset, images=images,
                    isolate=False if args.no_isolation else None, history_limit=args.history_limit,
                    grace_seconds=args.grace_seconds)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        kube.start()
        kube.write_kubeconfig(args.kubeconfig, args.context)
        print(f"fake-kube listening on {kube.url}", flush=True)
        if kube.kubelet.isolation_skip_reason:
            print(f"fake-kube: containers are not isolated: {kube.kubelet.isolation_skip_reason}", flush=True)
        parent = os.getppid()
        while not stop.wait(0.5):
            if args.exit_with_parent and os.getppid() != parent:
                print("fake-kube: the parent process is gone; stopping", flush=True)
                break
    finally:
        kube.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
