"""Placement across clusters, and failover.

A run whose compute.cluster (or `--cluster`) is `auto` (every cluster profile here but
local, in config order) or a list of profiles goes to the first of them, in order,
whose free GPUs of the type it asks for fit it (Backend.free_gpus: the nodes' allocatable
GPUs less the pods' requests, or a Kueue ClusterQueue's free quota). The profiles are
asked at once, each within ASK_SECONDS: a cluster that is down or hangs is an answer
("could not be asked"), never a wait. When none fits, the run goes to the first that
answered, and waits in its queue there.

When the cluster chosen cannot be reached at submit, the next candidate takes the run.
With `placement: {max_queue: 15m}`, a run that waits (PENDING or QUEUED) that long on one
cluster is withdrawn there (stopped, its record kept) and submitted to the next under the
same run name, as its next attempt; the move is kept in the run index (index.db) and shown
by `describe`. Two things watch for it: `run --follow`, and a detached watcher process
started at submit (`python -m launcher.sdk.placement NAME`), which exits once the run
stops waiting or no candidate is left. A move holds a lock on the run (an flock in
$LAUNCHER_HOME/placement/) and is written only where the index still holds the attempt
it started from, so two watchers never move a run twice.

decide() is pure: the tests and the bench give it candidates directly.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launcher.backends.base import FreeGpus, Run, RunStatus
from launcher.errors import ClusterUnreachable, InputError, LauncherError
from launcher.spec.models import AUTO_CLUSTER, cluster_names

if TYPE_CHECKING:
    from launcher.config import Config, Profile
    from launcher.sdk.config import RunConfig
    from launcher.sdk.runs import PreparedRun
    from launcher.spec.models import RunSpec

ASK_SECONDS = 3.0
"""How long a placement waits for one profile's free GPUs: a cluster that hangs costs this, once."""
WAITING = (RunStatus.PENDING, RunStatus.QUEUED)
"""A run in these has not started: max_queue counts them."""


# --- the decision --------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """One profile a run may go to, as it answered: its free GPUs, or why it could not be asked."""

    profile: str
    free: FreeGpus | None = None
    error: str | None = None

    def words(self) -> str:
        if self.free is None:
            error = (self.error or "no answer").removeprefix(f"cluster {self.profile}: ")
            return f"{self.profile} could not be asked ({error})"
        f = self.free
        where = f"{self.profile}'s {f.source}" if f.source != "nodes" else self.profile
        if f.gpu_type == "none":
            return f"{where} takes CPU runs"
        return f"{where} has {f.free} of {f.total} free {f.gpu_type}"


@dataclass(frozen=True)
class Decision:
    gpus: int
    """The GPUs the run asks for."""
    candidates: tuple[Candidate, ...]
    chosen: str | None
    """The profile the run goes to; None when not one could be asked."""
    fits: bool
    """Whether the chosen profile has the GPUs free (else the run waits in its queue there)."""

    def line(self) -> str:
        """The decision in one line, as `run` prints it."""
        said = ", ".join(c.words() for c in self.candidates)
        if self.chosen is None:
            return f"placement: {said}: no cluster can take the run"
        if self.fits:
            return f"placement: {said}: placed on {self.chosen}"
        return (f"placement: {said}: none has {self.gpus} free; placed on {self.chosen}, the first that "
                "answered, where it waits in the queue")


def gpus_of(spec: RunSpec | Mapping[str, Any]) -> int:
    compute = spec.get("compute") or {} if isinstance(spec, Mapping) else spec.compute.model_dump()
    return int(compute.get("gpus") or 0)


def decide(spec: RunSpec | Mapping[str, Any], candidates: Sequence[Candidate]) -> Decision:
    """The first candidate, in order, whose free GPUs fit the run (any that answered, for a
    run without GPUs); when none fits, the first that answered; None when none did."""
    gpus = gpus_of(spec)
    answered = [c for c in candidates if c.free is not None]
    fitting = [c for c in answered if c.free is not None and c.free.free >= gpus]
    chosen = (fitting or answered or [None])[0]
    return Decision(gpus, tuple(candidates), chosen.profile if chosen else None, bool(fitting))


# --- the candidates ------------------------------------------------------------------------


def is_placed(cluster: str | list[str] | None) -> bool:
    """Whether a compute.cluster (or --cluster) asks for a placement: `auto` or several profiles."""
    names = cluster_names(cluster)
    return names == [AUTO_CLUSTER] or len(names) > 1


def candidate_profiles(cluster: str | list[str] | None, config: Config) -> list[Profile]:
    """The profiles `auto` or a list names, in order; a name that is no profile is an error."""
    names = cluster_names(cluster)
    if names == [AUTO_CLUSTER]:
        profiles = [p for p in config.profiles() if p.backend != "local"]
        if not profiles:
            raise InputError("compute.cluster: auto places the run on a cluster profile, and there is none but local",
                             hint="add one with `launcher cluster add`")
        return profiles
    known = {p.name: p for p in config.profiles()}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InputError(f"compute.cluster: {', '.join(map(repr, unknown))} names no cluster profile "
                         f"(known: {', '.join(known)})", hint="add one with `launcher cluster add`")
    return [known[n] for n in names]


def ask(spec: RunSpec, profiles: Sequence[Profile], *, seconds: float = ASK_SECONDS) -> list[Candidate]:
    """Each profile's free GPUs of the type `spec` asks for, all asked at once, each within
    `seconds`; a profile whose backend refuses the spec (offline: an unknown gpu_type there)
    or that is down or silent is a Candidate with its error."""
    from launcher.backends.registry import ask_each, open_backend

    def free_on(profile: Profile) -> FreeGpus:
        backend = open_backend(profile)
        try:
            backend.check(spec)
            return backend.free_gpus(spec)
        finally:
            backend.close()

    answers, failed = ask_each(list(profiles), free_on, seconds=seconds)
    return [Candidate(p.name, answers[p.name]) if p.name in answers else Candidate(p.name, error=failed[p.name].message)
            for p in profiles]


# --- preparing and submitting --------------------------------------------------------------


@dataclass
class Placed:
    """A prepared run's placement: where the decision put it and where it may go next."""

    candidates: list[str]
    position: int
    decision: str
    config: Any
    """The RunConfig, for preparing the run on another candidate."""
    run_name: str
    allow_files: tuple[str, ...] = ()
    on_note: Callable[[str], None] | None = None
    skipped: list[dict] = field(default_factory=list)
    """Candidates that could not be reached at submit, as moves of attempt 1."""

    def note(self, text: str) -> None:
        if self.on_note is not None:
            self.on_note(text)


def prepare(config: RunConfig, cluster: str | list[str], *, dry_run: bool, on_note: Callable[[str], None] | None,
            allow_files: tuple[str, ...], run_name: str | None) -> PreparedRun:
    """prepare_run for `auto` or a list: a dry-run (or validate) checks every candidate
    offline and shows the first that takes the spec; a submit asks them all and prepares
    the run where decide() puts it."""
    from launcher.config import load_config
    from launcher.sdk.runs import named, prepare_on

    spec = named(config, run_name)
    profiles = candidate_profiles(cluster, load_config())
    if dry_run:
        refusals = []
        for profile in profiles:
            try:
                prepared = prepare_on(config, spec, profile, dry_run=True, notes=[], on_note=None,
                                      allow_files=allow_files)
            except InputError as e:
                refusals.append(e)
                continue
            note = (f"placement: decided at submit among {', '.join(p.name for p in profiles)} by their free GPUs; "
                    f"checked for {profile.name}")
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
        raise ClusterUnreachable(f"none of the {len(profiles)} cluster profiles could take the run",
                                 warnings=[c.error or "" for c in candidates])
    names = [p.name for p in profiles]
    placed = Placed(names, names.index(decision.chosen), decision.line(), config, spec.name, allow_files, on_note)
    prepared = _prepared_at(placed, placed.position, spec)
    prepared.placement = placed
    return prepared


def _prepared_at(placed: Placed, position: int, spec: RunSpec | None = None) -> PreparedRun:
    from launcher.config import load_config
    from launcher.sdk.runs import named, prepare_on

    spec = spec or named(placed.config, placed.run_name)
    profile = load_config().profile(placed.candidates[position])
    return prepare_on(placed.config, spec, profile, dry_run=False, notes=[], on_note=None,
                      allow_files=placed.allow_files)


def submit(prepared: PreparedRun) -> Run:
    """Submit where the decision put the run; a cluster that cannot be reached (at the
    prepare, which reads its secrets, or at the submit) passes it to the next candidate."""
    placed = prepared.placement
    assert placed is not None
    position, current = placed.position, prepared
    while True:
        name = placed.candidates[position]
        try:
            if current is None:
                current = _prepared_at(placed, position)
            run = current.submit_here()
            break
        except ClusterUnreachable as e:
            after = placed.candidates[position + 1:]
            if not after:
                raise
            placed.note(f"placement: {name} could not be reached at submit ({e.message.splitlines()[0]}): "
                        f"trying {after[0]}")
            placed.skipped.append({"attempt": 1, "from": name, "to": after[0], "at": _now(),
                                   "why": f"{name} could not be reached at submit", "withdrawn": False})
            position, current = position + 1, None
    state = {"candidates": placed.candidates, "position": position, "attempt": 1,
             "profile": name, "backend": current.profile.backend, "placed_at": _now(),
             "max_queue": _max_queue(current.spec), "decision": placed.decision,
             "spec": current.spec.to_submitted(), "cwd": os.getcwd(), "allow_files": list(placed.allow_files),
             "moves": placed.skipped, "exhausted": False}
    from launcher.backends.registry import RunIndex

    RunIndex().save_placement(run.name, state)
    if state["max_queue"] and position + 1 < len(placed.candidates):
        start_watcher(run.name)
    return run


def _max_queue(spec: RunSpec) -> float | None:
    return spec.placement.max_queue if spec.placement is not None else None


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


# --- failover ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """What one look at a placed run found and did."""

    run: Run | None
    """The run as it is now, where it is now (None: it could not be read)."""
    line: str | None = None
    """What was done: a move, or that no candidate is left; None: nothing."""
    watching: bool = False
    """Whether the run still waits and could still move: whether to look again."""
    wait: float = 1.0
    """Seconds until the next look is worth making."""


def placement_of(name: str) -> dict[str, Any] | None:
    """The run's placement as the index keeps it (None: it was not placed)."""
    from launcher.backends.registry import RunIndex

    return RunIndex().placement(name)


def movable(state: Mapping[str, Any] | None) -> bool:
    """Whether failover could still move the run: a max_queue, and a candidate after this one."""
    return bool(state and state.get("max_queue") and not state.get("exhausted")
                and state["position"] + 1 < len(state["candidates"]))


def step(name: str, *, poll: float = 5.0) -> Step:
    """Look at a placed run once and act: past max_queue on its cluster, it is withdrawn
    there and submitted to the next candidate that can be reached."""
    from launcher.backends.registry import RunIndex, open_backend
    from launcher.config import load_config

    index = RunIndex()
    state = index.placement(name)
    if not movable(state):
        return Step(None)
    with _move_lock(name) as held:
        state = index.placement(name)  # as it is now that no other watcher moves it
        if not held:
            return Step(None, watching=True, wait=poll)  # another process is moving it now
        if not movable(state):
            return Step(None)
        config = load_config()
        here = state["profile"]
        backend = open_backend(config.profile(here))
        try:
            run = backend.get(name)
            if run.status not in WAITING:
                return Step(run)
            waited = time.time() - datetime.fromisoformat(state["placed_at"]).timestamp()
            if waited < state["max_queue"]:
                return Step(run, watching=True, wait=max(0.05, min(poll, state["max_queue"] - waited)))
            return _move(index, state, name, backend, run, waited)
        except ClusterUnreachable:
            return Step(None, watching=True, wait=poll)  # where it waits is away: look again
        finally:
            backend.close()


def _move(index, state: dict, name: str, backend, run: Run, waited: float) -> Step:
    """Withdraw the run from where it waits and submit it to the next candidate that can be
    reached; the move, or that none is left, is written to the index."""
    from launcher.sdk.runs import prepare_run
    from launcher.spec.retry import seconds_text

    here, attempt = state["profile"], state["attempt"]
    why = (f"{run.status.value} on {here} for {seconds_text(round(waited))}, past placement.max_queue "
           f"({seconds_text(state['max_queue'])})")
    from launcher.config import load_config

    unreached = []
    withdrawn = False
    later = state["candidates"][state["position"] + 1:]
    config = load_config()
    from launcher.sdk.config import RunConfig
    from launcher.sdk.runs import named

    asked = ask(named(RunConfig.of(state["spec"]), name), [config.profile(p) for p in later])
    fitting = [c.profile for c in asked if c.free is not None and c.free.free >= gpus_of(state["spec"])]
    if not fitting:
        # Moving to a cluster as full would only queue it there: it waits here, and is looked at again.
        if state.get("said_full") != attempt:
            state["said_full"] = attempt
            index.save_placement(name, state, expect_attempt=attempt)
            return Step(run, line=f"placement: {why}; no other cluster has {gpus_of(state['spec'])} free "
                                  f"({', '.join(c.words() for c in asked)}): it waits on {here}",
                        watching=True, wait=1.0)
        return Step(run, watching=True, wait=1.0)
    for position in range(state["position"] + 1, len(state["candidates"])):
        there = state["candidates"][position]
        if there not in fitting:
            continue
        try:
            prepared = prepare_run(state["spec"], cluster=there, run_name=name,
                                   allow_files=tuple(state.get("allow_files") or ()))
            if not withdrawn:
                backend.stop(name)  # withdrawn: its record stays there, for describe
                withdrawn = True
            moved = prepared.submit_here()
        except LauncherError as e:  # down, or it refuses the run (a gpu_type, a secret it lacks)
            unreached.append(f"{there} could not take it ({e.message.splitlines()[0]})")
            continue
        state["moves"].append({"attempt": attempt, "from": here, "to": there, "at": _now(), "why": why,
                               "withdrawn": True})
        state.update(position=position, attempt=attempt + 1, profile=there, backend=prepared.profile.backend,
                     placed_at=_now())
        index.save_placement(name, state, expect_attempt=attempt)
        line = f"placement: {why}: withdrawn there, attempt {attempt + 1} submitted to {there}"
        if unreached:
            line += f" ({'; '.join(unreached)})"
        return Step(moved, line=line, watching=movable(state), wait=0.05)
    state["exhausted"] = True
    if withdrawn:
        state["moves"].append({"attempt": attempt, "from": here, "to": None, "at": _now(), "why": why,
                               "withdrawn": False})
    index.save_placement(name, state, expect_attempt=attempt)
    if withdrawn:
        line = f"placement: {why}: withdrawn there, and no other cluster could take it: the run is stopped"
    else:
        line = f"placement: {why}, and no other cluster can take it: it waits on {here}"
    line += f" ({'; '.join(unreached)})" if unreached else ""
    return Step(backend.get(name) if withdrawn else run, line=line)


@contextmanager
def _move_lock(name: str) -> Iterator[bool]:
    """Hold the run's move lock, without waiting: whether it is held (another process holding
    it is moving the run now). The kernel drops it when its holder dies."""
    from launcher.config import launcher_home

    path = launcher_home() / "placement" / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# --- the watcher ---------------------------------------------------------------------------


def watcher_log(name: str) -> Path:
    from launcher.config import launcher_home

    return launcher_home() / "placement" / f"{name}.log"


def start_watcher(name: str) -> None:
    """The detached process that keeps max_queue for a run while nobody follows it."""
    log = watcher_log(name)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        subprocess.Popen([sys.executable, "-m", "launcher.sdk.placement", name], stdin=subprocess.DEVNULL,
                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)


def watch(name: str, *, poll: float = 5.0) -> int:
    """Look at a placed run until it stops waiting or cannot move any more, acting as step()
    does; bounded by the time every candidate's max_queue could take, and an hour more."""
    state = placement_of(name)
    if not movable(state):
        return 0
    assert state is not None
    poll = max(0.2, min(poll, state["max_queue"] / 4))
    deadline = time.monotonic() + state["max_queue"] * len(state["candidates"]) + 3600
    while time.monotonic() < deadline:
        try:
            done = step(name, poll=poll)
        except LauncherError as e:
            print(f"placement watcher: {e.message}", flush=True)
            done = Step(None, watching=True, wait=poll)
        if done.line:
            print(done.line, flush=True)
        if not done.watching:
            return 0
        time.sleep(done.wait)
    return 0


if __name__ == "__main__":
    sys.exit(watch(sys.argv[1]))
