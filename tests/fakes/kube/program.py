"""The fake cluster as a program:

    python tests/fakes/kube_api.py --kubeconfig PATH [--nodes N] [--gpus-per-node G]
        [--node-label KEY=VALUE ...] [--no-jobset] [--runtime process|runc]
        [--image REF_GLOB=DIR ...] [--image-user REF_GLOB=UID[:GID] ...] [--no-isolation] [--no-controllers]
        [--fault node=NAME,kind=xid[,taint=true] | pod=GLOB|rank=N,kind=hang|slow|oom[,after=S][,times=N] ...] [--history-limit N] [--grace-seconds S] [--exit-with-parent]
        [--kueue [--kueue-queue NAME:GPUS[:preempt] ...] [--priority-class NAME=VALUE ...]
                 [--topology KEY=V1,V2,... ...]]

Runtimes (kubelet.py): `process` (the default) runs each container as a host process;
`runc` (runc.py; root and Debian's runc) runs it in an OCI container, and each --image
DIR is then the image's root filesystem (scripts/build_images.sh builds some), or with
bin/ only a directory image (the host's root, PATH=DIR/bin), the host's root for images no
glob matches; --image-user gives an image the USER its containers run as.

Kueue (kueue.py; kueue.x-k8s.io v1beta2 and v1beta1, and the visibility API):
  --kueue                       serve Kueue's API and run its simulation
  --kueue-queue team:8:preempt  ResourceFlavor `default` (made once), ClusterQueue `team`
                                with nominalQuota nvidia.com/gpu 8 (and the nodes' cpu and
                                memory), withinClusterQueue LowerPriority with `preempt`
                                (Never without), and LocalQueue `team` in namespace default
  --priority-class high=1000    a WorkloadPriorityClass (label kueue.x-k8s.io/priority-class)
  --topology rack=r1,r2         nodes get label rack in contiguous blocks (4 nodes: r1 r1 r2
                                r2); a Topology `default` with levels [each --topology key in
                                order, kubernetes.io/hostname] and the flavor's topologyName

--fault node=fake-node-0,kind=xid  a hardware fault on that node from the start (FakeKube.
                              fault_node: its condition GpuXid, and its containers print
                              the kernel's Xid line and exit 1; taint=true: also a NoSchedule
                              taint nvidia.com/gpu-unhealthy); POST /_fake/node-faults at run time
--fault rank=1,kind=hang,after=2  the first container of rank 1's pods stops 2 s after it starts
                              (FakeKube.fault_pod; kinds hang, slow, oom; pod=GLOB matches pod
                              names; times=N strikes N containers, 0 every one); POST
                              /_fake/pod-faults at run time

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
    p.add_argument(
        "--node-label", action="append", default=[], metavar="KEY=VALUE", help="a label on every node (repeatable)"
    )
    p.add_argument(
        "--no-jobset",
        dest="jobset",
        action="store_false",
        help="serve no jobset.x-k8s.io/v1alpha2 (by default it is served and its controller runs)",
    )
    p.add_argument(
        "--runtime",
        choices=["process", "runc"],
        default="process",
        help="process: containers are host processes; runc: OCI containers made with runc (needs root)",
    )
    p.add_argument(
        "--image",
        action="append",
        default=[],
        metavar="REF_GLOB=DIR",
        help="process runtime: run containers of matching images with PATH=DIR/bin and the pod's env only; "
        "runc runtime: DIR is the image's root filesystem, or with bin/ only a directory image (repeatable)",
    )
    p.add_argument(
        "--image-user",
        action="append",
        default=[],
        metavar="REF_GLOB=UID[:GID]",
        help="runc runtime: the USER of matching images, what their containers run as where the pod names "
        "no runAsUser (repeatable; default root)",
    )
    p.add_argument("--no-isolation", action="store_true", help="never run containers in private mount namespaces")
    p.add_argument(
        "--no-controllers",
        dest="run_controllers",
        action="store_false",
        help="run no controllers, scheduler or kubelet: objects stay as clients wrote them (a store of records)",
    )
    p.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="node=NAME,kind=xid[,taint=true] | pod=GLOB|rank=N,kind=hang|slow|oom[,after=S][,times=N]",
        help="a hardware fault on node NAME: a GpuXid condition, and its containers print the "
        "kernel's Xid line and exit 1 (taint=true: also a NoSchedule taint); or a fault for the next N (default 1; 0: every) main containers of "
        "pods named like GLOB or of node rank N, S seconds after each starts: hang (its processes stop), "
        "slow (its CPU is throttled), oom (OOM-killed: OOMKilled, exit code 137) (repeatable)",
    )
    p.add_argument("--history-limit", type=int, default=10_000, help="watch events kept before 410 Gone")
    p.add_argument("--grace-seconds", type=float, default=3.0, help="longest SIGTERM-to-SIGKILL wait for a pod")
    p.add_argument(
        "--exit-with-parent",
        action="store_true",
        help="stop (and kill every pod) when the process that started it dies",
    )
    p.add_argument("--kueue", action="store_true", help="serve kueue.x-k8s.io and run a Kueue simulation")
    p.add_argument(
        "--kueue-queue",
        action="append",
        default=[],
        metavar="NAME:GPUS[:preempt]",
        help="a ClusterQueue and a LocalQueue NAME (namespace default) with GPUS nvidia.com/gpu quota "
        "in flavor default; preempt: withinClusterQueue LowerPriority (repeatable)",
    )
    p.add_argument(
        "--priority-class",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a WorkloadPriorityClass (repeatable)",
    )
    p.add_argument(
        "--topology",
        action="append",
        default=[],
        metavar="KEY=V1,V2,...",
        help="spread the nodes over these values of label KEY, in blocks, and make Topology default "
        "(levels: the keys in order, then kubernetes.io/hostname) for flavor default (repeatable)",
    )
    args = p.parse_args(argv)
    for text in args.image + args.node_label + args.priority_class + args.topology:
        if "=" not in text:
            p.error(f"expected KEY=VALUE, got {text!r}")
    args.node_faults, args.pod_faults = [], []
    from tests.fakes.kube.faults import parse_fault

    for text in args.fault:
        try:
            what, fields = parse_fault(text)
        except ValueError as e:
            p.error(f"--fault: {e}")
        if what == "node":
            args.node_faults.append((fields["node"], fields["kind"], fields["taint"] == "true"))
        else:
            args.pod_faults.append(fields)
    for text in args.priority_class:
        if not text.split("=", 1)[1].lstrip("-").isdigit():
            p.error(f"expected NAME=INTEGER, got {text!r}")
    for text in args.kueue_queue:
        parts = text.split(":")
        if len(parts) not in (2, 3) or not parts[1].isdigit() or parts[2:] not in ([], ["preempt"]):
            p.error(f"expected NAME:GPUS[:preempt], got {text!r}")
    if (args.kueue_queue or args.priority_class or args.topology) and not args.kueue:
        p.error("--kueue-queue, --priority-class and --topology need --kueue")
    return args


def nodes_from(args: argparse.Namespace) -> list[dict]:
    from tests.fakes.kube.kueue import topology_nodes

    return topology_nodes(
        args.nodes,
        args.gpus_per_node,
        {k: v.split(",") for k, v in (t.split("=", 1) for t in args.topology)},
        dict(t.split("=", 1) for t in args.node_label),
    )


def setup_kueue(kube, args: argparse.Namespace) -> None:
    """The Kueue objects the flags ask for (kueue.configure)."""
    from tests.fakes.kube.kueue import configure

    queues = {t.split(":")[0]: int(t.split(":")[1]) for t in args.kueue_queue}
    configure(
        kube.kueue,
        queues=queues,
        preempt={t.split(":")[0] for t in args.kueue_queue if t.endswith(":preempt")},
        priority_classes={k: int(v) for k, v in (t.split("=", 1) for t in args.priority_class)},
        topology=[t.split("=", 1)[0] for t in args.topology],
    )


def main(argv: list[str] | None = None) -> int:
    from tests.fakes.kube.cluster import FakeKube

    args = parse_args(argv)
    images = dict(t.split("=", 1) for t in args.image)
    kube = FakeKube(
        nodes=nodes_from(args),
        jobset=args.jobset,
        images=images,
        isolate=False if args.no_isolation else None,
        history_limit=args.history_limit,
        grace_seconds=args.grace_seconds,
        kueue=args.kueue,
        run_controllers=args.run_controllers,
        runtime=args.runtime,
        image_users=dict(t.split("=", 1) for t in args.image_user),
    )
    if args.kueue:
        setup_kueue(kube, args)
    for node, kind, taint in args.node_faults:
        try:
            kube.fault_node(node, kind, taint=taint)
        except ValueError as e:
            kube.close()
            print(f"kube_api.py: error: --fault: {e}", file=sys.stderr)
            return 2
    for fields in args.pod_faults:
        kube.fault_pod(**fields)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        kube.start()
        kube.write_kubeconfig(args.kubeconfig, args.context)
        print(f"fake-kube listening on {kube.url}", flush=True)
        if args.runtime == "runc":
            print("fake-kube: containers run with runc", flush=True)
        elif kube.kubelet.isolation_skip_reason:
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
