"""FakeKube: one fake cluster in this process, the API server over HTTP on 127.0.0.1
plus the control loop (garbage collector, Kueue, JobSet and Job controllers, scheduler, kubelet)."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

from tests.fakes.kube import podsecurity, validation
from tests.fakes.kube.common import rfc3339
from tests.fakes.kube.faults import Faults
from tests.fakes.kube.jobs import JobController, default_job
from tests.fakes.kube.kubelet import Kubelet
from tests.fakes.kube.resources import Registry
from tests.fakes.kube.scheduler import Scheduler, default_nodes, node_object
from tests.fakes.kube.store import Store, record_event


class FakeKube:
    def __init__(
        self,
        *,
        nodes: list[dict] | None = None,
        run_controllers: bool = True,
        log_resolution_ns: int = 1_000,
        grace_seconds: float = 3.0,
        orphan_delay: float = 0.2,
        jobset: bool = True,
        images: dict[str, str] | None = None,
        isolate: bool | None = None,
        history_limit: int = 10_000,
        bookmark_seconds: float = 1.0,
        kueue: bool = False,
        runtime: str = "process",
        image_users: dict[str, str] | None = None,
    ):
        self.registry = Registry(jobset=jobset, kueue=kueue)
        self.store = Store(self.registry, history_limit=history_limit, orphan_delay=orphan_delay)
        self.lock, self.changed, self.objects = self.store.lock, self.store.changed, self.store.objects
        self.faults = Faults()
        self.streams: list[tuple[str, str]] = []
        """(subresource, negotiated subprotocol) of each exec and portforward WebSocket."""
        self.stream_pods: list[tuple[str, str]] = []
        """(subresource, pod name) of each exec and portforward WebSocket, as an audit log has it."""
        self.requests: list[tuple[str, str, str]] = []
        """(method, kind, verb) of every API request."""
        self.lists: list[dict] = []
        """Each list request's kind, labelSelector, limit, whether it continued a list, and
        whether it asked for metadata only: what a listing asked the server to narrow."""
        self.nodes = nodes if nodes is not None else default_nodes()
        self.run_controllers = run_controllers
        self.bookmark_seconds = bookmark_seconds
        self.kubelet = Kubelet(
            self.store,
            self.faults,
            log_resolution_ns=log_resolution_ns,
            grace_seconds=grace_seconds,
            images=images,
            isolate=isolate,
            runtime=runtime,
            image_users=image_users,
        )
        self.containers, self.ports, self.root = self.kubelet.containers, self.kubelet.ports, self.kubelet.root
        self.jobs = JobController(self.store)
        self.scheduler = Scheduler(self.store, self.nodes)
        self.jobset = None
        if jobset:
            from tests.fakes.kube.jobset import JobSetController, admit_jobset

            self.jobset = JobSetController(self.store)
            self.store.admit["JobSet"] = admit_jobset
        self.store.admit.update(
            {
                "Job": podsecurity.workloads(self.store, default_job),
                "Pod": podsecurity.pods(self.store, validation.validate_pod),
                "Namespace": podsecurity.namespaces(self.store),
                "Service": validation.validate_service,
                "ConfigMap": validation.validate_data("ConfigMap"),
                "Secret": validation.validate_data("Secret"),
            }
        )
        self.kueue = None
        """The Kueue simulation (kueue.py), with kueue=True: add_queue, add_priority_class, add_topology."""
        if kueue:
            from tests.fakes.kube import kueue_api
            from tests.fakes.kube.kueue import KueueController

            for res in self.registry.resources:
                if res.crd and res.storage and res.group == kueue_api.KUEUE_GROUP:
                    self.store.admit[res.kind] = kueue_api.admit(res)
            self.kueue = KueueController(self.store, self.nodes)
            self.kueue.install()
        for ns in ("default", "kube-system", "kube-public"):
            self.store.ensure_namespace(ns)
        for node in self.nodes:
            self.store.create("Node", "", node_object(node), admit=False)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        from tests.fakes.kube.http import ApiServer

        self.server = ApiServer(self)
        self.faults._connections = self.server
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    # --- lifecycle --------------------------------------------------------------------------
    def start(self) -> FakeKube:
        for target, name in ((self.server.serve, "fake-kube-http"), (self._control_loop, "fake-kube-control")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def close(self) -> None:
        self._stop.set()
        with self.lock:
            self.changed.notify_all()
        self.kubelet.close()
        self.server.close()
        for t in self._threads:
            t.join(timeout=5)

    def write_kubeconfig(self, path: Path, context: str = "fake") -> Path:
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(kubeconfig(self.url, context)))
        tmp.replace(path)  # readers never see half a file
        return path

    # --- the store, for tests ---------------------------------------------------------------
    @property
    def rv(self) -> int:
        return self.store.rv

    @property
    def history(self):
        return self.store.history

    def create(self, kind: str, ns: str, body: dict) -> dict:
        return self.store.create(kind, ns, body)

    def get(self, kind: str, ns: str, name: str) -> dict:
        return self.store.get(kind, ns, name)

    def list(self, kind: str, ns: str | None, labels: str | None = None, fields: str | None = None):
        return self.store.list(kind, ns, labels, fields)

    def update(self, kind: str, ns: str, name: str, fn) -> dict:
        return self.store.update(kind, ns, name, fn)

    def patch(self, kind: str, ns: str, name: str, patch: dict) -> dict:
        return self.store.patch(kind, ns, name, patch)

    def replace(self, kind: str, ns: str, name: str, body: dict) -> dict:
        return self.store.replace(kind, ns, name, body)

    def delete(self, kind: str, ns: str, name: str, options: dict | None = None) -> dict:
        return self.store.delete(kind, ns, name, options)

    def compact(self) -> None:
        """Drop the event history: watches from any earlier version get 410 Gone."""
        self.store.compact()

    def record_event(self, obj: dict, type_: str, reason: str, message: str) -> None:
        record_event(self.store, obj, type_, reason, message)

    # --- helpers tests call -----------------------------------------------------------------
    def evict(self, pod_name: str, ns: str = "default", reason: str = "PreemptionByScheduler") -> None:
        """Preempt a running pod: DisruptionTarget, then SIGKILL (exit 137)."""
        self.kubelet.evict(ns, pod_name, reason)

    def fault_node(self, name: str, kind: str, *, taint: bool = False) -> None:
        """A hardware fault on node `name` (faults.NODE_FAULTS): the node gets the condition a
        GPU operator's health check sets, with the kernel's line as its message, and the
        containers started there from now on print that line and exit 1. taint=True also taints
        it NoSchedule, as a checker that cordons does: the scheduler places no new pod there."""
        from tests.fakes.kube.faults import NODE_FAULTS

        if kind not in NODE_FAULTS:
            raise ValueError(f"node fault kind must be one of {sorted(NODE_FAULTS)}, not {kind!r}")
        if not any(n["name"] == name for n in self.nodes):
            raise ValueError(f"no node {name!r} (nodes: {', '.join(n['name'] for n in self.nodes)})")
        fault = NODE_FAULTS[kind]

        def mark(node: dict) -> None:
            conds = [c for c in node["status"]["conditions"] if c["type"] != fault["condition"]["type"]]
            now = rfc3339()
            conds.append(
                {
                    **fault["condition"],
                    "status": "True",
                    "message": fault["line"],
                    "lastTransitionTime": now,
                    "lastHeartbeatTime": now,
                }
            )
            node["status"]["conditions"] = conds
            if taint:
                taints = [t for t in node["spec"].get("taints") or [] if t["key"] != fault["taint"]["key"]]
                node["spec"]["taints"] = [*taints, {**fault["taint"], "timeAdded": now}]

        self.store.update("Node", "", name, mark)
        with self.lock:
            self.faults.node_faults[name] = kind

    def fault_pod(
        self, kind: str, *, pod: str | None = None, rank: int | None = None, after: float = 0.0, times: int = 1
    ) -> None:
        """A fault (faults.POD_FAULT_KINDS: hang, slow, oom) for the next `times` main
        containers (0: every one) started in pods named like the glob `pod` or of node rank
        `rank` (their job-completion index), `after` seconds after each starts."""
        from tests.fakes.kube.faults import PodFault

        fault = PodFault(kind=kind, pod=pod, rank=rank, after=float(after), times=int(times))
        with self.lock:
            self.faults.pod_faults.append(fault)

    def count(self, method: str | None = None, kind: str | None = None, verb: str | None = None) -> int:
        with self.lock:
            return sum(
                1
                for m, k, v in self.requests
                if (method is None or m == method) and (kind is None or k == kind) and (verb is None or v == verb)
            )

    def pods(self, ns: str = "default", labels: str | None = None) -> list[dict]:
        return self.list("Pod", ns, labels)[0]

    # --- the control plane ------------------------------------------------------------------
    def _control_loop(self) -> None:
        loops = [self.store.finish_pending_deletes]
        if self.run_controllers:
            loops += (
                ([self.kueue.sync] if self.kueue else [])
                + ([self.jobset.sync] if self.jobset else [])
                + [self.jobs.sync, self.scheduler.sync, self.kubelet.sync]
            )
        while not self._stop.is_set():
            for loop in loops:
                try:
                    loop()
                except Exception as e:  # noqa: BLE001 - keep the fake alive; tests see the effects
                    print(f"fake-kube {loop.__qualname__}: {type(e).__name__}: {e}", file=sys.stderr)
            with self.lock:
                self.changed.wait(0.05)


def kubeconfig(url: str, context: str = "fake", namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": context,
        "preferences": {},
        "clusters": [{"name": "fake", "cluster": {"server": url}}],
        "users": [{"name": "tester", "user": {"token": "fake-token"}}],
        "contexts": [{"name": context, "context": {"cluster": "fake", "user": "tester", "namespace": namespace}}],
    }
