"""A run's logs: read once, or followed across its attempts until it ends."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from launcher.backends.base import Backend, LogLine, Run, RunStatus
from launcher.errors import NotFoundError
from launcher.sdk.errors import run_not_found
from launcher.sdk.runs import RunRef, resolve

__all__ = ["FollowEvent", "LogLine", "follow_run", "follow_run_logs", "get_run_logs"]


@dataclass(frozen=True)
class FollowEvent:
    """What happened to a followed run besides its log lines. `kind`:
    "status"    it entered `run.status` before starting (PENDING, QUEUED, STARTING);
    "started"   it started: its log lines follow;
    "retry_due" attempt `attempt` ended and the run waits out the backoff (run.retry_at);
    "restarted" attempt `attempt` ended and attempt `attempt + 1` took over;
    "ended"     the run ended: `run` is its final record."""

    kind: str
    run: Run
    attempt: int


def get_run_logs(run: RunRef | None, rank: int | None = None, attempt: int | None = None,
                 tail: int | None = None, *, raw: bool = False) -> Iterator[LogLine]:
    """The run's log lines as they are now, secrets masked (`str(line)` is its text).
    rank None: every rank; attempt None: the latest (counted from 1); tail: the last N
    lines of each rank. The trainer's metric records are left out unless `raw` (they are
    get_run_metrics' channel), as `launcher logs` does."""
    from launcher.backends import logview

    backend, record = resolve(run)
    if tail is not None:
        lines, _ = logview.tail_lines(lambda n: backend.logs(record.name, rank=rank, attempt=attempt, tail=n),
                                      tail, raw=raw)
        return _closing(backend, iter(lines))
    stream = backend.logs(record.name, rank=rank, attempt=attempt)
    return _closing(backend, stream if raw else logview.without_records(stream))


def follow_run_logs(run: RunRef | None, rank: int | None = None, *, raw: bool = False) -> Iterator[LogLine]:
    """The run's log lines as they come, across its attempts, until it ends (metric
    records left out unless `raw`)."""
    from launcher.backends import logview

    lines = (item for item in follow_run(run, rank=rank) if isinstance(item, LogLine))
    yield from lines if raw else logview.without_records(lines)


def follow_run(run: RunRef | None, *, backend: Backend | None = None, rank: int | None = None,
               from_attempt: int = 1) -> Iterator[LogLine | FollowEvent]:
    """Follow a run from wherever it is: its statuses until it starts, then the log lines
    of each attempt (a retry restarts the whole group: the next attempt's lines follow),
    and last the "ended" event with its final record. `run --follow` prints this.
    Following acts for the run as a reconciler does (a retry that is due starts).
    `from_attempt`: the first attempt whose lines are given (a restarted run's new one)."""
    if backend is None:
        backend, record = resolve(run)
        try:
            yield from _follow(backend, record.name, rank, from_attempt)
        finally:
            backend.close()
    else:
        yield from _follow(backend, run.name if isinstance(run, Run) else run, rank, from_attempt)


def _follow(backend: Backend, name: str, rank: int | None, from_attempt: int) -> Iterator[LogLine | FollowEvent]:
    try:
        current = None
        for current in backend.watch(name, reconcile=True):
            if current.status.is_terminal:
                break
            yield FollowEvent("status", current, current.current_attempt)
            if current.status in (RunStatus.RUNNING, RunStatus.TERMINATING):
                break
        assert current is not None
        if current.started_at is not None:
            yield FollowEvent("started", current, current.current_attempt)
        attempt = from_attempt  # every attempt from there, even one that ended before we looked
        while True:
            # A backend's follow stream returns once the attempt is over.
            yield from backend.logs(name, rank=rank, attempt=attempt, follow=True)
            current = backend.get(name)
            if not current.status.is_terminal and current.current_attempt == attempt:
                said = False
                for current in backend.watch(name, reconcile=True):
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
