"""A `Run` as plain data and as words: the record `-o json|yaml` and the dashboard's API
serve, and the formats of times and durations that the CLI and the dashboard both show.

They sit beside `Run` (base.py), below both readers, so that neither the CLI nor the
dashboard imports the other.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from launcher.spec.retry import retry_class

if TYPE_CHECKING:
    from launcher.backends.base import Attempt, Run
    from launcher.backends.goodput import Goodput


def when(ts: datetime | None) -> str:
    """A moment in the reader's local time, to the second; '-' for none."""
    if ts is None:
        return "-"
    return ts.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def ago(ts: datetime | None) -> str:
    """How long ago, in the largest whole unit: '3m ago'; '-' for none."""
    if ts is None:
        return "-"
    secs = int((datetime.now(UTC) - ts).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{secs // size}{unit} ago"
    return f"{secs}s ago"


def until(ts: datetime) -> str:
    """How long from now until a moment, in whole seconds: 'in 40 s'; 'now' once it has come."""
    secs = int((ts - datetime.now(UTC)).total_seconds() + 0.999)
    return f"in {secs} s" if secs > 0 else "now"


def status_detail(run: Run) -> str:
    """A run's reason as the listings show it, marked when the run is in a crash loop."""
    if run.crash_loop:
        return "crash loop" + (f"; {run.reason}" if run.reason else "")
    return run.reason or ""


def duration(start: datetime | None, end: datetime | None) -> str:
    """From start to end (or to now while running) as [h:]mm:ss; '-' before a start."""
    if start is None:
        return "-"
    return clock((end or datetime.now(UTC)) - start)


def clock(span: timedelta) -> str:
    """A span of time as [h:]mm:ss."""
    secs = int(span.total_seconds())
    h, rem = divmod(secs, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def running_time(run: Run, now: datetime | None = None) -> timedelta | None:
    """How long the run's attempts ran, added up: each from its start to its end (the one
    running, to `now`). Not the time between them: a retry's backoff, or the time a run sat
    stopped before `run -r` restarted it. None before the first start. Every backend records
    its attempts' times (a local run in its state, a Kubernetes one from its Jobs' pods), so
    this is the duration of `get runs`, `describe` and the dashboard on all of them."""
    now = now or datetime.now(UTC)
    if not any(a.started_at is not None for a in run.attempts):
        # A record without attempts' times: its first start to its end.
        return None if run.started_at is None else (run.ended_at or now) - run.started_at
    total = timedelta()
    for a in run.attempts:
        if a.started_at is None:
            continue
        end = a.ended_at
        if end is None:
            later = [b.started_at for b in run.attempts if b.index > a.index and b.started_at is not None]
            # An attempt that did not record its end ended when the run did, or when the next one began.
            end = min(later) if later else run.ended_at if run.status.is_terminal else None
        total += max((end or now) - a.started_at, timedelta())
    return total


def run_duration(run: Run) -> str:
    """running_time as [h:]mm:ss, the DURATION `get runs`, `describe` and the dashboard show;
    '-' before the first start."""
    ran = running_time(run)
    return "-" if ran is None else clock(ran)


def running_since(run: Run) -> datetime | None:
    """While an attempt runs: the moment from which the time to now is running_time (its
    start, less the earlier attempts' running time), for a duration that ticks (the
    dashboard's runs page); None when no attempt is running."""
    if run.status.is_terminal or not run.attempts:
        return None
    latest = run.attempts[-1]
    if latest.started_at is None or latest.ended_at is not None:
        return None
    now = datetime.now(UTC)
    ran = running_time(run, now)
    return None if ran is None else now - ran


def to_yaml(obj: Any) -> str:
    """YAML with multi-line strings (commands) as readable | blocks."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def str_rep(dumper, value):
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, str_rep)
    return yaml.dump(obj, Dumper=Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True).rstrip()


def _iso(ts: datetime | None) -> str | None:
    return ts.isoformat() if ts else None


def tokens_per_sec_text(g: Goodput) -> str:
    """A goodput's tokens/s in words ("-": the trainer's records do not say, or were not read)."""
    return "-" if g.tokens_per_sec is None else f"{g.tokens_per_sec:,.0f}"


def mfu_text(g: Goodput) -> str:
    """A goodput's MFU as a percentage ("-": not known)."""
    return "-" if g.mfu is None else f"{g.mfu:.1%}"


def run_record(run: Run) -> dict[str, Any]:
    """A run as plain data, for -o json|yaml and the dashboard's /api/runs/NAME."""
    return {
        "name": run.name,
        "backend": run.backend,
        "cluster": run.cluster,
        "status": run.status.value,
        "reason": run.reason,
        "exit_code": run.exit_code,
        "retry_at": _iso(run.retry_at),
        "crash_loop": run.crash_loop,
        "failure": failure_record(run.last_failure),
        "excluded_nodes": [dict(e) for e in run.excluded_nodes],
        "goodput": run.goodput().record(),
        "created_at": _iso(run.created_at),
        "started_at": _iso(run.started_at),
        "ended_at": _iso(run.ended_at),
        "attempts": [
            {
                "attempt": a.index,
                "status": a.status.value,
                "reason": a.reason,
                "started_at": _iso(a.started_at),
                "ended_at": _iso(a.ended_at),
                "failure": failure_record(a),
                "resumed": resumed_record(run, a),
                "stragglers": list(a.stragglers),
                "ranks": [
                    {
                        "rank": r.rank,
                        "status": r.status.value,
                        "exit_code": r.exit_code,
                        "reason": r.reason,
                        "node": r.node,
                    }
                    for r in a.ranks
                ],
            }
            for a in run.attempts
        ],
        "events": [
            {"status": e.status.value, "at": e.at.isoformat(), "attempt": e.attempt, "reason": e.reason}
            for e in run.events
        ],
        "queue": queue_record(run),
        "spec": run.spec,
    }


def failure_record(attempt: Attempt | None) -> dict[str, Any] | None:
    """How an attempt failed (launcher.pod.failures), as plain data; None where it did not or
    its backend cannot tell."""
    if attempt is None or attempt.failure_class is None:
        return None
    return {
        "class": attempt.failure_class,
        "evidence": attempt.evidence,
        "retried_as": retry_class(attempt.failure_class),
        "last_step": attempt.last_step,
        "progress_age": attempt.progress_age,
    }


def resumed_record(run: Run, attempt: Attempt) -> dict[str, Any] | None:
    """The checkpoint a retried attempt resumed from, and the steps lost: the last step the
    attempt before it reported, less the checkpoint's."""
    if attempt.resumed_from is None:
        return None
    before = next((a for a in run.attempts if a.index == attempt.index - 1), None)
    lost = (
        max(0, before.last_step - attempt.resumed_step)
        if before is not None and before.last_step is not None and attempt.resumed_step is not None
        else None
    )
    return {"from": attempt.resumed_from, "step": attempt.resumed_step, "steps_lost": lost}


def queue_record(run: Run) -> dict[str, Any] | None:
    """Its place in the cluster's queue (Kueue), as plain data; None without a queue."""
    q = run.queue
    if q is None:
        return None
    return {
        "queue": q.queue,
        "cluster_queue": q.cluster_queue,
        "workload": q.workload,
        "admitted": q.admitted,
        "position": q.position,
        "pending": q.pending,
        "position_in_cluster_queue": q.position_in_cluster_queue,
        "position_from": q.position_from,
        "reason": q.reason,
        "since": _iso(q.since),
        "evictions": [
            {"reason": e.reason, "message": e.message, "at": _iso(e.at), "count": e.count} for e in q.evictions
        ],
    }
