"""Free and used GPUs on a cluster (`launcher util`): the nodes' allocatable GPUs, by the
profile's gpu_type that selects each node, less what the pods bound to them request.

A node's gpu_type is the first of the profile's own gpu_types, then of the shipped
table (profiles.py), whose node selector and affinity its labels satisfy; a GPU node
none selects is named by its GPU label's value (or "unlabelled"). Pods count as the
scheduler counts them: every pod bound to the node that has not ended, in any
namespace, requesting the larger of its containers' sum and its largest init container.
"""

from __future__ import annotations

from collections import defaultdict

from launcher.backends.capabilities import GpuUsage
from launcher.backends.kubernetes.kubeapi import KubeApi
from launcher.backends.kubernetes.profiles import (
    CPU_TYPE,
    GFD_LABEL,
    GKE_LABEL,
    GPU_RESOURCE,
    KARPENTER_LABEL,
    ClusterProfile,
    GpuType,
    shipped_gpu_types,
)

# The pods that hold their node's resources (kubectl describe node asks the same).
NOT_ENDED = "status.phase!=Succeeded,status.phase!=Failed"
UNLABELLED = "unlabelled"


def _selects(t: GpuType, labels: dict[str, str]) -> bool:
    if not (t.node_selector or t.node_affinity):
        return False  # selects every node: says nothing of its GPUs
    return all(labels.get(k) == v for k, v in t.node_selector.items()) and all(
        labels.get(k) in values for k, values in t.node_affinity.items()
    )


def node_gpu_type(profile: ClusterProfile, labels: dict[str, str]) -> tuple[str, str]:
    """(gpu_type name, the resource its GPUs are counted in) of a node with these labels."""
    for table in (profile.gpu_types, shipped_gpu_types(profile.gpu_labels)):
        for name, t in table.items():
            if name != CPU_TYPE and _selects(t, labels):
                return name, t.resource
    label = next((labels[k] for k in (GFD_LABEL, GKE_LABEL, KARPENTER_LABEL) if k in labels), UNLABELLED)
    return label, GPU_RESOURCE


def quantity_count(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0  # extended resources are whole numbers; anything else holds none


def pod_request(pod: dict, resource: str) -> int:
    """What the scheduler reserves of `resource` for the pod: its containers' requests
    (an extended resource's request defaults to its limit), or its largest init container's."""

    def each(containers: list[dict]) -> list[int]:
        out = []
        for c in containers:
            res = c.get("resources") or {}
            out.append(
                quantity_count((res.get("requests") or {}).get(resource, (res.get("limits") or {}).get(resource, 0)))
            )
        return out

    spec = pod.get("spec") or {}
    return max([sum(each(spec.get("containers") or [])), *each(spec.get("initContainers") or [])])


def gpu_usage(api: KubeApi, profile: ClusterProfile) -> list[GpuUsage]:
    nodes, _ = api.list("Node")
    pods, _ = api.list("Pod", fields=NOT_ENDED, every_namespace=True)
    on_node: dict[str, list[dict]] = defaultdict(list)
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            on_node[node].append(pod)
    totals: dict[str, list[int]] = {}  # gpu_type -> [nodes, gpus, used]
    for node in nodes:
        meta, status = node.get("metadata") or {}, node.get("status") or {}
        name, resource = node_gpu_type(profile, meta.get("labels") or {})
        gpus = quantity_count((status.get("allocatable") or {}).get(resource, 0))
        if not gpus:
            name = CPU_TYPE
        used = sum(pod_request(p, resource) for p in on_node.get(meta.get("name", ""), [])) if gpus else 0
        row = totals.setdefault(name, [0, 0, 0])
        row[0] += 1
        row[1] += gpus
        row[2] += min(used, gpus)
    return [
        GpuUsage(gpu_type=name, nodes=n, gpus=g, used=u)
        for name, (n, g, u) in sorted(totals.items(), key=lambda item: (item[0] == CPU_TYPE, item[0]))
    ]
