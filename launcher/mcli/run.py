"""mcli's Run and the records it holds (Node, Resumption, RunLifecycle, FormattedRunEvent),
made from the launcher's own Run record (launcher.backends.base.Run): resumptions are its
attempts counted from 0, nodes the latest attempt's ranks, lifecycle and events its status
events."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import TYPE_CHECKING, Any

from launcher.mcli.config import RunConfig
from launcher.mcli.status import RunStatus

if TYPE_CHECKING:
    from launcher.backends.base import Run as LauncherRun

__all__ = ["FormattedRunEvent", "Node", "Resumption", "Run", "RunLifecycle", "RunType", "from_launcher"]


@dataclass
class Node:
    """A node rank of a run's latest resumption."""

    rank: int
    name: str
    status: str
    reason: str = ""


@dataclass
class Resumption:
    """One attempt of a run; the first is index 0 (the launcher's attempt 1)."""

    index: int
    cluster: str
    gpus: int
    cpus: int
    gpu_type: str
    node_count: int
    status: RunStatus
    estimated_end_time: datetime | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    reason: str | None = None


@dataclass
class RunLifecycle:
    """A status a run held, from when to when."""

    resumption_index: int
    status: RunStatus
    started_at: datetime
    ended_at: datetime | None = None
    reason: str | None = None
    estimated_end_time: str | None = None


@dataclass
class FormattedRunEvent:
    """A status change of a run, in words."""

    event_type: str
    event_time: datetime
    event_message: str
    resumption_index: int = 0


class RunType(Enum):
    TRAINING = "TRAINING"
    SECRET_TEST = "SECRET_TEST"
    INTERACTIVE = "INTERACTIVE"
    HERO_RUN = "HERO_RUN"
    FINETUNING = "FINETUNING"
    PRETRAINING = "PRETRAINING"
    UNKNOWN = "UNKNOWN"

    @staticmethod
    def from_string(value: str) -> RunType:
        try:
            return RunType(value)
        except ValueError:
            return RunType.UNKNOWN


@dataclass
class Run:
    """A run, as mcli's Run: its name, status, times, compute, resumptions and config.
    `submitted_config` (and `config`, the name mcli's guide uses) is the run's spec as a RunConfig."""

    run_uid: str
    name: str
    status: RunStatus
    created_at: datetime
    updated_at: datetime
    created_by: str
    priority: str
    preemptible: bool
    retry_on_system_failure: bool
    cluster: str
    gpus: int
    gpu_type: str
    cpus: int
    node_count: int
    latest_resumption: Resumption
    is_deleted: bool
    run_type: RunType
    max_retries: int | None = None
    reason: str | None = None
    nodes: list[Node] = field(default_factory=list)
    submitted_config: RunConfig | None = None
    metadata: dict[str, Any] | None = None
    last_resumption_id: str | None = None
    resumptions: list[Resumption] = field(default_factory=list)
    events: list[FormattedRunEvent] = field(default_factory=list)
    lifecycle: list[RunLifecycle] = field(default_factory=list)
    image: str | None = None
    max_duration: float | None = None
    _required_properties: tuple[str] = (  # type: ignore[assignment]
        "id",
        "name",
        "status",
        "createdAt",
        "updatedAt",
        "reason",
        "createdByEmail",
        "priority",
        "preemptible",
        "retryOnSystemFailure",
        "resumptions",
        "isDeleted",
        "runType",
    )

    @property
    def config(self) -> RunConfig | None:
        """The run's config as submitted (mcli's guide calls it Run.config): submitted_config."""
        return self.submitted_config

    @property
    def started_at(self) -> datetime | None:
        """When its first resumption started."""
        return next((r.started_at for r in self.resumptions if r.started_at), None)

    @property
    def completed_at(self) -> datetime | None:
        """When its last resumption ended (None while it has not; a stopped one without an end skipped)."""
        for r in reversed(self.resumptions):
            if r.ended_at:
                return r.ended_at
            if r.status is not RunStatus.STOPPED:
                return None
        return None

    @property
    def display_name(self) -> str:
        if self.retry_on_system_failure:
            return f"{self.name} 🐕"
        return f"{self.name} (Deleted)" if self.is_deleted else self.name

    def _seconds_in(self, status: RunStatus) -> float:
        now = datetime.now(UTC)
        return sum(((s.ended_at or now) - s.started_at).total_seconds() for s in self.lifecycle if s.status is status)

    @property
    def cumulative_pending_time(self) -> float:
        """Seconds spent PENDING, over all resumptions."""
        return self._seconds_in(RunStatus.PENDING)

    @property
    def cumulative_running_time(self) -> float:
        """Seconds spent RUNNING, over all resumptions."""
        return self._seconds_in(RunStatus.RUNNING)

    @property
    def resumption_count(self) -> int:
        return len(self.resumptions)

    @property
    def max_duration_seconds(self) -> int | None:
        return int(self.max_duration * 3600) if self.max_duration else None

    def get_gpu_hours(self) -> float:
        """GPU hours used: each started resumption's GPUs times its hours (the latest, while running, until now)."""
        total = 0.0
        for r in self.resumptions:
            if r.started_at is None:
                continue
            end = r.ended_at
            if end is None:
                if r.index != self.latest_resumption.index:
                    continue
                end = datetime.now(UTC)
            total += r.gpus * (end - r.started_at).total_seconds() / 3600
        return total

    def clone(
        self,
        name: str | None = None,
        image: str | None = None,
        cluster: str | None = None,
        instance: str | None = None,
        nodes: int | None = None,
        gpu_type: str | None = None,
        gpus: int | None = None,
        priority: str | None = None,
        preemptible: bool | None = None,
        max_retries: int | None = None,
        max_duration: float | None = None,
    ) -> Run:
        """Submit a new run with this one's config, the arguments given overriding it."""
        from launcher.mcli.runs import create_run

        config = self.submitted_config or self.refresh().submitted_config
        assert config is not None  # every launcher run keeps its spec
        config = RunConfig.from_dict(config.to_spec())
        config.name = name or config.name
        config.image = image or config.image
        compute = {"cluster": cluster, "instance": instance, "nodes": nodes, "gpu_type": gpu_type, "gpus": gpus}
        config.compute.update({k: v for k, v in compute.items() if v is not None})  # type: ignore[typeddict-item]
        scheduling = {
            "priority": priority,
            "preemptible": preemptible,
            "max_retries": max_retries,
            "max_duration": max_duration,
        }
        config.scheduling.update({k: v for k, v in scheduling.items() if v is not None})  # type: ignore[typeddict-item]
        return create_run(config)

    def refresh(self) -> Run:
        """The run as it is now."""
        from launcher.mcli.runs import get_run

        return get_run(self)

    def stop(self) -> Run:
        from launcher.mcli.runs import stop_run

        return stop_run(self)

    def delete(self) -> Run:
        from launcher.mcli.runs import delete_run

        return delete_run(self)

    def update(
        self,
        preemptible: bool | None = None,
        priority: str | None = None,
        max_retries: int | None = None,
        retry_on_system_failure: bool | None = None,
        max_duration: float | None = None,
    ) -> Run:
        from launcher.mcli.runs import update_run

        return update_run(
            self,
            preemptible=preemptible,
            priority=priority,
            max_retries=max_retries,
            retry_on_system_failure=retry_on_system_failure,
            max_duration=max_duration,
        )

    def update_metadata(self, metadata: dict[str, Any]) -> Run:
        from launcher.mcli.runs import update_run_metadata

        return update_run_metadata(self, metadata)


def status_of(status: Any) -> RunStatus:
    """mcli's RunStatus of the launcher's (they share their names)."""
    return RunStatus.from_string(getattr(status, "value", status))


def from_launcher(run: LauncherRun) -> Run:
    """mcli's Run of the launcher's Run record."""
    spec = run.spec or {}
    compute = spec.get("compute") or {}
    scheduling = spec.get("scheduling") or {}
    cluster = run.cluster or ""
    gpus = int(compute.get("gpus") or 0)
    gpu_type = str(compute.get("gpu_type") or ("none" if not gpus else ""))
    cpus = int(float(compute.get("cpus") or 0))
    nodes = run.nodes

    def resumption(index: int, status: RunStatus, started, ended, reason) -> Resumption:
        return Resumption(index, cluster, gpus, cpus, gpu_type, nodes, status, None, started, ended, reason)

    resumptions = [
        resumption(a.index - 1, status_of(a.status), a.started_at, a.ended_at, a.reason) for a in run.attempts
    ] or [resumption(0, status_of(run.status), run.started_at, run.ended_at, run.reason)]
    latest = run.attempts[-1] if run.attempts else None
    lifecycle = []
    for i, e in enumerate(run.events):
        after = run.events[i + 1].at if i + 1 < len(run.events) else None
        lifecycle.append(RunLifecycle(e.attempt - 1, status_of(e.status), e.at, after, e.reason))
    events = [
        FormattedRunEvent(e.status.value, e.at, e.reason or f"Run {e.status.value.lower()}", e.attempt - 1)
        for e in run.events
    ]
    config = RunConfig.from_dict(dict(spec))
    interactive = "interactive run: waiting" in str(spec.get("command") or "")
    return Run(
        run_uid=run.name,
        name=run.name,
        status=status_of(run.status),
        created_at=run.created_at,
        updated_at=run.events[-1].at if run.events else run.created_at,
        created_by="",
        priority=str(scheduling.get("priority") or "auto"),
        preemptible=bool(scheduling.get("preemptible")),
        retry_on_system_failure=bool(scheduling.get("retry_on_system_failure")),
        cluster=cluster,
        gpus=gpus,
        gpu_type=gpu_type,
        cpus=cpus,
        node_count=nodes,
        latest_resumption=resumptions[-1],
        is_deleted=False,
        run_type=RunType.INTERACTIVE if interactive else RunType.TRAINING,
        max_retries=scheduling.get("max_retries"),
        reason=run.reason,
        nodes=[Node(r.rank, r.node or "", r.status.value, r.reason or "") for r in (latest.ranks if latest else [])],
        submitted_config=config,
        metadata=dict(spec.get("metadata") or {}),
        last_resumption_id=str(resumptions[-1].index),
        resumptions=resumptions,
        events=events,
        lifecycle=lifecycle,
        image=spec.get("image"),
        max_duration=scheduling.get("max_duration"),
    )
