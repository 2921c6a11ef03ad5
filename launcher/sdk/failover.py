"""Failover: a run placed across clusters (launcher.sdk.placement) with placement.max_queue
that waits that long on one cluster is withdrawn there (stopped, its record kept) and
submitted to the next candidate whose free GPUs fit it, under the same run name, as its
next attempt. `run --follow` looks with step(); while nobody follows, the detached
watcher does (`python -m launcher.sdk.failover NAME`, started at submit), until the run
stops waiting or no candidate is left.

A move holds the run's lock (an flock in $LAUNCHER_HOME/placement/, dropped by the
kernel if its holder dies) and is written only where the index still holds the attempt
it started from: two watchers never move a run twice.
"""

from __future__ import annotations

import fcntl
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from launcher.backends.base import Run
from launcher.errors import ClusterUnreachable, LauncherError
from launcher.sdk.placement import WAITING, ask, gpus_of, movable, now_text, placement_of


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


def step(name: str, *, poll: float = 5.0) -> Step:
    """Look at a placed run once and act: past max_queue on its cluster, it is withdrawn
    there and submitted to the next candidate that can be reached."""
    from launcher.backends.registry import open_backend
    from launcher.config import load_config
    from launcher.sdk.index import RunIndex

    index = RunIndex()
    state = index.placement(name)
    if not movable(state):
        return Step(None)
    with _move_lock(name) as held:
        state = index.placement(name)  # as it is now that no other watcher moves it
        if not held:
            return Step(None, watching=True, wait=poll)  # another process is moving it now
        if state is None or not movable(state):
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
    why = (
        f"{run.status.value} on {here} for {seconds_text(round(waited))}, past placement.max_queue "
        f"({seconds_text(state['max_queue'])})"
    )
    from launcher.config import load_config

    unreached = []
    withdrawn = False
    later = state["candidates"][state["position"] + 1 :]
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
            return Step(
                run,
                line=f"placement: {why}; no other cluster has {gpus_of(state['spec'])} free "
                f"({', '.join(c.words() for c in asked)}): it waits on {here}",
                watching=True,
                wait=1.0,
            )
        return Step(run, watching=True, wait=1.0)
    for position in range(state["position"] + 1, len(state["candidates"])):
        there = state["candidates"][position]
        if there not in fitting:
            continue
        try:
            prepared = prepare_run(
                state["spec"], cluster=there, run_name=name, allow_files=tuple(state.get("allow_files") or ())
            )
            if not withdrawn:
                backend.stop(name)  # withdrawn: its record stays there, for describe
                withdrawn = True
            moved = prepared.submit_here()
        except LauncherError as e:  # down, or it refuses the run (a gpu_type, a secret it lacks)
            unreached.append(f"{there} could not take it ({e.message.splitlines()[0]})")
            continue
        state["moves"].append(
            {"attempt": attempt, "from": here, "to": there, "at": now_text(), "why": why, "withdrawn": True}
        )
        state.update(
            position=position,
            attempt=attempt + 1,
            profile=there,
            backend=prepared.profile.backend,
            placed_at=now_text(),
        )
        index.save_placement(name, state, expect_attempt=attempt)
        line = move_line(state["moves"][-1])
        if unreached:
            line += f" ({'; '.join(unreached)})"
        return Step(moved, line=line, watching=movable(state), wait=0.05)
    state["exhausted"] = True
    if withdrawn:
        state["moves"].append(
            {"attempt": attempt, "from": here, "to": None, "at": now_text(), "why": why, "withdrawn": False}
        )
    index.save_placement(name, state, expect_attempt=attempt)
    if withdrawn:
        line = move_line(state["moves"][-1])
    else:
        line = f"placement: {why}, and no other cluster can take it: it waits on {here}"
    line += f" ({'; '.join(unreached)})" if unreached else ""
    return Step(backend.get(name) if withdrawn else run, line=line)


def move_line(move: dict) -> str:
    """The line a recorded move is shown as, by the process that made it and by a follower
    that finds it made by another (the detached watcher)."""
    if move.get("to"):
        return f"placement: {move['why']}: withdrawn there, attempt {move['attempt'] + 1} submitted to {move['to']}"
    return f"placement: {move['why']}: withdrawn there, and no other cluster could take it: the run is stopped"


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
