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

from launcher.backends.capabilities import FreeGpus
from launcher.backends.kubernetes.kueue import cluster_queue_gpus, cluster_queue_of
from launcher.backends.kubernetes.usage import gpu_usage

if TYPE_CHECKING:
    from launcher.backends.kubernetes.kubeapi import KubeApi
    from launcher.backends.kubernetes.profiles import ClusterProfile, Placement


def free_gpus(api: KubeApi, profile: ClusterProfile, placement: Placement) -> FreeGpus:
    """The GPUs of the run's gpu_type (as `placement` resolved it on this profile) free now."""
    resource = placement.gpu_type.resource
    if profile.queue and placement.gpus:
        cluster_queue = cluster_queue_of(api, profile.queue)
        if cluster_queue is not None:
            quota, used = cluster_queue_gpus(cluster_queue, {resource})
            name = (cluster_queue.get("metadata") or {}).get("name", profile.queue)
            return FreeGpus(placement.gpu_type_name, max(0, quota - used), quota, f"queue {name}")
    usage = [u for u in gpu_usage(api, profile) if u.gpu_type == placement.gpu_type_name]
    return FreeGpus(placement.gpu_type_name, sum(u.free for u in usage), sum(u.gpus for u in usage))
