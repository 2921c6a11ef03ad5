"""What the cluster serves, asked through API discovery: JobSet, at `cluster add` and at submit."""

from __future__ import annotations

from typing import Any

JOBSET_GROUP = "jobset.x-k8s.io"
JOBSET_VERSION = "v1alpha2"
DISCOVERY_TIMEOUT = (3, 10)


def serves_jobset(client: Any) -> bool:
    """Whether the API server lists jobset.x-k8s.io/v1alpha2 (GET /apis). Raises the client's
    errors (ApiException, urllib3 errors) for the caller's boundary to turn into ours."""
    import kubernetes

    groups = kubernetes.client.ApisApi(client).get_api_versions(_request_timeout=DISCOVERY_TIMEOUT)
    for group in groups.groups or []:
        if group.name == JOBSET_GROUP:
            return any(v.version == JOBSET_VERSION for v in group.versions or [])
    return False
