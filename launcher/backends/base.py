"""The contract every backend implements, and the records it returns.

The CLI and the dashboard talk only to this contract (and registry.py, which opens a
backend for a profile). A backend hides where runs execute (this machine, a Kubernetes
cluster): it checks and plans a resolved `RunSpec` offline, accepts it plus the secrets
the run uses, and reports runs as `Run` records whose statuses are mcli's. What sets one
backend apart from another is declared once, as the optional `Feature`s its class lacks
(UNSUPPORTED, each with the reason) and the capability mixins it inherits for the others
(launcher.backends.capabilities), never asked of its name or class.

The required part, what every backend does: open, check and plan (offline), secret_store,
submit, get, list, logs, stop, delete. watch has a default in terms of get.
"""

from __future__ import annotations

import abc
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from launcher.backends.capabilities import Feature, NotSupported, check_declaration
from launcher.backends.runstatus import RunStatus

if TYPE_CHECKING:  # keep `launcher --help` free of pydantic
    from launcher.backends.capabilities import QueueState
    from launcher.backends.goodput import Goodput, Throughput
    from launcher.backends.listing import RunQuery
    from launcher.pod.code_archive import Snapshot
    from launcher.secrets.kinds import Secret
    from launcher.secrets.store import SecretStore
    from launcher.spec.models import RunSpec


def utcnow() -> datetime:
    return datetime.now(UTC)


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
    failure_class: str | None = None
    """How a failed attempt failed (launcher.pod.failures: hardware, collective, oom, preempted,
    evicted, hang, user); None for one that did not fail, or a backend that cannot tell."""
    evidence: str | None = None
    """The line that says so (masked, bounded), prefixed with its rank."""
    last_step: int | None = None
    """The last step any rank reported (a metric record or a heartbeat) before it ended."""
    progress_age: float | None = None
    """Seconds from the last progress any rank reported to the attempt's end; None: none came."""
    setup_seconds: float | None = None
    """Seconds its ranks spent before the command started (install, clone, health gate)."""
    resumed_from: str | None = None
    """The checkpoint a retried attempt was given as LAUNCHER_RESUME_FROM, where one was found."""
    resumed_step: int | None = None
    """That checkpoint's step (its batch), where its name says it."""
    stragglers: list[str] = field(default_factory=list)
    """A line for each rank named as a straggler in this attempt (its step time against the others')."""


class SubmittedCompute(TypedDict, total=False):
    """RunSpec.compute as a run's record keeps it (RunSpec.to_submitted: a field left unset is absent)."""

    cluster: str | list[str]
    gpus: int
    gpu_type: str
    nodes: int
    cpus: float
    memory: str
    instance: str
    node_names: list[str]
    topology: dict[str, str]


class SubmittedScheduling(TypedDict, total=False):
    """RunSpec.scheduling as a run's record keeps it."""

    priority: str
    max_retries: int
    retry_on_system_failure: bool
    preemptible: bool
    max_duration: float
    resumable: bool
    watchdog_enabled: bool
    retry_backoff: dict[str, float]


class SubmittedSpec(TypedDict, total=False):
    """A RunSpec as submitted, resolved and secret-free, in its JSON form (RunSpec.to_submitted):
    what a run's record keeps, read back without validating it again (a listing stays cheap).
    tests/spec/test_submitted.py checks it names RunSpec's fields."""

    name: str
    image: str
    command: str
    compute: SubmittedCompute
    integrations: list[dict[str, Any]]
    env_variables: dict[str, str]
    secrets: list[str]
    data: dict[str, str]
    parameters: dict[str, Any]
    scheduling: SubmittedScheduling
    metadata: dict[str, Any]
    ports: list[dict[str, Any]]
    code: dict[str, Any]
    placement: dict[str, float]
    resilience: dict[str, Any]
    optimization_level: Any
    platform: str
    dependent_deployment: dict[str, Any]
    parent_name: str


@dataclass
class Run:
    name: str
    backend: str
    status: RunStatus
    created_at: datetime
    spec: SubmittedSpec
    """The spec as submitted (resolved, secret-free), as its record keeps it."""
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
    price_per_gpu_hour: dict[str, float] = field(default_factory=dict)
    """Its cluster profile's price per GPU-hour by gpu_type (goodput's cost); {}: none."""
    throughput: Throughput | None = None
    """Its tokens/s and MFU from its metric records, where a reader of them set it
    (launcher.sdk.metrics.with_throughput: describe, the dashboard); None: not read."""
    excluded_nodes: list[dict[str, Any]] = field(default_factory=list)
    """The nodes its attempts keep off after a hardware or collective failure there
    (resilience.exclude_faulty_nodes): [{node, class, evidence, attempt}]; []: none."""

    @property
    def crash_loop(self) -> bool:
        """Every attempt that ended (two at least) failed within seconds of starting
        (launcher.spec.retry.CRASH_SECONDS): the command crashes, retries will not help."""
        from launcher.spec.retry import crashed

        ended = [a for a in self.attempts if a.status.is_terminal]
        return len(ended) >= 2 and all(
            a.status is RunStatus.FAILED
            and a.started_at is not None
            and a.ended_at is not None
            and crashed((a.ended_at - a.started_at).total_seconds())
            for a in ended
        )

    @property
    def config(self) -> SubmittedSpec:
        """The spec as submitted (mcli's Run.config): `spec` by its SDK name."""
        return self.spec

    @property
    def nodes(self) -> int:
        return int(self.spec.get("compute", {}).get("nodes") or 1)

    @property
    def current_attempt(self) -> int:
        return self.attempts[-1].index if self.attempts else 1

    def goodput(self, prices: dict[str, float] | None = None) -> Goodput:
        """Where its wall time went (queued, starting, productive, lost, restarting), its
        GPU-hours and its cost at `prices` per GPU-hour by gpu_type (default: its cluster
        profile's price_per_gpu_hour): launcher.backends.goodput."""
        from launcher.backends.goodput import goodput_of

        return goodput_of(self, self.price_per_gpu_hour if prices is None else prices)

    @property
    def last_failure(self) -> Attempt | None:
        """The latest attempt whose failure was classified (launcher.pod.failures), if any."""
        return next((a for a in reversed(self.attempts) if a.failure_class), None)


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


class Backend(abc.ABC):
    """Where runs execute. Every method is safe to call from a fresh process."""

    name: str
    UNSUPPORTED: dict[Feature, str] = {}
    """Each optional Feature this backend lacks, with the reason, in the words a refusal
    prints; every other feature's mixin (capabilities.MIXINS) is among its bases."""
    prices: dict[str, float] = {}
    """Its profile's price_per_gpu_hour by gpu_type (set by registry.open_backend); {}: none."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A concrete backend (ABCMeta has not counted its abstract methods yet at this point).
        if not any(getattr(getattr(cls, n, None), "__isabstractmethod__", False) for n in dir(cls)):
            check_declaration(cls, cls.UNSUPPORTED)

    def supports(self, feature: Feature) -> bool:
        return feature not in type(self).UNSUPPORTED

    def require(self, feature: Feature, *, hint: str | None = None) -> None:
        """Raise NotSupported, with the backend's reason (and `hint`), where it lacks `feature`."""
        why = type(self).UNSUPPORTED.get(feature)
        if why is not None:
            raise NotSupported(f"the {self.name} backend cannot {feature.value}: {why}", hint=hint)

    @classmethod
    @abc.abstractmethod
    def open(cls, profile: Any, home: Path) -> Backend:
        """The backend of a config.yaml profile, its settings parsed as the backend's own profile
        model (registry.open_backend validates them; a bad one is an InputError naming it).
        Opening contacts nothing; the first call that needs to does."""

    @abc.abstractmethod
    def check(self, spec: RunSpec) -> list[str]:
        """Raise an InputError for what submit(spec) would refuse, offline, before anything
        starts: `launcher validate`, `run --dry-run` and `run` all ask this, so that validate
        refuses what run refuses. `spec` is named as the run will be (its name counts).
        Every backend asks check_exec here (its ranks' exec takes the command and the
        environment); check_secrets() adds the secrets.
        Returns the named warnings about fields this backend cannot fully honour, the ones
        plan() and submit() give, so that validate says them too."""

    def check_secrets(self, spec: RunSpec, secrets: list[Secret]) -> None:
        """Raise an InputError for what submit(spec, secrets) would refuse of the secrets the
        run gets, values included: a mount path no run may use (one stored before the rule,
        or made outside the launcher), two that collide, env values that no exec of the rank
        takes with its command. The CLI asks it after check() wherever it has the secrets
        (`run`; `validate` and `run --dry-run` where they live on this machine); submit()
        asks it again."""
        from launcher.errors import InputError
        from launcher.secrets.kinds import breaks_runs, collision, project

        for s in secrets:
            problem = breaks_runs(s)  # the rule `secret create` refuses it by, in the same words
            if problem:
                how = (
                    f"with another --mount-path (`launcher secret create {s.kind.value} {s.name} ... "
                    f"--mount-path /secrets/{s.name} --replace`)"
                    if project(s).mount_path and "mount path" in problem
                    else "with another variable name"
                )
                raise InputError(
                    f"secret {s.name!r}: {problem}",
                    hint=f"delete it (`launcher secret delete {s.name}`) and create it again {how}, or leave "
                    "it out with `secrets:` in the run YAML",
                )
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

    @abc.abstractmethod
    def plan(self, spec: RunSpec, secrets: list[Secret] | None = None, *, code: Snapshot | None = None) -> Plan:
        """What `submit(spec, secrets)` would create, computed offline: it never contacts a
        cluster. `secrets` None means the secrets this backend can name without asking one;
        `code` the run's packed code snapshot (where the backend has Feature.CODE_SNAPSHOT)."""

    @abc.abstractmethod
    def secret_store(self) -> SecretStore:
        """Where this backend's runs find their secrets (`launcher secret`, run's secrets)."""

    def place(self) -> str | None:
        """Where this profile's runs live, as a key read offline: profiles whose backends give
        the same key are one place (Kubernetes: one API server's namespace), which a look
        across profiles (sdk/fanout.py) asks once, so that a run is listed, stopped and its
        GPUs counted once. None (the default): a place of its own, as its profile's name is."""
        return None

    def profile_warnings(self) -> list[str]:
        """Named warnings about the profile itself, found offline (`cluster add` prints them):
        settings with which runs would fail wherever they go."""
        return []

    @abc.abstractmethod
    def submit(self, spec: RunSpec, secrets: list[Secret], *, code: Snapshot | None = None) -> Run:
        """Start a run. `secrets` are the secrets it uses, values included; `code` is the
        run's packed code snapshot where its spec has `code:`."""

    @abc.abstractmethod
    def get(self, name: str) -> Run:
        """The run's current record. Raises NotFoundError."""

    @abc.abstractmethod
    def list(self, query: RunQuery | None = None) -> list[Run]:
        """The runs `query` wants (launcher.backends.listing.RunQuery: filters and a limit),
        newest first; None (the default) means every run. A backend narrows in its store
        (an index, label selectors, pages) and stops once `query.wanted` runs match, so a
        listing costs what it shows; each run it returns satisfies query.matches."""

    def watch(self, name: str, *, poll_seconds: float = 0.5) -> Iterator[Run]:
        """Yield the run each time its status changes, starting with the current one; return
        after yielding a terminal status. A watch starts and changes nothing; a backend may
        end a run it sees can never start (Kubernetes: an image that does not pull), as a stop
        would, record an ending the cluster would forget (Kubernetes: a JobSet's TTL), and
        submit the retry a run's policy is due where nothing else would (Databricks' one-time
        runs). By default it polls get() every `poll_seconds`."""
        last = None
        while True:
            run = self.get(name)
            if last is None or (run.status, run.current_attempt) != last:
                last = (run.status, run.current_attempt)
                yield run
            if run.status.is_terminal:
                return
            time.sleep(poll_seconds)

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

    @abc.abstractmethod
    def stop(self, name: str) -> Run:
        """Stop the run's processes and keep its record; the run ends STOPPED."""

    @abc.abstractmethod
    def delete(self, name: str) -> None:
        """Stop the run if needed and remove everything it created."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""
