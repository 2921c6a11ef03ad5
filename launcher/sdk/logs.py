"""A run's logs: read once, or followed across its attempts until it ends."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from launcher.backends.base import Backend, LogLine, Run, RunStatus
from launcher.errors import LauncherError, LogsGoneError, NeverStartedError, NotFoundError
from launcher.sdk.exceptions import run_not_found
from launcher.sdk.runs import RunRef, resolve

__all__ = ["FollowEvent", "LogLine", "follow_run", "follow_run_logs", "get_run_logs"]


@dataclass(frozen=True)
class FollowEvent:
    """What happened to a followed run besides its log lines. `kind`:
    "status"    it entered `run.status` before starting (PENDING, QUEUED, STARTING);
    "started"   it started: its log lines follow;
    "retry_due" attempt `attempt` ended and the run waits out the backoff (run.retry_at);
    "restarted" attempt `attempt` ended and attempt `attempt + 1` took over;
    "lost"      attempt `attempt` ended before its log could be read, and it is gone (`note`: why);
    "moved"     placement's failover acted while it waited (launcher.sdk.placement): `note` says how;
    "ended"     the run ended: `run` is its final record."""

    kind: str
    run: Run
    attempt: int
    note: str | None = None


def get_run_logs(
    run: RunRef | None,
    rank: int | None = None,
    attempt: int | None = None,
    tail: int | None = None,
    *,
    raw: bool = False,
) -> Iterator[LogLine]:
    """The run's log lines as they are now, secrets masked (`str(line)` is its text).
    rank None: every rank; attempt None: the latest (counted from 1); tail: the last N
    lines of each rank. The trainer's metric records are left out unless `raw` (they are
    get_run_metrics' channel), as `launcher logs` does."""
    from launcher.sdk import logview

    backend, record = resolve(run)
    if tail is not None:
        lines, _ = logview.tail_lines(
            lambda n: backend.logs(record.name, rank=rank, attempt=attempt, tail=n), tail, raw=raw
        )
        return _closing(backend, iter(lines))
    stream = backend.logs(record.name, rank=rank, attempt=attempt)
    return _closing(backend, stream if raw else logview.without_records(stream))


def follow_run_logs(run: RunRef | None, rank: int | None = None, *, raw: bool = False) -> Iterator[LogLine]:
    """The run's log lines as they come, across its attempts, until it ends (metric
    records left out unless `raw`)."""
    from launcher.sdk import logview

    lines = (item for item in follow_run(run, rank=rank) if isinstance(item, LogLine))
    yield from lines if raw else logview.without_records(lines)


def follow_run(
    run: RunRef | None, *, backend: Backend | None = None, rank: int | None = None, from_attempt: int = 1
) -> Iterator[LogLine | FollowEvent]:
    """Follow a run from wherever it is: its statuses until it starts, then the log lines
    of each attempt (a retry restarts the whole group: the next attempt's lines follow),
    and last the "ended" event with its final record. `run --follow` prints this.
    `from_attempt`: the first attempt whose lines are given (a restarted run's new one).
    A run placed across clusters with placement.max_queue is moved on while it waits, as
    its watcher would move it (a "moved" event), and followed where it goes."""
    from launcher.sdk.placement import movable, placement_of

    owned = backend is None
    if backend is None:
        backend, record = resolve(run)
        name = record.name
    elif run is None:
        raise TypeError("follow_run: with its backend given, name the run too")
    else:
        name = run.name if isinstance(run, Run) else run
    try:
        last = None
        if movable(placement_of(name)):
            backend, owned, last = yield from _while_placed(backend, owned, name)
        yield from _follow(backend, name, rank, from_attempt, last)
    finally:
        if owned:
            backend.close()


def _while_placed(backend: Backend, owned: bool, name: str):
    """Statuses while the run waits, and its moves, until it starts or cannot move any more;
    then (the backend where it is now, whether it is ours to close, its last status shown)."""
    import time

    from launcher.backends.registry import open_backend
    from launcher.config import load_config
    from launcher.sdk.failover import move_line, step
    from launcher.sdk.placement import placement_of

    def moves() -> list[dict]:
        return (placement_of(name) or {}).get("moves") or []

    where = (placement_of(name) or {}).get("profile")
    shown = len(moves())  # moves made by another process (the detached watcher) are shown too
    last = None
    while True:
        done = step(name, poll=1.0)
        run = done.run
        if done.line and run is not None:
            yield FollowEvent("moved", run, run.current_attempt, note=done.line)
            shown = len(moves())
        elif run is not None and len(made := moves()) > shown:
            for move in made[shown:]:
                yield FollowEvent("moved", run, run.current_attempt, note=move_line(move))
            shown = len(made)
        if run is not None and not run.status.is_terminal and (run.status, run.reason) != last:
            last = (run.status, run.reason)
            yield FollowEvent("status", run, run.current_attempt)
        if not done.watching:
            break
        time.sleep(done.wait)
    now = (placement_of(name) or {}).get("profile")
    if now and now != where:
        if owned:
            backend.close()
        backend, owned = open_backend(load_config().profile(now)), True
    if len(made := moves()) > shown:  # the watcher moved it, and the run is no longer movable
        try:
            run = backend.get(name)
        except LauncherError:
            run = None
        if run is not None:
            for move in made[shown:]:
                yield FollowEvent("moved", run, run.current_attempt, note=move_line(move))
    return backend, owned, last


def _follow(
    backend: Backend, name: str, rank: int | None, from_attempt: int, last: tuple | None = None
) -> Iterator[LogLine | FollowEvent]:
    """`last`: the status (and reason) already shown, not shown again."""
    try:
        current = None
        for current in backend.watch(name):
            if current.status.is_terminal:
                break
            if (current.status, current.reason) != last:
                yield FollowEvent("status", current, current.current_attempt)
            last = None
            if current.status in (RunStatus.RUNNING, RunStatus.TERMINATING):
                break
        assert current is not None
        if current.started_at is not None:
            yield FollowEvent("started", current, current.current_attempt)
        attempt = from_attempt  # every attempt from there, even one that ended before we looked
        while True:
            try:
                # A backend's follow stream returns once the attempt is over.
                yield from backend.logs(name, rank=rank, attempt=attempt, follow=True)
            except LogsGoneError as e:  # it ended (a fast restart) before it could be read
                yield FollowEvent("lost", backend.get(name), attempt, note=e.message)
            except NeverStartedError:
                pass  # no log to show: the outcome's reason (an image that does not pull) says why
            # The watch, not a get: it starts from the run as it is now, waits while the attempt
            # is the current one, and may record an ending the backend would forget (a TTL).
            said = False
            for current in backend.watch(name):
                if current.status.is_terminal or current.current_attempt > attempt:
                    break
                if current.retry_at is not None and not said:  # waiting out the backoff
                    yield FollowEvent("retry_due", current, attempt)
                    said = True
            if current.current_attempt > attempt:
                yield FollowEvent("restarted", current, attempt)
                attempt += 1
                continue
            break
        yield FollowEvent("ended", current, attempt)
    except NotFoundError as e:
        raise run_not_found(e) from None


def _closing(backend: Backend, lines: Iterator[LogLine]) -> Iterator[LogLine]:
    try:
        yield from lines
    except NotFoundError as e:
        raise run_not_found(e) from None
    finally:
        backend.close()
