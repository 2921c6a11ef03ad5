"""mcli's ClusterDetails, for the launcher's cluster profiles: a profile is a cluster, its
backend the provider."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from launcher.sdk.clusters import Cluster

__all__ = ["ClusterDetails"]


@dataclass
class ClusterDetails:
    """A cluster runs can go to: one of the launcher's cluster profiles (`launcher cluster add`).
    `provider` is its backend (local or kubernetes); `id` is its name."""

    id: str
    name: str
    provider: str = "MosaicML"
    allow_fractional: bool = False
    allow_multinode: bool = False
    cluster_instances: list[Any] = field(default_factory=list)
    submission_types: list[Any] = field(default_factory=list)
    is_multitenant: bool = False
    reservation_type: str | None = None
    scheduler_enabled: bool = False
    utilization: Any | None = None


def from_profile(cluster: Cluster) -> ClusterDetails:
    return ClusterDetails(
        id=cluster.name,
        name=cluster.name,
        provider=cluster.backend,
        allow_multinode=True,  # both backends run a run's node ranks (locally as processes)
        submission_types=["TRAINING", "INTERACTIVE"],
        scheduler_enabled=bool(cluster.settings.get("queue")),
    )
