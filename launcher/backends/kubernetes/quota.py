"""Free GPUs for a placement across clusters (launcher.sdk.placement): where the profile
has a Kueue queue, its ClusterQueue's nominal quota less what its admitted workloads
use (Kueue admits by quota, not by free nodes); else the nodes' allocatable GPUs less
the pods' requests (usage.py).

The quota is summed over the ClusterQueue's flavors for the gpu_type's resource
(nvidia.com/gpu): which flavor selects which nodes (a ResourceFlavor's nodeLabels) is
not read, nor borrowing within a cohort. A profile whose queue Kueue does not serve (no
Kueue, or no such LocalQueue) is counted by its nodes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from launcher.backends.base import FreeGpus
from launcher.backends.kubernetes.usage import _count as count  # a Quantity of a whole resource
from launcher.backends.kubernetes.usage import gpu_usage

if TYPE_CHECKING:
    from launcher.backends.kubernetes.kubeapi import KubeApi
    from launcher.backends.kubernetes.profiles import ClusterProfile, Placement


def queue_gpus(cluster_queue: dict, resource: str) -> tuple[int, int]:
    """(nominal quota, usage) of `resource` in a ClusterQueue object (kueue.x-k8s.io
    v1beta1 or v1beta2: spec.resourceGroups[].flavors[].resources[].nominalQuota, and
    status.flavorsUsage[].resources[].total), summed over its flavors."""
    quota = 0
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for r in flavor.get("resources") or []:
                if r.get("name") == resource:
                    quota += count(r.get("nominalQuota", 0))
    used = 0
    for flavor in (cluster_queue.get("status") or {}).get("flavorsUsage") or []:
        for r in flavor.get("resources") or []:
            if r.get("name") == resource:
                used += count(r.get("total", 0))
    return quota, used


def cluster_queue_of(api: KubeApi, local_queue: str) -> dict | None:
    """The ClusterQueue the profile's LocalQueue points at; None where Kueue does not serve
    either (its API not installed, or no such queue)."""
    queue = api.get("LocalQueue", local_queue)
    name = ((queue or {}).get("spec") or {}).get("clusterQueue")
    return api.get("ClusterQueue", name) if name else None


def free_gpus(api: KubeApi, profile: ClusterProfile, placement: Placement) -> FreeGpus:
    """The GPUs of the run's gpu_type (as `placement` resolved it on this profile) free now."""
    resource = placement.gpu_type.resource
    if profile.queue and placement.gpus:
        cluster_queue = cluster_queue_of(api, profile.queue)
        if cluster_queue is not None:
            quota, used = queue_gpus(cluster_queue, resource)
            name = (cluster_queue.get("metadata") or {}).get("name", profile.queue)
            return FreeGpus(placement.gpu_type_name, max(0, quota - used), quota, f"queue {name}")
    usage = [u for u in gpu_usage(api, profile) if u.gpu_type == placement.gpu_type_name]
    return FreeGpus(placement.gpu_type_name, sum(u.free for u in usage), sum(u.gpus for u in usage))
