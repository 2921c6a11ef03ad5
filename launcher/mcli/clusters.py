"""mcli's ClusterDetails, for the launcher's cluster profiles: a profile is a cluster, its
backend the provider; its utilization is what `launcher util` reports (GPUs by type) and
its runs that hold or wait for them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from launcher.sdk.clusters import Cluster

__all__ = ["ClusterDetails", "ClusterUtilization", "ClusterUtilizationByRun", "Instance", "InstanceUtilization"]


@dataclass
class Instance:
    """A kind of node of a cluster: its GPU type ("none" for nodes without GPUs) and how many."""

    name: str
    gpu_type: str
    gpus: int
    nodes: int


@dataclass
class InstanceUtilization:
    instance: Instance
    gpus_used: int
    gpus_available: int
    gpus_total: int


@dataclass
class ClusterUtilizationByRun:
    """A run that holds GPUs of the cluster (or waits for them)."""

    id: str
    user: str
    name: str
    run_name: str
    gpu_num: int
    instance: str
    created_at: datetime
    scheduling: dict[str, Any]
    reason: str
    estimated_end_time: datetime | None = None
    max_duration_seconds: int | None = None


@dataclass
class ClusterUtilization:
    cluster_instance_utils: list[InstanceUtilization] = field(default_factory=list)
    active_runs_by_user: list[ClusterUtilizationByRun] = field(default_factory=list)
    queued_runs_by_user: list[ClusterUtilizationByRun] = field(default_factory=list)
    active_deployments_by_user: list[Any] = field(default_factory=list)
    queued_deployments_by_user: list[Any] = field(default_factory=list)


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
    utilization: ClusterUtilization | None = None


def from_profile(cluster: Cluster, utilization: ClusterUtilization | None = None) -> ClusterDetails:
    return ClusterDetails(
        id=cluster.name,
        name=cluster.name,
        provider=cluster.backend,
        allow_multinode=True,  # both backends run a run's node ranks (locally as processes)
        cluster_instances=[u.instance for u in utilization.cluster_instance_utils] if utilization else [],
        submission_types=["TRAINING", "INTERACTIVE"],
        scheduler_enabled=bool(cluster.settings.get("queue")),
        utilization=utilization,
    )


def _instance_name(usage: Any) -> str:
    """`8x h100` for nodes of 8 H100s each; `cpu` for nodes without GPUs."""
    if usage.gpu_type == "none" or not usage.nodes:
        return "cpu"
    return f"{usage.gpus // usage.nodes}x {usage.gpu_type}"


def utilization_of(usage: list[Any], runs: list[Any]) -> ClusterUtilization:
    """The utilization of a profile from its backend's gpu_usage() and its runs (the launcher's
    records): RUNNING and TERMINATING ones active, PENDING, QUEUED and STARTING queued."""
    instances = [
        InstanceUtilization(
            Instance(_instance_name(u), u.gpu_type, u.gpus, u.nodes),
            gpus_used=u.used,
            gpus_available=u.free,
            gpus_total=u.gpus,
        )
        for u in usage
    ]

    def by_run(run: Any) -> ClusterUtilizationByRun:
        compute = run.spec.get("compute") or {}
        scheduling = dict(run.spec.get("scheduling") or {})
        hours = scheduling.get("max_duration")
        return ClusterUtilizationByRun(
            id=run.name,
            user="",
            name=run.name,
            run_name=run.name,
            gpu_num=int(compute.get("gpus") or 0),
            instance=str(compute.get("gpu_type") or "none"),
            created_at=run.created_at,
            scheduling=scheduling,
            reason=run.reason or "",
            max_duration_seconds=int(float(hours) * 3600) if hours else None,
        )

    active = [by_run(r) for r in runs if r.status.value in ("RUNNING", "TERMINATING")]
    queued = [by_run(r) for r in runs if r.status.value in ("PENDING", "QUEUED", "STARTING")]
    return ClusterUtilization(instances, active, queued)
