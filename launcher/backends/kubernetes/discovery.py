"""What the cluster serves, asked through API discovery: JobSet, at `cluster add` and at submit."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from launcher.backends.kubernetes.kubeapi import KubeApi

JOBSET_GROUP_VERSION = "jobset.x-k8s.io/v1alpha2"


def serves_jobset(api: KubeApi) -> bool:
    """Whether the API server serves JobSets (GET /apis/jobset.x-k8s.io/v1alpha2 lists them).
    Raises KubeError when the server cannot be asked."""
    found = api.discover(JOBSET_GROUP_VERSION)
    return any(r.get("name") == "jobsets" for r in (found or {}).get("resources") or [])
