"""Runs: create, find, list with mcli's filters, wait for, stop, delete, update.

A run argument is a `Run` or a name: a full run name, a spec name (its latest run) or a
glob, as on the command line (launcher.sdk.run_names). The functions return the
backends' own `Run` records and raise launcher.sdk.exceptions' types; they never print.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from launcher.backends.base import Backend, Run, RunStatus
from launcher.backends.capabilities import UPDATE_FEATURES, CodeSnapshots, Feature, Updatable
from launcher.errors import ClusterUnreachable, InputError, NotFoundError
from launcher.sdk.exceptions import WaitTimeout, run_not_found

if TYPE_CHECKING:
    from launcher.backends.listing import RunQuery
    from launcher.config import Profile
    from launcher.pod.code_archive import Snapshot
    from launcher.sdk.config import RunConfig
    from launcher.sdk.placement import Placed
    from launcher.secrets.kinds import Secret
    from launcher.spec.models import RunSpec

__all__ = [
    "Run",
    "RunList",
    "RunStatus",
    "create_run",
    "delete_run",
    "delete_runs",
    "get_run",
    "get_runs",
    "stop_run",
    "stop_runs",
    "update_run",
    "wait_for_run_status",
]

RunRef = Run | str
"""A Run, or a name: full, a spec name (its latest run) or a glob."""


class RunList(list):
    """Runs, newest first. `warnings`: one line for each cluster profile that could not be
    asked (the list holds the runs of the others)."""

    def __init__(self, runs: Iterable[Run] = (), warnings: Iterable[str] = ()):
        super().__init__(runs)
        self.warnings = list(warnings)


def name_of(run: RunRef) -> str:
    return run.name if isinstance(run, Run) else run


def resolve(run: RunRef | None) -> tuple[Backend, Run]:
    """The backend that holds the run and its current record (None: the latest run)."""
    from launcher.sdk.fanout import resolve_run

    try:
        return resolve_run(None if run is None else name_of(run))
    except NotFoundError as e:
        raise run_not_found(e) from None


def get_run(run: RunRef | None = None) -> Run:
    """The run's current record; None: the latest run submitted from this machine."""
    backend, record = resolve(run)
    backend.close()
    return record


# --- creating ------------------------------------------------------------------------------


@dataclass
class PreparedRun:
    """A run config checked for its target as a submit would check it, nothing started:
    what `validate`, `run --dry-run` and `run` share, so that they cannot drift."""

    config: RunConfig
    profile: Profile
    backend: Backend
    spec: RunSpec
    """Named as the run will be (the name counts in the checks: pod hostnames)."""
    secrets: list[Secret] | None
    """The secrets the run gets, values included; None where they live in the cluster and a
    dry-run does not read them (the backend names them)."""
    warnings: list[str] = field(default_factory=list)
    """What the target cannot fully honour, in the words the dry-run and submit use."""
    notes: list[str] = field(default_factory=list)
    """How the target was chosen (a compute.cluster that names no profile here)."""
    code: Snapshot | None = None
    """The run's packed code snapshot where its spec has `code:`."""
    placement: Placed | None = None
    """Where a placement across clusters put it and where it may go next (launcher.sdk.placement.Placed);
    None: the run goes to `profile` alone."""

    @property
    def name(self) -> str:
        """The name the config asks for (the run's own has a suffix)."""
        return self.config.name

    def plan(self):
        """What submit would create (`run --dry-run`), computed offline."""
        if self.code is not None:
            return self.backend.plan(self.spec, self.secrets, code=self.code)
        return self.backend.plan(self.spec, self.secrets)

    def submit(self) -> Run:
        """Start the run (placed across clusters: where the placement put it, or the next
        candidate when that one cannot be reached)."""
        if self.placement is not None:
            return _submit_placed(self)
        return self.submit_here()

    def submit_here(self) -> Run:
        """Start the run on `profile`. Recorded first, started second: a run that starts is
        always findable, and an index that cannot be written stops us before anything runs."""
        from launcher.errors import LauncherError
        from launcher.sdk.index import RunIndex

        # A dry-run's (secrets left in the cluster) is for plan(); only a real prepare submits.
        assert self.secrets is not None, "a dry-run's prepared run cannot be submitted"
        secrets = self.secrets
        index = RunIndex()
        before = index.profile_of(self.spec.name)  # a run moving here from another cluster keeps its entry
        index.record(self.spec.name, self.profile)
        try:
            if self.code is not None:
                return self.backend.submit(self.spec, secrets, code=self.code)
            return self.backend.submit(self.spec, secrets)
        except BaseException:
            if before is not None:
                from launcher.config import load_config

                index.record(self.spec.name, load_config().profile(before))
                raise
            try:
                index.forget(self.spec.name)
            except LauncherError:
                pass  # the submit's own error is the one to show
            raise


def prepare_run(
    config: RunConfig | RunSpec | dict[str, Any] | str,
    *,
    cluster: str | None = None,
    backend: str | None = None,
    dry_run: bool = False,
    on_note: Callable[[str], None] | None = None,
    code: str | None = None,
    allow_files: Iterable[str] = (),
    run_name: str | None = None,
) -> PreparedRun:
    """Every check a submit makes before it starts anything: the target's check (offline,
    before any secret is read), the secrets the run gets (read where they live on this
    machine, or for a real run) and the target's checks of them. An error about one field
    of the config is a ValidationError placed at its line. `on_note` is called with each
    note on the target chosen as it is made, before a check may fail (the CLI shows them).
    `code` (a directory) ships that working tree with the run, as the spec's `code: {path: DIR}`
    does; it is packed here, and refused here (too large, a secret in it) before anything is
    submitted. `allow_files`: files the snapshot may pack though they look like credentials.
    A compute.cluster (or `cluster`) of `auto` or several profiles is a placement across them
    (launcher.sdk.placement): a submit asks them for their free GPUs here. `run_name`: the
    run's full name where it has one already (a run moving to another cluster)."""
    from launcher.backends.registry import runs_on_a_cluster
    from launcher.sdk.config import RunConfig
    from launcher.spec.models import is_placed

    config = RunConfig.of(config)
    config.check_recipe_parameters()
    if code is not None:
        from launcher.spec.models import Code

        config = config.model_copy(update={"code": (config.code or Code()).model_copy(update={"path": code})})
    wanted = cluster if cluster is not None else config.compute.cluster
    if (backend is None or runs_on_a_cluster(backend)) and wanted is not None and is_placed(wanted):
        return _prepare_placed(
            config, wanted, dry_run=dry_run, on_note=on_note, allow_files=tuple(allow_files), run_name=run_name
        )
    profile, target, store, notes = _target(config, cluster, backend, dry_run=dry_run)
    if on_note is not None:
        for note in notes:
            on_note(note)
    return _checked_on(config, named(config, run_name), profile, target, store, notes, on_note, tuple(allow_files))


def prepare_on(
    config: RunConfig,
    spec: RunSpec,
    profile: Profile,
    *,
    dry_run: bool,
    notes: list[str],
    on_note: Callable[[str], None] | None,
    allow_files: tuple[str, ...],
) -> PreparedRun:
    """prepare_run's checks for one profile chosen already (a placement's), `spec` named."""
    from launcher.backends.registry import open_backend

    target = open_backend(profile)
    store = None if dry_run and target.supports(Feature.SECRETS_IN_CLUSTER) else target.secret_store()
    return _checked_on(config, spec, profile, target, store, notes, on_note, allow_files)


def _checked_on(
    config: RunConfig,
    spec: RunSpec,
    profile: Profile,
    target: Backend,
    store,
    notes: list[str],
    on_note: Callable[[str], None] | None,
    allow_files: tuple[str, ...],
) -> PreparedRun:
    from launcher.errors import FieldError

    try:
        warnings = target.check(spec)
        secrets = store.for_run(spec.secrets) if store is not None else None
        if secrets is not None:
            target.check_secrets(spec, secrets)
        snapshot = _pack_code(spec, target, secrets, store, allow_files) if spec.code is not None else None
    except FieldError as e:
        raise config.placed(e) from None
    if snapshot is not None:
        assert spec.code is not None  # a snapshot is packed only for a spec with code:
        code = spec.code.model_copy(update={"digest": snapshot.digest, "size": snapshot.size})
        spec = spec.model_copy(update={"code": code})
        if on_note is not None:
            for note in snapshot.notes:
                on_note(f"code: {note}")
    return PreparedRun(config, profile, target, spec, secrets, warnings, notes, code=snapshot)


def _prepare_placed(
    config: RunConfig,
    cluster: str | list[str],
    *,
    dry_run: bool,
    on_note: Callable[[str], None] | None,
    allow_files: tuple[str, ...],
    run_name: str | None,
) -> PreparedRun:
    """prepare_run for `auto` or a list: a dry-run (or validate) checks every candidate
    offline and shows the first that takes the spec; a submit asks them all and prepares
    the run where decide() puts it."""
    from launcher.config import load_config
    from launcher.sdk.placement import ask, candidate_profiles, decide

    spec = named(config, run_name)
    profiles = candidate_profiles(cluster, load_config())
    if dry_run:
        refusals = []
        for profile in profiles:
            try:
                prepared = prepare_on(
                    config, spec, profile, dry_run=True, notes=[], on_note=None, allow_files=allow_files
                )
            except InputError as e:
                refusals.append(e)
                continue
            note = (
                f"placement: decided at submit among {', '.join(p.name for p in profiles)} by their free GPUs; "
                f"checked for {profile.name}"
            )
            note += "".join(f"; {r.message.splitlines()[0]}" for r in refusals)
            if on_note is not None:
                on_note(note)
            prepared.notes.insert(0, note)
            return prepared
        raise refusals[0]
    candidates = ask(spec, profiles)
    decision = decide(spec, candidates)
    if on_note is not None:
        on_note(decision.line())
    if decision.chosen is None:
        raise ClusterUnreachable(
            f"none of the {len(profiles)} cluster profiles could take the run",
            warnings=[c.error or "" for c in candidates],
        )
    names = [p.name for p in profiles]
    from launcher.sdk.placement import Placed

    placed = Placed(names, names.index(decision.chosen), decision.line(), config, spec.name, allow_files, on_note)
    prepared = _prepared_at(placed, placed.position, spec)
    prepared.placement = placed
    return prepared


def _prepared_at(placed, position: int, spec: RunSpec | None = None) -> PreparedRun:
    from launcher.config import load_config

    spec = spec or named(placed.config, placed.run_name)
    profile = load_config().profile(placed.candidates[position])
    return prepare_on(
        placed.config, spec, profile, dry_run=False, notes=[], on_note=None, allow_files=placed.allow_files
    )


def _submit_placed(prepared: PreparedRun) -> Run:
    """Submit where the decision put the run; a cluster that cannot be reached (at the
    prepare, which reads its secrets, or at the submit) passes it to the next candidate."""
    from launcher.sdk.placement import max_queue_of, now_text

    placed = prepared.placement
    assert placed is not None
    position = placed.position
    current: PreparedRun | None = prepared
    while True:
        name = placed.candidates[position]
        try:
            if current is None:
                current = _prepared_at(placed, position)
            run = current.submit_here()
            break
        except ClusterUnreachable as e:
            after = placed.candidates[position + 1 :]
            if not after:
                raise
            placed.note(
                f"placement: {name} could not be reached at submit ({e.message.splitlines()[0]}): trying {after[0]}"
            )
            placed.skipped.append(
                {
                    "attempt": 1,
                    "from": name,
                    "to": after[0],
                    "at": now_text(),
                    "why": f"{name} could not be reached at submit",
                    "withdrawn": False,
                }
            )
            position, current = position + 1, None
    state = {
        "candidates": placed.candidates,
        "position": position,
        "attempt": 1,
        "profile": name,
        "backend": current.profile.backend,
        "placed_at": now_text(),
        "max_queue": max_queue_of(current.spec),
        "decision": placed.decision,
        "spec": current.spec.to_submitted(),
        "cwd": os.getcwd(),
        "allow_files": list(placed.allow_files),
        "moves": placed.skipped,
        "exhausted": False,
    }
    from launcher.sdk.index import RunIndex
    from launcher.sdk.placement import start_watcher

    RunIndex().save_placement(run.name, state)
    if state["max_queue"] and position + 1 < len(placed.candidates):
        start_watcher(run.name)
    return run


def _pack_code(spec: RunSpec, target: Backend, secrets, store, allow_files: tuple[str, ...]):
    """The spec's working tree, packed for `target` with the secrets the run gets; no file
    may hold a value of any secret of the store, nor lie in the launcher home (where a
    dry-run leaves the secrets in the cluster, the credential-file checks alone apply)."""
    from launcher.config import launcher_home
    from launcher.sdk.code_selection import build

    if not target.supports(Feature.CODE_SNAPSHOT):
        raise InputError(
            f"code: the {target.name} backend cannot ship a code snapshot: {target.UNSUPPORTED[Feature.CODE_SNAPSHOT]}"
        )
    # A backend that supports a feature inherits its mixin (capabilities.check_declaration).
    limit = cast(CodeSnapshots, target).code_limit()
    return build(
        spec.code,
        secrets=secrets,
        stored=store.list() if store is not None else None,
        home=launcher_home(),
        allow_files=allow_files,
        limit=limit,
        where=f"a run of the {target.name} backend",
    )


def create_run(
    config: RunConfig | RunSpec | dict[str, Any] | str, *, cluster: str | None = None, backend: str | None = None
) -> Run:
    """Submit a run (a RunConfig, a mapping of its fields, or a YAML path) to a cluster
    profile (default: compute.cluster where it names one, else the current profile).
    The returned Run's `warnings` name what the target cannot fully honour."""
    return prepare_run(config, cluster=cluster, backend=backend).submit()


def named(spec: RunSpec, run_name: str | None = None) -> RunSpec:
    """The spec named as its run: `run_name`, or a fresh unique name from its own."""
    from launcher.spec.names import unique_run_name

    return spec.model_copy(update={"name": run_name or unique_run_name(spec.name)})


def _target(spec: RunSpec, cluster: str | None, backend: str | None, *, dry_run: bool):
    """The profile a run goes to, its backend (the profile read once, here), its secret
    store (None for a dry-run where the secrets live in the cluster) and notes on the
    choice. A compute.cluster that names no profile here (an mcli cluster such as r1z1)
    is a note, never an error."""
    from launcher.backends.registry import open_backend, runs_on_a_cluster
    from launcher.config import Profile, launcher_home, load_config
    from launcher.sdk.profiles import resolve_profile
    from launcher.secrets.store import LocalSecretStore
    from launcher.spec.models import cluster_names

    config = load_config()
    notes: list[str] = []
    names = cluster_names(spec.compute.cluster)
    named_cluster = names[0] if names else None  # one: several are a placement
    if cluster is None and (backend is None or runs_on_a_cluster(backend)) and named_cluster:
        if named_cluster in {p.name for p in config.profiles()}:
            cluster = named_cluster
        else:
            notes.append(
                f"compute.cluster {named_cluster!r} names no cluster profile here: using "
                f"{'the ' + backend + ' backend' if backend else 'the current profile, ' + config.current}"
            )
    if dry_run and backend and not cluster and not any(p.backend == backend for p in config.profiles()):
        # Show what a run becomes before any cluster is configured: the shipped defaults
        # (namespace default, GPU Feature Discovery labels) and the local secrets' names.
        notes.append(
            "no Kubernetes cluster profile yet: rendering with the shipped defaults "
            "(add one with `launcher cluster add`)"
        )
        profile = Profile("default", backend, {})
        return profile, open_backend(profile), LocalSecretStore(launcher_home()), notes
    profile = resolve_profile(cluster=cluster, backend=backend, config=config)
    target = open_backend(profile)
    if dry_run and target.supports(Feature.SECRETS_IN_CLUSTER):
        return profile, target, None, notes
    return profile, target, target.secret_store(), notes


# --- listing ---------------------------------------------------------------------------------


def parse_status(value: RunStatus | str) -> RunStatus:
    """A RunStatus from itself or its name, any case ("completed")."""
    if isinstance(value, RunStatus):
        return value
    try:
        return RunStatus(str(value).strip().upper())
    except ValueError:
        raise InputError(f"{value!r} is not a status; use one of {', '.join(s.value for s in RunStatus)}") from None


def _listed(cluster: str | Iterable[str] | None = None, query: RunQuery | None = None):
    """(backend, run) for the runs `query` wants (None: every run) of every profile (or those
    named), newest first, and one warning per profile that could not be listed. When none
    could be, or the current profile (the profiles named, where named) could not be, the
    error: a cluster that is down must not look empty."""
    from launcher.config import load_config
    from launcher.sdk.fanout import list_runs

    config = load_config()
    names = _strings(cluster)
    profiles = [config.profile(n) for n in names] if names else config.profiles()
    required = [p.name for p in profiles] if names else [config.current]
    return list_runs(profiles, query, required=required, prefer=[config.current])


def _strings(value: object) -> list[Any]:
    """A filter's values, one or several: None is none; a string, a number, a status or a Run is one."""
    if value is None:
        return []
    if isinstance(value, str | int | RunStatus | Run):
        return [value]
    if not isinstance(value, Iterable):
        raise TypeError(f"expected one value or several, got {value!r}")
    return list(value)


def _local(t: datetime | None) -> datetime | None:
    """A naive time is the user's local time, as on the command line."""
    return t.astimezone() if t is not None else None


def get_runs(
    runs: RunRef | Iterable[RunRef] | None = None,
    *,
    cluster: str | Iterable[str] | None = None,
    status: RunStatus | str | Iterable[RunStatus | str] | None = None,
    gpu_type: str | Iterable[str] | None = None,
    gpu_num: int | Iterable[int] | None = None,
    before: datetime | None = None,
    after: datetime | None = None,
    limit: int | None = None,
    latest: bool = False,
    ids: Iterable[str] | None = None,
) -> RunList:
    """Runs, newest first, with mcli's filters (each takes one value or several):
    `runs` names, spec names (every run of that spec) or globs; `ids` full run names;
    `cluster` profiles; `status`; `gpu_type` (compute.gpu_type; "none" or "cpu" for none);
    `gpu_num` (compute.gpus); created `before`/`after` (a naive time is local);
    `limit` at most that many; `latest` only the newest. A profile that cannot be asked
    is a line in the result's `warnings`; when none can be, or the current profile (or
    one that `cluster` names) cannot be, the error (ClusterUnreachable for clusters that
    are away)."""
    from launcher.backends.listing import RunQuery

    gpu_nums = set()
    for n in _strings(gpu_num):
        try:
            gpu_nums.add(int(n))
        except (TypeError, ValueError):
            raise InputError(f"gpu_num: {n!r} is not a number of GPUs") from None
    query = RunQuery(
        names=tuple(name_of(r) for r in _strings(runs)),
        ids=frozenset(_strings(ids)),
        statuses=frozenset(parse_status(s) for s in _strings(status)),
        gpu_types=frozenset(str(t).lower() for t in _strings(gpu_type)),
        gpu_nums=frozenset(gpu_nums),
        before=_local(before),
        after=_local(after),
        limit=(1 if latest else None) if limit is None else min(max(limit, 0), 1 if latest else limit),
    )
    pairs, warnings = _listed(cluster, query)
    return RunList([r for _, r in pairs], warnings)


def select_runs(names: Iterable[RunRef] = (), *, all: bool = False, latest: bool = False) -> RunList:
    """The runs an action (stop, delete) is for: each name as the command line means it
    (a full name, a spec name's latest run, a glob; none matching is RunNotFound), every
    run (`all`), or only the newest of those (`latest`). Naming none of them is an
    InputError: an action never falls back to every run. A name found nowhere, whose
    cluster (where it was submitted, else the current profile) could not be asked, is
    that cluster's failure (ClusterUnreachable where it is down)."""
    from launcher.sdk.run_names import not_found, select

    wanted_names = [name_of(n) for n in names]
    if not wanted_names and not all and not latest:
        raise InputError("name the runs, or choose every run with --all or the latest with --latest")
    from launcher.config import load_config
    from launcher.sdk.fanout import listed_runs, unasked_home

    config = load_config()
    pairs, failed = listed_runs(config.profiles(), prefer=[config.current])
    warnings = [e.message for e in failed.values()]
    listed = [r.name for _, r in pairs]
    if wanted_names:
        wanted: dict[str, None] = {}
        for n in wanted_names:
            chosen = select(n, listed)
            if not chosen:
                # Its cluster being down is the answer, not that there is no such run.
                raise unasked_home(n, failed) or not_found(n, listed, warnings)
            wanted.update(dict.fromkeys(chosen))
        runs = [r for _, r in pairs if r.name in wanted]
    else:
        runs = [r for _, r in pairs]
    return RunList(runs[:1] if latest else runs, warnings)


# --- acting ----------------------------------------------------------------------------------


class _Backends:
    """The backend of each run acted on, opened once per profile; closed at the end."""

    def __init__(self) -> None:
        self.opened: dict[str, Backend] = {}

    def of(self, run: RunRef) -> tuple[Backend, str]:
        if isinstance(run, Run) and run.cluster:
            if run.cluster not in self.opened:
                from launcher.backends.registry import open_backend
                from launcher.config import load_config

                self.opened[run.cluster] = open_backend(load_config().profile(run.cluster))
            return self.opened[run.cluster], run.name
        backend, record = resolve(run)
        self.opened.setdefault(f"#{len(self.opened)}", backend)
        return backend, record.name

    def __enter__(self) -> _Backends:
        return self

    def __exit__(self, *exc: object) -> None:
        for backend in self.opened.values():
            backend.close()


def stop_run(run: RunRef) -> Run:
    """Stop the run's processes and keep its record and logs; returns it as it ended."""
    return stop_runs([run])[0]


def stop_runs(runs: Iterable[RunRef]) -> RunList:
    """Stop each run; the records as they ended, in the order given."""
    out = RunList()
    with _Backends() as backends:
        for run in runs:
            backend, name = backends.of(run)
            try:
                out.append(backend.stop(name))
            except NotFoundError as e:
                raise run_not_found(e) from None
    return out


def delete_run(run: RunRef) -> Run:
    """Stop the run if needed and remove everything it created, its record included;
    returns the record as it was."""
    return delete_runs([run])[0]


def delete_runs(runs: Iterable[RunRef]) -> RunList:
    """Delete each run (as delete_run); the records as they were, in the order given."""
    from launcher.metrics.cache import forget_run
    from launcher.sdk.index import RunIndex

    out = RunList()
    index = RunIndex()
    with _Backends() as backends:
        for run in runs:
            backend, name = backends.of(run)
            try:
                record = run if isinstance(run, Run) else backend.get(name)
                backend.delete(name)
            except NotFoundError as e:
                raise run_not_found(e) from None
            index.forget(name)
            forget_run(name)
            out.append(record)
    return out


def update_run(
    run: RunRef, *, max_duration: float | None = None, priority: str | None = None, max_retries: int | None = None
) -> Run:
    """Change a run's scheduling (max_duration in hours, priority, max_retries) where its
    backend can (its UPDATE_* features); otherwise the backend's InputError says why not."""
    with _Backends() as backends:
        backend, name = backends.of(run)
        try:
            if not isinstance(backend, Updatable):  # it names every update field unsupported: say the first
                backend.require(
                    UPDATE_FEATURES[
                        "max_duration"
                        if max_duration is not None
                        else "priority"
                        if priority is not None
                        else "max_retries"
                    ]
                )
                raise AssertionError(f"{backend.name}: not Updatable, yet it names an update field supported")
            return backend.update(name, max_duration=max_duration, priority=priority, max_retries=max_retries)
        except NotFoundError as e:
            raise run_not_found(e) from None


# --- waiting ---------------------------------------------------------------------------------

# The order a run's statuses come in; every terminal one is past them all.
_ORDER = {
    s: i
    for i, s in enumerate(
        (RunStatus.PENDING, RunStatus.QUEUED, RunStatus.STARTING, RunStatus.RUNNING, RunStatus.TERMINATING)
    )
}


def reached(status: RunStatus, wanted: RunStatus) -> bool:
    """Whether a run in `status` has reached `wanted` (or gone past it, or ended)."""
    if status.is_terminal or status is RunStatus.UNKNOWN:
        return True
    return wanted in _ORDER and _ORDER[status] >= _ORDER[wanted]


def wait_for_run_status(
    run: RunRef, status: RunStatus | str, timeout: float | None = None, *, poll_seconds: float = 0.5
) -> Run:
    """Wait until the run reaches `status` (a RunStatus or its name), goes past it, or
    ends (COMPLETED, FAILED, STOPPED), and return it as it is then. Past `timeout`
    seconds, raise WaitTimeout (a TimeoutError)."""
    wanted = parse_status(status)
    deadline = None if timeout is None else time.monotonic() + timeout
    with _Backends() as backends:
        backend, name = backends.of(run)
        while True:
            try:
                current = backend.get(name)
            except NotFoundError as e:
                raise run_not_found(e) from None
            if reached(current.status, wanted):
                return current
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(
                    f"run {name} did not reach {wanted.value} within {timeout:g} s (it is {current.status.value})",
                    current,
                )
            time.sleep(poll_seconds if deadline is None else max(0.0, min(poll_seconds, deadline - time.monotonic())))
