"""What a backend may offer beyond the contract's required part (launcher.backends.base),
declared once, as SkyPilot's clouds do: a backend class names each `Feature` it lacks in
`UNSUPPORTED`, with the reason in the words a refusal prints; for each other feature that
has methods it inherits the mixin below that provides them (as dstack's ComputeWith...
classes). Backend.__init_subclass__ checks that the two agree, so they cannot drift.
Callers ask `backend.supports(Feature.X)`, or `backend.require(Feature.X)`, which raises
NotSupported with the reason; never a backend's name or class.

The records a single capability returns (GPU and queue usage, an image pull, a run's place
in its queue) live here with it, not in the contract's core.
"""

from __future__ import annotations

import abc
import enum
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launcher.backends.runstatus import RunStatus
from launcher.errors import InputError

if TYPE_CHECKING:
    from launcher.backends.base import Run
    from launcher.spec.models import RunSpec


class Feature(str, enum.Enum):
    """An optional capability. The value is what the backend cannot do, for a refusal:
    "the local backend cannot probe a cluster: ..." """

    RESTART = "restart a run"
    """Restartable.restart(): a new attempt of a stopped or failed run (`run -r NAME`)."""
    UPDATE_MAX_DURATION = "change scheduling.max_duration"
    UPDATE_PRIORITY = "change scheduling.priority"
    UPDATE_MAX_RETRIES = "change scheduling.max_retries"
    """Updatable.update() changes that scheduling field of a run that has not ended (`update run`)."""
    EXEC = "exec into a run"
    """Exec.exec(): a command in a rank of a run (`launcher exec`, `connect`, `interactive`)."""
    PORT_FORWARD = "port-forward"
    """PortForward.port_forward(): a rank's port on 127.0.0.1 (`launcher port-forward`)."""
    GPU_USAGE = "count its GPUs"
    """GpuUsageReport.gpu_usage() and free_gpus() (`launcher util`, placement across clusters)."""
    ON_DEMAND_COMPUTE = "make new machines for each run"
    """OnDemandCompute.on_demand_gpus(): what a cluster made for the run would give it
    (placement across clusters ranks such a profile after one with the GPUs free now)."""
    QUEUE_USAGE = "count its queues' quota"
    """QueueUsageReport.queue_usage(): the GPU quota of the queues a profile submits to."""
    CLUSTER_PROBE = "probe a cluster"
    """ClusterProbe.probe(): what the cluster serves, for `cluster add` to record."""
    IMAGE_PROBE = "probe an image pull"
    """ImageProbe.probe_image() and run_images() (`cluster check`)."""
    CODE_SNAPSHOT = "ship a code snapshot"
    """CodeSnapshots.code_limit(): a run's `code:` snapshot goes with it (`run --code`)."""
    LOCAL_ARTIFACTS = "read a run's files on this machine"
    """LocalArtifacts.log_path() and artifacts_dir(): readers (metrics) index files instead of
    re-streaming logs."""
    TRACKER_METRICS = "read a run's metrics from an experiment tracker"
    """TrackerMetrics.tracker_metrics(): a run's metric history from the tracker its trainer
    logged to (a Databricks workspace's MLflow); `launcher metrics` prefers it to the records
    in the logs."""
    SECRETS_IN_CLUSTER = "keep secrets in a cluster"
    """The run's secrets live where it runs (secret_store() asks the cluster), so a dry-run
    names them from the spec and never reads them. No methods: a trait."""

    def __str__(self) -> str:
        return self.value


# What `update run` may change: scheduling fields, as the spec names them, and their features.
UPDATE_FEATURES = {
    "max_duration": Feature.UPDATE_MAX_DURATION,
    "priority": Feature.UPDATE_PRIORITY,
    "max_retries": Feature.UPDATE_MAX_RETRIES,
}
UPDATABLE = tuple(UPDATE_FEATURES)


class NotSupported(InputError):
    """An action the run's backend cannot do (the message says which and why)."""


# ---------------------------------------------------------------- the mixins


class Restartable(abc.ABC):
    @abc.abstractmethod
    def restart(self, name: str) -> Run:
        """Start a new attempt of a run that ended STOPPED or FAILED (`run -r NAME`): the same
        run, its spec and secrets as submitted, attempt N+1; its retry budget (max_retries)
        counts afresh from it. A COMPLETED run, or one still active, is refused with an
        InputError saying why (refuse_restart)."""

    @staticmethod
    def refuse_restart(run: Run) -> None:
        """A restart is for a run that ended STOPPED or FAILED: say why any other is refused."""
        if run.status is RunStatus.COMPLETED:
            raise InputError(
                f"run {run.name} completed: only a stopped or failed run can be restarted",
                hint=f"`launcher run --clone {run.name}` submits a copy of it",
            )
        if not run.status.is_terminal:
            raise InputError(
                f"run {run.name} is {run.status.value}: only a stopped or failed run can be restarted",
                hint=f"stop it first (`launcher stop {run.name}`)",
            )


class Updatable(abc.ABC):
    name: str

    @abc.abstractmethod
    def update(
        self,
        name: str,
        *,
        max_duration: float | None = None,
        priority: str | None = None,
        max_retries: int | None = None,
    ) -> Run:
        """Change scheduling fields of a run that has not ended (`update run`): the record keeps
        the new values (describe shows them) and the run acts on them from now on. A field the
        backend cannot change (its UPDATE_* feature unsupported) or an ended run is refused
        with an InputError that says why, before anything changes (refuse_update)."""

    def refuse_update(self, run: Run, changes: dict[str, Any]) -> None:
        """The checks every update() makes before it writes: something to change, a run that
        has not ended, and only fields this backend can change on it."""
        if not changes:
            raise InputError("nothing to update", hint="give --max-duration HOURS, --priority P or --max-retries N")
        if run.status.is_terminal:
            raise InputError(
                f"run {run.name} has ended ({run.status.value}): there is nothing to update",
                hint=f"`launcher run -r {run.name}` starts it again" if run.status is not RunStatus.COMPLETED else None,
            )
        for field_name in changes:
            why = type(self).UNSUPPORTED.get(UPDATE_FEATURES[field_name])  # type: ignore[attr-defined]
            if why:
                raise InputError(
                    f"the {self.name} backend cannot change scheduling.{field_name} of run {run.name}: {why}"
                )
        from launcher.spec.models import MAX_RETRIES  # the spec's bound; loaded by an update alone

        if changes.get("max_retries") is not None and not 0 <= changes["max_retries"] <= MAX_RETRIES:
            raise InputError(f"--max-retries must be from 0 to {MAX_RETRIES}, got {changes['max_retries']}")
        if changes.get("max_duration") is not None and not 0 < changes["max_duration"] < math.inf:
            raise InputError(f"--max-duration must be a finite number of hours above 0, got {changes['max_duration']}")


class Exec(abc.ABC):
    @abc.abstractmethod
    def exec(self, name: str, argv: list[str], *, rank: int = 0, tty: bool = False) -> int:
        """Run argv in rank `rank` of run `name` (its environment, secrets and working directory),
        attached to this process's stdin/stdout/stderr (a pseudo-terminal when tty); return its exit code."""


class PortForward(abc.ABC):
    @abc.abstractmethod
    def port_forward(
        self,
        name: str,
        *,
        rank: int,
        local_port: int,
        remote_port: int,
        ready: Callable[[int], None] | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        """Serve rank `rank`'s remote_port on 127.0.0.1:local_port (0: any free port; ready(port) is called once
        listening) until stop is set."""


@dataclass(frozen=True)
class GpuUsage:
    """The GPUs of one type where a backend runs (`launcher util`): how many its nodes can
    give (allocatable) and how many its pods or runs hold (requests). gpu_type "none":
    nodes without GPUs."""

    gpu_type: str
    nodes: int
    gpus: int
    used: int

    @property
    def free(self) -> int:
        return max(0, self.gpus - self.used)


@dataclass(frozen=True)
class FreeGpus:
    """The GPUs of the type a run asks for that a backend could give it now (placement
    across clusters, launcher.sdk.placement)."""

    gpu_type: str
    """As this backend names it ("none": the run asks for no GPU)."""
    free: int
    total: int
    source: str = "nodes"
    """Where the numbers come from: "nodes" (their allocatable GPUs less the pods' requests),
    "queue NAME" (a Kueue ClusterQueue's nominal quota less its usage), or, on_demand, what is
    made for the run ("a new job cluster")."""
    on_demand: bool = False
    """The machines are made for the run (OnDemandCompute): it fits, once they have started."""


class GpuUsageReport(abc.ABC):
    @abc.abstractmethod
    def gpu_usage(self) -> list[GpuUsage]:
        """The GPUs of each type on the machines this backend runs on, and how many are in
        use, one entry per gpu_type (with "none" for nodes without GPUs)."""

    def free_gpus(self, spec: RunSpec) -> FreeGpus:
        """The GPUs of the type `spec` asks for, free here now, from gpu_usage(): those of its
        compute.gpu_type, or of every GPU type where it names none."""
        wanted = spec.compute.gpu_type if spec.compute.gpus else "none"
        usage = [u for u in self.gpu_usage() if u.gpu_type == wanted or (wanted is None and u.gpu_type != "none")]
        return FreeGpus(wanted or "gpu", sum(u.free for u in usage), sum(u.gpus for u in usage))


class OnDemandCompute(abc.ABC):
    @abc.abstractmethod
    def on_demand_gpus(self, spec: RunSpec) -> FreeGpus:
        """The GPUs of the type `spec` asks for that the machines made for this run would
        give it (FreeGpus.on_demand): all it asks for, where check(spec) takes it. Offline:
        there is no pool to count."""


@dataclass
class QueueUsage:
    """One queue's GPU quota where a backend runs (`launcher util`): Kueue's ClusterQueue of a
    profile's queue, its nominal GPUs, those its admitted workloads hold, and what waits."""

    queue: str
    """The profile's LocalQueue."""
    cluster_queue: str
    quota: int
    used: int
    pending_workloads: int
    pending_gpus: int | None = None
    """GPUs the pending workloads ask for, of those the launcher could list (None: none listed)."""

    @property
    def free(self) -> int:
        return max(0, self.quota - self.used)


@dataclass
class Eviction:
    """A run taken off its nodes by its queue (Kueue: the Workload's Evicted condition, with
    Preempted's detail): a system event, never the run's own failure."""

    reason: str
    """Kueue's reason: Preempted, InactiveWorkload, PodsReadyTimeout, ..."""
    message: str = ""
    at: datetime | None = None
    count: int = 1
    """How many times the run was evicted in all (Kueue counts them; the conditions keep the last)."""


@dataclass
class QueueState:
    """Where a run stands in its cluster's queue (Kueue on Kubernetes): read from its
    Workload, for `get runs` and describe's Queue section (Run.queue)."""

    queue: str
    """The LocalQueue the run was submitted to."""
    cluster_queue: str | None = None
    workload: str | None = None
    admitted: bool = False
    position: int | None = None
    """1-based, among the pending workloads of the LocalQueue (None: not pending, or unknown)."""
    pending: int | None = None
    """How many workloads are pending in the LocalQueue (where the position was counted)."""
    position_in_cluster_queue: int | None = None
    position_from: str | None = None
    """Where the position came from: Kueue's visibility API, or the namespace's Workloads."""
    reason: str | None = None
    """Why Kueue has not admitted it: the QuotaReserved=False condition's message."""
    since: datetime | None = None
    """When it (last) started waiting in the queue."""
    evictions: list[Eviction] = field(default_factory=list)


class QueueUsageReport(abc.ABC):
    @abc.abstractmethod
    def queue_usage(self) -> list[QueueUsage]:
        """The GPU quota of the queues this profile submits to, their use and what waits
        (none where nothing queues runs)."""


@dataclass(frozen=True)
class ClusterReport:
    """What a cluster serves that runs need or use, as a probe found (`cluster add`, `cluster check`)."""

    serves: dict[str, bool]
    """API name: served (e.g. {"JobSet": True, "Kueue": False})."""
    problems: list[str]
    """What keeps every run off the cluster, each with how to fix it (e.g. JobSet's install command)."""


class ClusterProbe(abc.ABC):
    @abc.abstractmethod
    def probe(self) -> ClusterReport:
        """What the cluster serves (`cluster add`, `cluster check`), asked quickly: an
        unreachable cluster raises a LauncherError."""


@dataclass(frozen=True)
class ImagePull:
    """Whether the cluster could pull an image a run needs, as a probe found (`cluster check`)."""

    image: str
    pulled: bool | None
    """None: the probe got no answer in time (a pod not scheduled, a slow pull)."""
    detail: str
    """What the cluster said: "pulled", the pull error and its message, or why there was no answer."""


class ImageProbe(abc.ABC):
    @abc.abstractmethod
    def probe_image(self, image: str, *, timeout: float = 60.0) -> ImagePull:
        """Whether the cluster can pull `image` for a run's pods, asked by starting (and then
        deleting) one short-lived pod; an unreachable cluster raises a LauncherError."""

    def run_images(self) -> list[str]:
        """The images every run of this profile pulls besides its spec's own (offline)."""
        return []


class CodeSnapshots(abc.ABC):
    @abc.abstractmethod
    def code_limit(self) -> int:
        """The most bytes a code snapshot (launcher.pod.code_archive) may pack to for a run of
        this backend."""


class LocalArtifacts(abc.ABC):
    @abc.abstractmethod
    def log_path(self, name: str, rank: int, attempt: int) -> Path | None:
        """The masked log file of one rank of one attempt, or None if there is none yet."""

    @abc.abstractmethod
    def artifacts_dir(self, name: str) -> Path:
        """Where the run's artifacts (metrics.jsonl, checkpoints by default) go."""


@dataclass
class TrackerRun:
    """One run in an experiment tracker (an MLflow run) that a launcher run's trainer logged
    to: every metric's history, as the tracker keeps it."""

    source: str
    """What it is, for the user: "MLflow run 3f2a..." """
    started_at: datetime | None
    history: dict[str, list[tuple[int, float, float]]]
    """Metric name -> its points (step, Unix seconds, value), in the order they were logged."""


class TrackerMetrics(abc.ABC):
    @abc.abstractmethod
    def tracker_metrics(self, run: Run) -> list[TrackerRun]:
        """The tracker runs that `run`'s trainer logged to, oldest first (one per attempt that
        logged); [] where it logged to none this backend can read, and the caller reads the
        metric records of the logs instead. An unreachable tracker raises a LauncherError."""


# The mixin that provides each feature's methods (SECRETS_IN_CLUSTER has none).
MIXINS: dict[Feature, type] = {
    Feature.RESTART: Restartable,
    Feature.UPDATE_MAX_DURATION: Updatable,
    Feature.UPDATE_PRIORITY: Updatable,
    Feature.UPDATE_MAX_RETRIES: Updatable,
    Feature.EXEC: Exec,
    Feature.PORT_FORWARD: PortForward,
    Feature.GPU_USAGE: GpuUsageReport,
    Feature.ON_DEMAND_COMPUTE: OnDemandCompute,
    Feature.QUEUE_USAGE: QueueUsageReport,
    Feature.CLUSTER_PROBE: ClusterProbe,
    Feature.IMAGE_PROBE: ImageProbe,
    Feature.CODE_SNAPSHOT: CodeSnapshots,
    Feature.LOCAL_ARTIFACTS: LocalArtifacts,
    Feature.TRACKER_METRICS: TrackerMetrics,
}


def check_declaration(cls: type, unsupported: dict[Feature, str]) -> None:
    """Raise TypeError where a backend class's UNSUPPORTED and its mixins disagree: a feature
    it provides the methods of and also names unsupported, or one it neither provides nor
    says why it lacks. Update's three fields share one mixin: it is there where any is."""
    for feature, mixin in MIXINS.items():
        provided = issubclass(cls, mixin)
        if feature in UPDATE_FEATURES.values():
            if provided and all(f in unsupported for f in UPDATE_FEATURES.values()):
                raise TypeError(f"{cls.__name__} is Updatable but names every update field unsupported")
            if not provided and feature not in unsupported:
                raise TypeError(f"{cls.__name__}: {feature.name} needs the Updatable mixin or a reason in UNSUPPORTED")
            continue
        if provided and feature in unsupported:
            raise TypeError(f"{cls.__name__} provides {feature.name} ({mixin.__name__}) and names it unsupported")
        if not provided and feature not in unsupported:
            raise TypeError(
                f"{cls.__name__}: {feature.name} needs the {mixin.__name__} mixin or a reason in UNSUPPORTED"
            )
