"""The contract every backend implements, and the records it returns.

The CLI and the dashboard talk only to this contract (and registry.py, which opens a
backend for a profile). A backend hides where runs execute (this machine, a Kubernetes
cluster): it checks and plans a resolved `RunSpec` offline, accepts it plus the secrets
the run uses, and reports runs as `Run` records whose statuses are mcli's. What sets one
backend apart from another is declared once, as its `Capabilities`, never asked of its name.
"""

from __future__ import annotations

import abc
import enum
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # keep `launcher --help` free of pydantic
    from launcher.pod.code_archive import Snapshot
    from launcher.config import Profile
    from launcher.secrets.kinds import Secret
    from launcher.secrets.store import SecretStore
    from launcher.spec.models import RunSpec


class RunStatus(str, enum.Enum):
    PENDING = "PENDING"
    QUEUED = "QUEUED"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    TERMINATING = "TERMINATING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"
    UNKNOWN = "UNKNOWN"

    @property
    def is_terminal(self) -> bool:
        return self in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.STOPPED)

    def __str__(self) -> str:
        return self.value


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def retry_due(at: datetime) -> str:
    """A run's reason while it waits out a retry's backoff, in both backends' words."""
    return f"a retry is due at {at.astimezone().strftime('%H:%M:%S')}"


@dataclass
class StatusEvent:
    """A status the run entered, when, and why."""

    status: RunStatus
    at: datetime
    attempt: int = 1
    reason: str | None = None


@dataclass
class RankState:
    """One node rank (one process on the local backend, one pod on Kubernetes)."""

    rank: int
    status: RunStatus
    exit_code: int | None = None
    reason: str | None = None
    node: str | None = None


@dataclass
class Attempt:
    """One execution of the whole group; a retry starts attempt N+1 (mcli: a resumption)."""

    index: int
    status: RunStatus
    started_at: datetime | None = None
    ended_at: datetime | None = None
    reason: str | None = None
    ranks: list[RankState] = field(default_factory=list)


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
    Workload, for `get runs` and describe's Queue section."""

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


@dataclass
class Run:
    name: str
    backend: str
    status: RunStatus
    created_at: datetime
    spec: dict[str, Any]
    """The spec as submitted (resolved, secret-free), as a plain mapping."""
    cluster: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    reason: str | None = None
    exit_code: int | None = None
    attempts: list[Attempt] = field(default_factory=list)
    events: list[StatusEvent] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """Named warnings from submit about fields the backend cannot fully honour."""
    retry_at: datetime | None = None
    """When the next attempt is due, while the run waits out the backoff after a failed one."""
    backoff: str | None = None
    """How this run's retries are spaced, in words, where the backend does not follow the
    spec's RetryPolicy (the JobSet controller restarts at once); None: it follows it."""
    queue: QueueState | None = None
    """Its place in the cluster's queue, where one admits it (Kueue); None without a queue."""

    @property
    def crash_loop(self) -> bool:
        """Every attempt that ended (two at least) failed within seconds of starting
        (launcher.spec.retry.CRASH_SECONDS): the command crashes, retries will not help."""
        from launcher.spec.retry import crashed

        ended = [a for a in self.attempts if a.status.is_terminal]
        return len(ended) >= 2 and all(
            a.status is RunStatus.FAILED and a.started_at is not None and a.ended_at is not None
            and crashed((a.ended_at - a.started_at).total_seconds()) for a in ended)

    @property
    def config(self) -> dict[str, Any]:
        """The spec as submitted (mcli's Run.config): `spec` by its SDK name."""
        return self.spec

    @property
    def nodes(self) -> int:
        return int(self.spec.get("compute", {}).get("nodes") or 1)

    @property
    def current_attempt(self) -> int:
        return self.attempts[-1].index if self.attempts else 1


@dataclass(frozen=True)
class LogLine:
    rank: int
    text: str
    """One line without its trailing newline, secrets already masked."""
    attempt: int = 1
    timestamp: datetime | None = None

    def __str__(self) -> str:
        return self.text


@dataclass
class Plan:
    """What a submit would do, as `run --dry-run` prints it: a document (manifests on
    Kubernetes), notes, and named warnings about fields the backend cannot fully honour."""

    document: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ImagePull:
    """Whether the cluster could pull an image a run needs, as a probe found (`cluster check`)."""

    image: str
    pulled: bool | None
    """None: the probe got no answer in time (a pod not scheduled, a slow pull)."""
    detail: str
    """What the cluster said: "pulled", the pull error and its message, or why there was no answer."""


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


@dataclass(frozen=True)
class FreeGpus:
    """The GPUs of the type a run asks for that a backend could give it now (placement
    across clusters, launcher.sdk.placement)."""

    gpu_type: str
    """As this backend names it ("none": the run asks for no GPU)."""
    free: int
    total: int
    source: str = "nodes"
    """Where the numbers come from: "nodes" (their allocatable GPUs less the pods' requests), or
    "queue NAME" (a Kueue ClusterQueue's nominal quota less its usage)."""


@dataclass(frozen=True)
class Capabilities:
    """What a backend offers beyond the core of the contract, declared once on its class
    (as dstack's ComputeWith... classes), so that callers ask for a capability, not a name."""

    dry_run: bool = False
    """plan() says offline what submit() would create (`run --dry-run`)."""
    local_artifacts: bool = False
    """Its runs' logs and artifacts lie on this machine's disk: the class is LocalArtifacts."""
    secrets_in_cluster: bool = False
    """The run's secrets live where it runs (secret_store() asks the cluster), so a dry-run
    names them from the spec and never reads them."""
    cluster_probe: bool = False
    """probe() asks the cluster what it serves, for `cluster add` to record in the profile."""
    image_probe: bool = False
    """probe_image() asks the cluster, with a short-lived pod, whether it can pull an image
    (`cluster check`)."""
    restart: bool = False
    """restart() starts a new attempt of a stopped or failed run (`run -r NAME`)."""
    updatable: frozenset[str] = frozenset()
    """The scheduling fields (UPDATABLE) that update() changes on a run that has not ended."""
    not_updatable: tuple[tuple[str, str], ...] = ()
    """(field, why) for each of UPDATABLE it cannot change, in the words update()'s refusal gives."""
    exec: bool = False
    """exec() runs a command in a rank of a run (`launcher exec`, `connect`, `interactive`)."""
    port_forward: bool = False
    """port_forward() serves a rank's port on 127.0.0.1 (`launcher port-forward`)."""

    def cannot_update(self, field: str) -> str | None:
        """Why update() cannot change `field` (a scheduling field), or None where it can."""
        if field in self.updatable:
            return None
        return dict(self.not_updatable).get(field, "this backend cannot change it on a run")


# What `update run` may change: scheduling fields, as the spec names them.
UPDATABLE = ("max_duration", "priority", "max_retries")


class Backend(abc.ABC):
    """Where runs execute. Every method is safe to call from a fresh process."""

    name: str
    capabilities: Capabilities = Capabilities()

    @classmethod
    def open(cls, profile: Profile, home: Path) -> Backend:
        """The backend of a config.yaml profile, its settings parsed (a bad one is an
        InputError naming it). Opening contacts nothing; the first call that needs to does."""
        raise NotImplementedError(f"the {cls.name} backend cannot be opened from a profile")

    def check(self, spec: RunSpec) -> list[str]:
        """Raise an InputError for what submit(spec) would refuse, offline, before anything
        starts: `launcher validate`, `run --dry-run` and `run` all ask this, so that validate
        refuses what run refuses. `spec` is named as the run will be (its name counts).
        Every backend asks check_exec here (its ranks' exec takes the command and the
        environment); check_secrets() adds the secrets.
        Returns the named warnings about fields this backend cannot fully honour, the ones
        plan() and submit() give, so that validate says them too."""
        return []

    def check_secrets(self, spec: RunSpec, secrets: list[Secret]) -> None:
        """Raise an InputError for what submit(spec, secrets) would refuse of the secrets the
        run gets, values included: a mount path no run may use (one stored before the rule,
        or made outside the launcher), two that collide, env values that no exec of the rank
        takes with its command. The CLI asks it after check() wherever it has the secrets
        (`run`; `validate` and `run --dry-run` where they live on this machine); submit()
        asks it again."""
        from launcher.errors import InputError
        from launcher.secrets.kinds import check_mount_path, collision, project

        for s in secrets:
            mount = project(s).mount_path
            problem = check_mount_path(mount) if mount else None
            if problem:
                raise InputError(f"secret {s.name!r}: {problem}",
                                 hint=f"create it again with another --mount-path (`launcher secret create "
                                      f"{s.kind.value} {s.name} ... --mount-path /secrets/{s.name} --replace`)")
        problem = collision(secrets)
        if problem:
            raise InputError(problem)
        self.check_exec(spec, secrets)

    def check_exec(self, spec: RunSpec, secrets: list[Secret]) -> None:
        """Raise an InputError where a rank's exec of `bash -c COMMAND` could not take the
        command and environment (a NUL byte, a string or a total past Linux's limits),
        counting what the rank inherits (rank_exec_limits). check() asks it of the spec,
        check_secrets() with the secrets' values."""
        from launcher.rank_exec import check_rank_exec

        inherited, arg_max = self.rank_exec_limits()
        check_rank_exec(spec, secrets, inherited=inherited, arg_max=arg_max, where=self.name)

    def rank_exec_limits(self) -> tuple[dict[str, str], int]:
        """What a rank's exec gets beside its spec and secrets, as far as this backend knows
        offline: the environment it inherits, and ARG_MAX where it runs (a pod's own image
        environment is unknown: launcher.pod.limits.HEADROOM stands for it)."""
        from launcher.pod.limits import DEFAULT_ARG_MAX

        return {}, DEFAULT_ARG_MAX

    def plan(self, spec: RunSpec, secrets: list[Secret] | None = None, *, code: Snapshot | None = None) -> Plan:
        """What `submit(spec, secrets)` would create, computed offline: it never contacts a
        cluster. `secrets` None means the secrets this backend can name without asking one;
        `code` the run's packed code snapshot."""
        raise NotImplementedError(f"the {self.name} backend cannot show a dry-run")

    def secret_store(self) -> SecretStore:
        """Where this backend's runs find their secrets (`launcher secret`, run's secrets)."""
        raise NotImplementedError(f"the {self.name} backend keeps no secrets")

    def probe(self) -> dict[str, bool]:
        """What the cluster serves that its profile records (`cluster add`), asked quickly:
        an unreachable cluster raises a LauncherError. Capabilities.cluster_probe says whether
        there is anything to ask."""
        return {}

    def profile_warnings(self) -> list[str]:
        """Named warnings about the profile itself, found offline (`cluster add` prints them):
        settings with which runs would fail wherever they go."""
        return []

    def run_images(self) -> list[str]:
        """The images every run of this profile pulls besides its spec's own (offline)."""
        return []

    def gpu_usage(self) -> list[GpuUsage]:
        """The GPUs of each type on the machines this backend runs on, and how many are in
        use, one entry per gpu_type (with "none" for nodes without GPUs)."""
        raise NotImplementedError(f"the {self.name} backend cannot count its GPUs")

    def queue_usage(self) -> list[QueueUsage]:
        """The GPU quota of the queues this profile submits to, their use and what waits
        (none where nothing queues runs)."""
        return []

    def free_gpus(self, spec: RunSpec) -> FreeGpus:
        """The GPUs of the type `spec` asks for, free here now, from gpu_usage(): those of its
        compute.gpu_type, or of every GPU type where it names none."""
        wanted = spec.compute.gpu_type if spec.compute.gpus else "none"
        usage = [u for u in self.gpu_usage() if u.gpu_type == wanted or (wanted is None and u.gpu_type != "none")]
        return FreeGpus(wanted or "gpu", sum(u.free for u in usage), sum(u.gpus for u in usage))

    def probe_image(self, image: str, *, timeout: float = 60.0) -> ImagePull:
        """Whether the cluster can pull `image` for a run's pods, asked by starting (and then
        deleting) one short-lived pod; an unreachable cluster raises a LauncherError.
        Capabilities.image_probe says whether there is a cluster to ask."""
        raise NotImplementedError(f"the {self.name} backend pulls no images")

    def code_limit(self) -> int | None:
        """The most bytes a code snapshot (launcher.pod.code_archive) may pack to for a run of
        this backend; None where it cannot ship one."""
        return None

    @abc.abstractmethod
    def submit(self, spec: RunSpec, secrets: list[Secret], *, code: Snapshot | None = None) -> Run:
        """Start a run. `secrets` are the secrets it uses, values included; `code` is the
        run's packed code snapshot where its spec has `code:`."""

    @abc.abstractmethod
    def get(self, name: str) -> Run:
        """The run's current record. Raises NotFoundError."""

    @abc.abstractmethod
    def list(self) -> list[Run]:
        """All runs, newest first."""

    @abc.abstractmethod
    def watch(self, name: str, *, poll_seconds: float = 0.5, reconcile: bool = False) -> Iterator[Run]:
        """Yield the run each time its status changes, starting with the current one;
        return after yielding a terminal status. With `reconcile`, also act on what is
        due as `reconcile(name)` does (`run --follow`); without it, a watch only reads."""

    def reconcile(self, name: str | None = None, *, carry_seconds: float = 0.0) -> list[Run]:
        """Act on what the runs' observations call for, once: start a retry that is due,
        end a run that can never start, remove what a submit that died part way left. One
        run, or every run (newest first); return them as they are after. `get`, `list`,
        `logs` and a `watch` without `reconcile` never act: they are reads. A backend whose
        runs move by themselves (the local supervisor) has nothing to do.

        An action whose steps wait on the cluster (a restart waits for the old attempt to
        be gone) is left for the next pass, unless `carry_seconds` says how long this pass
        may keep carrying it on: a caller after which nothing acts (one `launcher
        reconcile`) passes some."""
        return [self.get(name)] if name is not None else self.list()

    @abc.abstractmethod
    def logs(
        self,
        name: str,
        *,
        rank: int | None = None,
        attempt: int | None = None,
        tail: int | None = None,
        follow: bool = False,
        previous: bool = False,
        cancel: threading.Event | None = None,
    ) -> Iterator[LogLine]:
        """The run's log lines, secrets masked. rank=None means every rank.
        attempt=None means the latest. With follow, keep yielding until the attempt ends.

        Setting `cancel`, from any thread, ends a followed iterator within about a second,
        even while it waits for a line, without draining; an iterator ended that way, or
        closed, or failed, has released its threads and connections (a long-lived reader,
        the dashboard, follows logs for clients that may leave at any time)."""

    def restart(self, name: str) -> Run:
        """Start a new attempt of a run that ended STOPPED or FAILED (`run -r NAME`): the same
        run, its spec and secrets as submitted, attempt N+1; its retry budget (max_retries)
        counts afresh from it. A COMPLETED run, or one still active, is refused with an
        InputError saying why. Capabilities.restart says whether the backend can."""
        from launcher.errors import InputError

        raise InputError(f"the {self.name} backend cannot restart a run", hint=f"`launcher run --clone {name}` "
                         "submits a copy of it")

    @staticmethod
    def refuse_restart(run: Run) -> None:
        """A restart is for a run that ended STOPPED or FAILED: say why any other is refused."""
        from launcher.errors import InputError

        if run.status is RunStatus.COMPLETED:
            raise InputError(f"run {run.name} completed: only a stopped or failed run can be restarted",
                             hint=f"`launcher run --clone {run.name}` submits a copy of it")
        if not run.status.is_terminal:
            raise InputError(f"run {run.name} is {run.status.value}: only a stopped or failed run can be restarted",
                             hint=f"stop it first (`launcher stop {run.name}`)")

    def update(self, name: str, *, max_duration: float | None = None, priority: str | None = None,
               max_retries: int | None = None) -> Run:
        """Change scheduling fields of a run that has not ended (`update run`): the record keeps
        the new values (describe shows them) and the run acts on them from now on. A field the
        backend cannot change (Capabilities.cannot_update) or an ended run is refused with an
        InputError that says why, before anything changes."""
        from launcher.errors import InputError

        raise InputError(f"the {self.name} backend cannot update a run")

    def refuse_update(self, run: Run, changes: dict[str, Any]) -> None:
        """The checks every update() makes before it writes: something to change, a run that
        has not ended, and only fields this backend can change on it."""
        from launcher.errors import InputError

        if not changes:
            raise InputError("nothing to update", hint="give --max-duration HOURS, --priority P or --max-retries N")
        if run.status.is_terminal:
            raise InputError(f"run {run.name} has ended ({run.status.value}): there is nothing to update",
                             hint=f"`launcher run -r {run.name}` starts it again"
                             if run.status is not RunStatus.COMPLETED else None)
        for field_name in changes:
            why = self.capabilities.cannot_update(field_name)
            if why:
                raise InputError(f"the {self.name} backend cannot change scheduling.{field_name} of run "
                                 f"{run.name}: {why}")
        if changes.get("max_retries") is not None and changes["max_retries"] < 0:
            raise InputError(f"--max-retries must be 0 or more, got {changes['max_retries']}")
        if changes.get("max_duration") is not None and not changes["max_duration"] > 0:
            raise InputError(f"--max-duration must be more than 0 hours, got {changes['max_duration']}")

    def exec(self, name: str, argv: list[str], *, rank: int = 0, tty: bool = False) -> int:
        """Run argv in rank `rank` of run `name` (its environment, secrets and working directory),
        attached to this process's stdin/stdout/stderr (a pseudo-terminal when tty); return its exit code."""
        from launcher.errors import InputError

        raise InputError(f"the {self.name} backend cannot exec")

    def port_forward(self, name: str, *, rank: int, local_port: int, remote_port: int,
                     ready: Callable[[int], None] | None = None, stop: threading.Event | None = None) -> None:
        """Serve rank `rank`'s remote_port on 127.0.0.1:local_port (0: any free port; ready(port) is called once
        listening) until stop is set."""
        from launcher.errors import InputError

        raise InputError(f"the {self.name} backend cannot port-forward")

    @abc.abstractmethod
    def stop(self, name: str) -> Run:
        """Stop the run's processes and keep its record; the run ends STOPPED."""

    @abc.abstractmethod
    def delete(self, name: str) -> None:
        """Stop the run if needed and remove everything it created."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


class LocalArtifacts(abc.ABC):
    """Optional: backends whose run logs and artifacts lie on this machine's disk expose
    their paths, so readers (metrics) can index files instead of re-streaming logs."""

    @abc.abstractmethod
    def log_path(self, name: str, rank: int, attempt: int) -> Path | None:
        """The masked log file of one rank of one attempt, or None if there is none yet."""

    @abc.abstractmethod
    def artifacts_dir(self, name: str) -> Path:
        """Where the run's artifacts (metrics.jsonl, checkpoints by default) go."""
