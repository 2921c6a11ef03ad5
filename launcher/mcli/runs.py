"""mcli's run functions, signature for signature (mosaicml-cli 0.8.3), on the launcher's SDK:
create, get, list, stop, delete, update, start (restart), wait, watch, logs, interactive.

A run argument is an mcli Run or a name (a full run name, a spec name for its latest run,
or a glob, as everywhere in the launcher). Each returns mcli's shapes (Run, in this module,
log text as str) and raises mcli's exceptions (launcher.mcli.exceptions), the launcher's
error as their __cause__.

mcli's Run and the records it holds (Node, Resumption, RunLifecycle, FormattedRunEvent) live
here too, made from the launcher's own Run record: its methods (refresh, stop, clone...)
are these functions, so the two cannot live in modules that import each other.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from launcher.mcli.calls import call, stream
from launcher.mcli.config import FinalRunConfig, RunConfig
from launcher.mcli.exceptions import MAPIException, NotSupported
from launcher.mcli.status import RunStatus

__all__ = [
    "FormattedRunEvent",
    "Node",
    "Resumption",
    "Run",
    "RunLifecycle",
    "RunType",
    "create_interactive_run",
    "create_run",
    "delete_run",
    "delete_runs",
    "follow_run_logs",
    "from_launcher",
    "get_run",
    "get_run_logs",
    "get_runs",
    "start_run",
    "start_runs",
    "stop_run",
    "stop_runs",
    "update_run",
    "update_run_metadata",
    "wait_for_run_status",
    "watch_run_status",
]

if TYPE_CHECKING:
    from launcher.backends.base import Run as LauncherRun


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

        return get_run(self)

    def stop(self) -> Run:

        return stop_run(self)

    def delete(self) -> Run:

        return delete_run(self)

    def update(
        self,
        preemptible: bool | None = None,
        priority: str | None = None,
        max_retries: int | None = None,
        retry_on_system_failure: bool | None = None,
        max_duration: float | None = None,
    ) -> Run:

        return update_run(
            self,
            preemptible=preemptible,
            priority=priority,
            max_retries=max_retries,
            retry_on_system_failure=retry_on_system_failure,
            max_duration=max_duration,
        )

    def update_metadata(self, metadata: dict[str, Any]) -> Run:

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


RunRef = str | Run


def _name(run: Any) -> str:
    if isinstance(run, Run):
        return run.name
    if isinstance(run, str):
        return run
    name = getattr(run, "name", None)  # the launcher's own Run record
    if isinstance(name, str):
        return name
    raise TypeError(f"a run is a Run or a run name, not {type(run).__name__}")


def _names(runs: Any) -> list[str]:
    if isinstance(runs, str | Run):
        return [_name(runs)]
    return [_name(r) for r in runs]


def _spec(run: RunConfig | FinalRunConfig | dict[str, Any]) -> dict[str, Any]:
    """The launcher's run spec (a mapping launcher.RunConfig.from_dict checks) of mcli's config."""
    if isinstance(run, RunConfig | FinalRunConfig):
        return run.to_spec()
    if isinstance(run, dict):
        return RunConfig.from_dict(run).to_spec()
    raise TypeError(f"a run config is an mcli RunConfig or FinalRunConfig, not {type(run).__name__}")


# --- creating ------------------------------------------------------------------------------


def create_run(run: RunConfig | FinalRunConfig, *, timeout: float | None = 10, future: bool = False) -> Any:
    """Launch a run (mcli.create_run): to the cluster profile its compute.cluster names, else
    the current profile. A config that is not valid is a RunConfigException (status 400)
    naming each field."""
    spec = _spec(run)

    def create() -> Run:
        from launcher.sdk.runs import create_run as sdk_create_run

        return from_launcher(sdk_create_run(spec))

    return call(create, timeout=timeout, future=future)


def create_interactive_run(
    run: RunConfig | FinalRunConfig,
    *,
    timeout: float | None = 10,
    seconds: int | None = None,
    future: bool = False,
) -> Any:
    """Launch an interactive run (mcli.create_interactive_run): the config's run, its command
    replaced by one that waits `seconds` (default: scheduling.max_duration, else an hour) for
    `launcher connect`. Get into it with `launcher connect NAME`."""
    from launcher.sdk.attach import SLEEPER

    spec = _spec(run)
    scheduling = dict(spec.get("scheduling") or {})
    if seconds is None:
        seconds = round(float(scheduling.get("max_duration") or 1) * 3600)
    if seconds <= 0:
        raise ValueError(f"seconds must be more than 0, got {seconds}")
    spec.setdefault("name", "interactive")
    spec["command"] = SLEEPER.format(seconds=seconds)
    scheduling["max_duration"] = seconds / 3600
    spec["scheduling"] = scheduling

    def create() -> Run:
        from launcher.sdk.runs import create_run as sdk_create_run

        return from_launcher(sdk_create_run(spec))

    return call(create, timeout=timeout, future=future)


# --- getting -------------------------------------------------------------------------------


def get_run(run: RunRef, *, timeout: float | None = 10, future: bool = False, include_details: bool = True) -> Any:
    """A run as it is now (mcli.get_run); one that is not there is a MAPIException, status 404.
    `include_details` changes nothing: a launcher run always has its config."""
    name = _name(run)

    def get() -> Run:
        from launcher.sdk.runs import get_run as sdk_get_run

        return from_launcher(sdk_get_run(name))

    return call(get, timeout=timeout, future=future)


def _time(value: str | datetime | None, field: str) -> datetime | None:
    """mcli's before/after: a datetime, or a date or time as text (ISO 8601: 2024-05-01,
    2024-05-01T12:00, 2024-05-01 12:00:00+00:00). A naive one is local time."""
    if value is None or isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(str(value).strip())
    except ValueError:
        raise MAPIException(
            HTTPStatus.BAD_REQUEST,
            f"{field}: {value!r} is not a date or time (ISO 8601: 2024-05-01 or 2024-05-01T12:00)",
        ) from None


def get_runs(
    runs: list[str] | list[Run] | None = None,
    *,
    cluster_names: list[str] | None = None,
    before: str | datetime | None = None,
    after: str | datetime | None = None,
    gpu_types: list[str] | None = None,
    gpu_nums: list[int] | None = None,
    statuses: list[str] | list[RunStatus] | None = None,
    timeout: float | None = 10,
    future: bool = False,
    user_emails: list[str] | None = None,
    run_types: list[str] | list[RunType] | None = None,
    include_details: bool = False,
    include_deleted: bool = False,
    ended_before: str | datetime | None = None,
    ended_after: str | datetime | None = None,
    limit: int | None = 100,
    all_users: bool = False,
) -> Any:
    """Runs, newest first, with mcli's filters (mcli.get_runs): `runs` names, spec names or
    globs; `cluster_names` the cluster profiles to ask (default: all); `statuses`;
    `gpu_types`; `gpu_nums`; created `before`/`after`; ended `ended_before`/`ended_after`;
    `run_types` (TRAINING, INTERACTIVE); at most `limit` (None: all).

    Every run a profile holds is listed, so `all_users` changes nothing; `include_deleted`
    adds none (a deleted run is gone); `user_emails` is NotSupported: a launcher run
    records no user."""
    if user_emails:
        raise NotSupported(
            "get_runs(user_emails=...): the launcher's runs record no user (every run a cluster "
            "profile holds is listed)"
        )
    args: dict[str, Any] = {
        "runs": None if runs is None else _names(runs),
        "cluster": cluster_names,
        "status": None if statuses is None else [str(s) for s in statuses],
        "gpu_type": None if gpu_types is None else [str(getattr(t, "value", t)) for t in gpu_types],
        "gpu_num": gpu_nums,
        "before": _time(before, "before"),
        "after": _time(after, "after"),
    }
    ended = (_time(ended_before, "ended_before"), _time(ended_after, "ended_after"))
    types = None if run_types is None else {RunType.from_string(str(getattr(t, "value", t)).upper()) for t in run_types}
    filtered = types is not None or ended != (None, None)

    def listed() -> list[Run]:
        from launcher.sdk.runs import get_runs as sdk_get_runs

        found = [from_launcher(r) for r in sdk_get_runs(**args, limit=None if filtered else limit)]
        if types is not None:
            found = [r for r in found if r.run_type in types]
        if ended[0] is not None:
            found = [r for r in found if r.completed_at is not None and r.completed_at < ended[0].astimezone()]
        if ended[1] is not None:
            found = [r for r in found if r.completed_at is not None and r.completed_at > ended[1].astimezone()]
        return found[:limit] if limit is not None else found

    return call(listed, timeout=timeout, future=future)


# --- acting --------------------------------------------------------------------------------


def stop_run(run: RunRef, *, reason: str | None = None, timeout: float | None = 10, future: bool = False) -> Any:
    """Stop a run (mcli.stop_run); its record and logs stay. `reason` is accepted as mcli's;
    the launcher's record gives its own ("stopped by the user")."""
    return _one(stop_runs([run], reason=reason, timeout=timeout, future=future), future)


def stop_runs(
    runs: Sequence[str | Run], *, reason: str | None = None, timeout: float | None = 10, future: bool = False
) -> Any:
    """Stop each run (mcli.stop_runs); the runs as they ended, in the order given."""
    names = _names(runs)

    def stop() -> list[Run]:
        from launcher.sdk.runs import stop_runs as sdk_stop_runs

        return [from_launcher(r) for r in sdk_stop_runs(names)]

    return call(stop, timeout=timeout, future=future)


def delete_run(run: RunRef, *, timeout: float | None = 10, future: bool = False) -> Any:
    """Delete a run (mcli.delete_run): stopped if needed, everything it made removed."""
    return _one(delete_runs([run], timeout=timeout, future=future), future)


def delete_runs(runs: Sequence[str | Run], *, timeout: float | None = 10, future: bool = False) -> Any:
    """Delete each run (mcli.delete_runs); the runs as they were, in the order given."""
    names = _names(runs)

    def delete() -> list[Run]:
        from launcher.sdk.runs import delete_runs as sdk_delete_runs

        return [from_launcher(r) for r in sdk_delete_runs(names)]

    return call(delete, timeout=timeout, future=future)


def start_run(run: RunRef, *, timeout: float | None = 10, future: bool = False) -> Any:
    """Start a stopped (or failed) run again (mcli.start_run): its next resumption, as
    `launcher run -r NAME`, on the backend that holds it."""
    return _one(start_runs([run], timeout=timeout, future=future), future)


def start_runs(runs: Sequence[str | Run], *, timeout: float | None = 10, future: bool = False) -> Any:
    """Start each stopped run again (mcli.start_runs); the runs as they started."""
    names = _names(runs)

    def start() -> list[Run]:
        from launcher.backends.capabilities import Feature
        from launcher.sdk.runs import resolve

        out = []
        for name in names:
            backend, record = resolve(name)
            try:
                backend.require(Feature.RESTART, hint=f"`launcher run --clone {record.name}` submits a copy of it")
                out.append(from_launcher(backend.restart(record.name)))  # type: ignore[attr-defined]
            finally:
                backend.close()
        return out

    return call(start, timeout=timeout, future=future)


# mcli's update_run_data keys (the API's camelCase too) -> update_run's arguments.
_UPDATE_KEYS = {
    "preemptible": "preemptible",
    "priority": "priority",
    "max_retries": "max_retries",
    "maxRetries": "max_retries",
    "retry_on_system_failure": "retry_on_system_failure",
    "retryOnSystemFailure": "retry_on_system_failure",
    "max_duration": "max_duration",
    "maxDuration": "max_duration",
}


def update_run(
    run: RunRef,
    update_run_data: dict[str, Any] | None = None,
    *,
    preemptible: bool | None = None,
    priority: str | None = None,
    max_retries: int | None = None,
    retry_on_system_failure: bool | None = None,
    timeout: float | None = 10,
    future: bool = False,
    max_duration: float | None = None,
) -> Any:
    """Change a run's scheduling (mcli.update_run): `priority`, `max_retries` and
    `max_duration` (hours) where its backend can (else a NotSupported saying why).
    `preemptible` and `retry_on_system_failure` are NotSupported: the launcher's backends
    fix them when the run is submitted."""
    name = _name(run)
    changes: dict[str, Any] = {}
    for key, value in (update_run_data or {}).items():
        if key not in _UPDATE_KEYS:
            raise MAPIException(
                HTTPStatus.BAD_REQUEST,
                f"update_run_data: {key!r} is not a field update_run changes "
                f"(preemptible, priority, max_retries, retry_on_system_failure, max_duration)",
            )
        changes[_UPDATE_KEYS[key]] = value
    given = {
        "preemptible": preemptible,
        "priority": priority,
        "max_retries": max_retries,
        "retry_on_system_failure": retry_on_system_failure,
        "max_duration": max_duration,
    }
    changes.update({k: v for k, v in given.items() if v is not None})
    for fixed in ("preemptible", "retry_on_system_failure"):
        if fixed in changes:
            raise NotSupported(
                f"update_run({fixed}=...): the launcher's backends fix scheduling.{fixed} when a run is "
                "submitted; it cannot change on a submitted run",
                f"`launcher run --clone {name} --set scheduling.{fixed}={str(changes[fixed]).lower()}` submits a copy",
            )

    def update() -> Run:
        from launcher.sdk.runs import update_run as sdk_update_run

        return from_launcher(sdk_update_run(name, **changes))

    return call(update, timeout=timeout, future=future)


def update_run_metadata(
    run: RunRef, metadata: dict[str, Any], *, timeout: float | None = 10, future: bool = False, protect: bool = False
) -> Any:
    """NotSupported: a launcher run's metadata is part of its spec, which its backend keeps
    as submitted (on a cluster, in the JobSet's annotations) and never rewrites."""
    raise NotSupported(
        "update_run_metadata: a launcher run's metadata is part of its spec, kept as submitted; "
        "it cannot change on a submitted run",
        f"`launcher run --clone {_name(run)} --set metadata.KEY=VALUE` submits a copy with it",
    )


def _one(result: Any, future: bool) -> Any:
    """The one item of a plural call's list (or a Future of it)."""
    if not future:
        return result[0]
    from concurrent.futures import Future

    single: Future[Any] = Future()

    def settle(f: Future[Any]) -> None:
        if f.exception() is not None:
            single.set_exception(f.exception())
        else:
            single.set_result(f.result()[0])

    result.add_done_callback(settle)
    return single


# --- waiting -------------------------------------------------------------------------------

POLL_SECONDS = 0.5


def wait_for_run_status(
    run: RunRef, status: str | RunStatus, timeout: float | None = None, future: bool = False
) -> Any:
    """Wait until the run reaches `status` or a later one (mcli's order: a run that ended
    has passed every status) and return it then (mcli.wait_for_run_status). Past
    `timeout` seconds, a TimeoutError."""
    name = _name(run)
    wanted = RunStatus.from_string(status)
    if wanted is RunStatus.UNKNOWN:
        raise MAPIException(
            HTTPStatus.BAD_REQUEST,
            f"{status!r} is not a run status; use one of {', '.join(s.value for s in RunStatus)}",
        )

    def wait() -> Run:
        from launcher.sdk.runs import wait_for_run_status as sdk_wait

        # The SDK's wait keeps the timeout (its TimeoutError says how far the run got) and ends with it.
        return from_launcher(sdk_wait(name, wanted.value, None if future else timeout))

    return call(wait, timeout=None, future=future)


def _statuses(name: str) -> Iterator[Run]:
    from launcher.sdk.runs import get_run as sdk_get_run

    last = None
    while True:
        current = sdk_get_run(name)
        if current.status != last:
            last = current.status
            yield from_launcher(current)
        if current.status.is_terminal:
            return
        time.sleep(POLL_SECONDS)


def watch_run_status(run: RunRef, timeout: float | None = None, future: bool = False) -> Iterator[Any]:
    """The run each time its status changes, from the one it has now until it ends
    (mcli.watch_run_status); each within `timeout` seconds, else a TimeoutError."""
    return stream(_statuses(_name(run)), timeout=timeout, future=future)


# --- logs ----------------------------------------------------------------------------------


def _log_source(
    name: str,
    rank: int | None,
    node_rank: int | None,
    local_gpu_rank: int | None,
    global_gpu_rank: int | None,
    resumption: int | None,
    container: str | None,
) -> tuple[Any, int | None, int | None]:
    """(the launcher's Run record, the node rank to read or None for all, the attempt or None for the latest)."""
    from launcher.sdk import logview
    from launcher.sdk.runs import get_run as sdk_get_run

    if rank is not None and node_rank is not None:
        raise ValueError("rank and node_rank are the same thing (rank is mcli's older name): give one")
    if local_gpu_rank is not None and global_gpu_rank is not None:
        raise ValueError("local_gpu_rank and global_gpu_rank cannot be given together: give one")
    if container not in (None, "MAIN"):
        raise NotSupported(
            f"container={container!r}: a launcher run's rank has one container, MAIN (its "
            "integrations run in it before the command)"
        )
    record = sdk_get_run(name)
    chosen = logview.chosen_rank(
        record,
        node_rank=node_rank if node_rank is not None else rank,
        gpu=local_gpu_rank,
        global_gpu_rank=global_gpu_rank,
    )
    return record, chosen.rank, logview.chosen_attempt(record, resumption=resumption)


def get_run_logs(
    run: RunRef,
    rank: int | None = None,
    *,
    node_rank: int | None = None,
    local_gpu_rank: int | None = None,
    global_gpu_rank: int | None = None,
    first_exception: bool | None = False,
    timeout: float | None = None,
    future: bool = False,
    failed: bool | None = False,
    resumption: int | None = None,
    tail: int | None = None,
    container: str | None = None,
) -> Iterator[Any]:
    """The run's log as it is now, as str chunks (mcli.get_run_logs: `"".join(...)` is the
    log text, secrets masked): node rank `node_rank` (default: every rank), `resumption`
    (from 0; default the latest), the last `tail` characters, the first failed rank's with
    `failed`, the first traceback with `first_exception`. The trainer's metric records are
    left out, as `launcher logs` does."""
    name = _name(run)

    def chunks() -> Iterator[str]:
        from launcher.sdk import logview
        from launcher.sdk.logs import get_run_logs as sdk_get_run_logs

        record, node, attempt = _log_source(
            name, rank, node_rank, local_gpu_rank, global_gpu_rank, resumption, container
        )
        if failed and node is None:
            tried = next((a for a in record.attempts if a.index == (attempt or record.current_attempt)), None)
            bad = [r.rank for r in (tried.ranks if tried else []) if r.status.value == "FAILED"]
            if bad:
                node = bad[0]
        lines = sdk_get_run_logs(record.name, rank=node, attempt=attempt)
        if first_exception:
            found = logview.first_exception(lines).traceback
            if found is not None:
                yield "".join(f"{line}\n" for line in found.lines)
            return
        if tail is not None:
            text = "".join(f"{line}\n" for line in lines)
            yield text[-tail:] if tail > 0 else ""
            return
        for line in lines:
            yield f"{line}\n"

    return stream(chunks(), timeout=timeout, future=future)


def follow_run_logs(
    run: RunRef,
    rank: int | None = None,
    *,
    node_rank: int | None = None,
    local_gpu_rank: int | None = None,
    global_gpu_rank: int | None = None,
    timeout: float | None = None,
    future: bool = False,
    resumption: int | None = None,
    tail: int | None = None,
    container: str | None = None,
) -> Iterator[Any]:
    """The run's log lines as str as they come, across its resumptions from `resumption`
    (default: the latest) until it ends (mcli.follow_run_logs); `tail`: start with the last
    that many characters of what is there already."""
    name = _name(run)

    def lines() -> Iterator[str]:
        from launcher.backends.base import LogLine
        from launcher.sdk import logview
        from launcher.sdk.logs import follow_run

        record, node, attempt = _log_source(
            name, rank, node_rank, local_gpu_rank, global_gpu_rank, resumption, container
        )
        start = attempt or record.current_attempt
        followed = (i for i in follow_run(record.name, rank=node, from_attempt=start) if isinstance(i, LogLine))
        for line in logview.without_records(followed):
            yield f"{line}\n"

    if tail is not None:
        raise NotSupported(
            "follow_run_logs(tail=...): the launcher follows a log from its start",
            "get_run_logs(run, tail=N) gives the last N characters of the log as it is now",
        )
    return stream(lines(), timeout=timeout, future=future)
