"""The scheduler: binds pending pods to fake nodes, or says why it cannot.

Nodes have labels and an nvidia.com/gpu capacity. It honours nodeSelector, required
node affinity (matchExpressions, and matchFields on metadata.name), required pod
anti-affinity (matchLabels), the Node objects' NoSchedule and NoExecute taints against the
pod's tolerations (NoExecute evicts nothing that runs) and GPU requests, and writes
PodScheduled=False/Unschedulable with the real scheduler's message ("0/4 nodes are
available: 4 Insufficient nvidia.com/gpu.") plus a FailedScheduling event.
"""

from __future__ import annotations

from collections import Counter

from tests.fakes.kube.common import expr_match, rfc3339, selector_matches
from tests.fakes.kube.store import Store, record_event

GPU = "nvidia.com/gpu"


def default_nodes(count: int = 4, gpus: int = 0) -> list[dict]:
    return [
        {"name": f"fake-node-{i}", "labels": {"kubernetes.io/hostname": f"fake-node-{i}"}, "gpus": gpus}
        for i in range(count)
    ]


def node_object(node: dict) -> dict:
    capacity = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    if node.get("gpus"):
        capacity[GPU] = str(node["gpus"])
    return {
        "metadata": {"name": node["name"], "labels": dict(node["labels"])},
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastTransitionTime": rfc3339(),
                    "lastHeartbeatTime": rfc3339(),
                }
            ],
            "nodeInfo": {"kubeletVersion": "v1.32.0-fake", "architecture": "amd64", "operatingSystem": "linux"},
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": node["name"]},
            ],
        },
    }


def gpu_request(pod: dict) -> int:
    return sum(
        int(((c.get("resources") or {}).get("requests") or {}).get(GPU, 0)) for c in pod["spec"].get("containers", [])
    )


class Scheduler:
    def __init__(self, store: Store, nodes: list[dict]):
        self.store, self.nodes = store, nodes

    def sync(self) -> None:
        with self.store.lock:
            for (kind, ns, name), pod in list(self.store.objects.items()):
                if (
                    kind == "Pod"
                    and not pod["spec"].get("nodeName")
                    and not pod["metadata"].get("deletionTimestamp")
                    and pod["status"].get("phase") not in ("Succeeded", "Failed")
                    and (kind, ns, name) in self.store.objects
                ):
                    self.schedule(pod)

    def schedule(self, pod: dict) -> None:
        spec = pod["spec"]
        want = gpu_request(pod)
        selector = spec.get("nodeSelector") or {}
        affinity = spec.get("affinity") or {}
        terms = ((affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get(
            "nodeSelectorTerms"
        ) or []
        anti = (affinity.get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []
        reasons: Counter = Counter()
        placed = [
            o
            for (k, _, _), o in self.store.objects.items()
            if k == "Pod" and o["spec"].get("nodeName") and o["status"].get("phase") in ("Pending", "Running")
        ]
        for node in self.nodes:
            labels = node["labels"]
            if any(labels.get(k) != v for k, v in selector.items()) or (
                terms
                and not any(
                    all(expr_match(labels, e) for e in t.get("matchExpressions", []))
                    and all(expr_match({"metadata.name": node["name"]}, e) for e in t.get("matchFields", []))
                    for t in terms
                )
            ):
                reasons["node(s) didn't match Pod's node affinity/selector"] += 1
                continue
            if any(
                p["spec"]["nodeName"] == node["name"]
                and selector_matches(p["metadata"].get("labels") or {}, a.get("labelSelector") or {})
                for a in anti
                for p in placed
            ):
                reasons["node(s) didn't match pod anti-affinity rules"] += 1
                continue
            obj = self.store.objects.get(("Node", "", node["name"])) or {}
            taint = next(
                (
                    t
                    for t in (obj.get("spec") or {}).get("taints") or []
                    if t.get("effect") in ("NoSchedule", "NoExecute") and not tolerated(spec.get("tolerations"), t)
                ),
                None,
            )
            if taint is not None:
                reasons[f"node(s) had untolerated taint {{{taint['key']}: {taint.get('value', '')}}}"] += 1
                continue
            used = sum(gpu_request(p) for p in placed if p["spec"]["nodeName"] == node["name"])
            if want and node.get("gpus", 0) - used < want:
                reasons[f"Insufficient {GPU}"] += 1
                continue
            self.store.update(
                "Pod",
                pod["metadata"]["namespace"],
                pod["metadata"]["name"],
                lambda p, node=node: _bind(p, node["name"]),
            )
            where = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
            record_event(
                self.store,
                pod,
                "Normal",
                "Scheduled",
                f"Successfully assigned {where} to {node['name']}",
                "default-scheduler",
            )
            return
        message = (
            f"0/{len(self.nodes)} nodes are available: "
            + ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
            + "."
        )
        sched = next((c for c in pod["status"].get("conditions", []) if c["type"] == "PodScheduled"), None)
        if sched is None or sched.get("message") != message:
            self.store.update(
                "Pod",
                pod["metadata"]["namespace"],
                pod["metadata"]["name"],
                lambda p: _set_scheduled(p, "False", "Unschedulable", message),
            )
            record_event(self.store, pod, "Warning", "FailedScheduling", message, "default-scheduler")


def tolerated(tolerations: list[dict] | None, taint: dict) -> bool:
    """Whether a pod's tolerations tolerate a node's taint, as the scheduler matches them."""
    for t in tolerations or []:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("operator") == "Exists":
            if not t.get("key") or t["key"] == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _set_scheduled(pod: dict, status: str, reason: str = "", message: str = "") -> None:
    conds = [c for c in pod["status"].get("conditions", []) if c["type"] != "PodScheduled"]
    cond = {"type": "PodScheduled", "status": status, "lastTransitionTime": rfc3339()}
    if reason:
        cond.update(reason=reason, message=message)
    pod["status"]["conditions"] = [*conds, cond]


def _bind(pod: dict, node: str) -> None:
    pod["spec"]["nodeName"] = node
    _set_scheduled(pod, "True")
    waiting = {"waiting": {"reason": "PodInitializing" if pod["spec"].get("initContainers") else "ContainerCreating"}}
    pod["status"]["containerStatuses"] = [
        {
            "name": ct["name"],
            "ready": False,
            "restartCount": 0,
            "image": ct["image"],
            "imageID": "",
            "started": False,
            "state": dict(waiting),
        }
        for ct in pod["spec"]["containers"]
    ]
    if pod["spec"].get("initContainers"):
        pod["status"]["initContainerStatuses"] = [
            {
                "name": ct["name"],
                "ready": False,
                "restartCount": 0,
                "image": ct["image"],
                "imageID": "",
                "state": {"waiting": {"reason": "PodInitializing"}},
            }
            for ct in pod["spec"]["initContainers"]
        ]
