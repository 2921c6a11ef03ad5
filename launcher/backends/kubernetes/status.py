"""A run's status, derived from what the API server says: a pure function.

Inputs are plain API objects (dicts): the run's ConfigMap (its durable record),
its current Job, its pods (every attempt's), and recent Warning events of its
pods. The output is the contract's `Run`, plus what a reconciler must do next:
restart the group (a retry) or end a run that can never start (a fatal
container error, which Kubernetes would otherwise leave Pending forever).

One attempt's status is attempts.py's (shared with the JobSet form, in
jobset_status.py); whether a failed attempt is retried is the run's RetryPolicy.
An observation only says what is due: reconcile.py acts on it, and only where a
command asks it to (`launcher reconcile`, `run --follow`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from launcher.backends.base import Attempt, Run, RunStatus, StatusEvent, retry_due, utcnow
from launcher.backends.kubernetes import keys, kueue
from launcher.backends.kubernetes.attempts import (
    Action,
    Observed,
    annotations,
    attempt_from_summary,
    attempt_of,
    attempt_view,
    record_json,
    spec_of,
    summary_of,
    ts,
)
from launcher.backends.kubernetes.jobset_status import derive_jobset
from launcher.spec.retry import EVICTED, FATAL, RetryPolicy


def retry_allowed(spec: dict[str, Any], finished: list[dict[str, Any]], failure: str | None, since: int = 1) -> bool:
    """May a failed attempt be followed by another? `finished` are the attempt summaries
    already recorded before this one (stopped ones do not count, nor those before attempt
    `since`, where a user's restart began)."""
    earlier = [
        a.get("failure")
        for a in finished
        if a.get("status") == RunStatus.FAILED.value and (since <= 1 or int(a.get("index") or 0) >= since)
    ]
    return RetryPolicy.from_spec(spec).allows(earlier, failure)


def live_attempt(obs: Observed) -> tuple[Attempt, str | None, list[StatusEvent]] | None:
    """The attempt of the run's current Job as its pods tell it (with how it failed, and its
    events), or None where there is no Job or its attempt is already recorded."""
    record, job = obs.record, obs.job
    if job is None:
        return None
    spec = spec_of(record)
    recorded = {int(s.get("index") or 0) for s in record_json(record, keys.RECORD_ATTEMPTS, [])}
    job_attempt = attempt_of(job)
    if job_attempt in recorded:
        return None
    nodes = int((job.get("spec") or {}).get("completions") or (spec.get("compute") or {}).get("nodes") or 1)
    pods = [p for p in obs.pods if attempt_of(p) == job_attempt]
    return attempt_view(job_attempt, job, pods, obs.events, nodes)


def derive(obs: Observed, now: datetime | None = None) -> tuple[Run, Action | None]:
    """The run as a user sees it, and what must happen next (or None) at `now` (by default
    the present): a failed attempt's retry is due only once its backoff has passed."""
    if obs.is_jobset:
        run, action = derive_jobset(obs)
        kueue.apply(run, kueue.queue_state(obs.jobset, obs.kueue))
        return run, action
    now = now or utcnow()
    queue = kueue.queue_state(obs.job, obs.kueue)
    retry_at: datetime | None = None
    record, job = obs.record, obs.job
    spec = spec_of(record)
    finished: list[dict[str, Any]] = record_json(record, keys.RECORD_ATTEMPTS, [])
    final = record_json(record, keys.RECORD_FINAL, None)
    restart = annotations(record).get(keys.RECORD_RESTART)
    created = ts(((record or job or {}).get("metadata") or {}).get("creationTimestamp"))
    nodes = int(((job or {}).get("spec") or {}).get("completions") or (spec.get("compute") or {}).get("nodes") or 1)

    attempts: list[Attempt] = []
    events: list[StatusEvent] = []
    for s in finished:
        a, ev = attempt_from_summary(s)
        attempts.append(a)
        events.extend(ev)
    action: Action | None = None
    status: RunStatus
    reason: str | None = None
    exit_code: int | None = None

    job_attempt = attempt_of(job) if job else None
    recorded = {a.index for a in attempts}
    if final:
        status, reason = RunStatus(final["status"]), final.get("reason")
        exit_code = final.get("exit_code")
    elif restart and (
        job is None or job_attempt < int(restart) or (job.get("metadata") or {}).get("deletionTimestamp")
    ):
        status, reason = RunStatus.PENDING, f"restarting the group: attempt {restart}"
        action = Action("resume", next_attempt=int(restart))
    elif job is None or job_attempt in recorded:
        if not attempts:
            status, reason = RunStatus.UNKNOWN, f"its Job {obs.name} no longer exists"
        else:
            last = attempts[-1]
            status, reason = (
                (last.status, last.reason)
                if last.status.is_terminal
                else (RunStatus.UNKNOWN, f"its Job {obs.name} no longer exists")
            )
    else:
        pods = [p for p in obs.pods if attempt_of(p) == job_attempt]
        live, failure, live_events = attempt_view(job_attempt, job, pods, obs.events, nodes)
        attempts.append(live)
        events.extend(live_events)
        status, reason = live.status, live.reason
        if restart and int(restart) == job_attempt:
            action = Action("resume", next_attempt=job_attempt)  # only the ownership step is left
        elif live.status is RunStatus.FAILED:
            failed_rank = next((r for r in live.ranks if r.reason == live.reason), None)
            exit_code = failed_rank.exit_code if failed_rank else None
            evicted = kueue.evicted_during(queue, live.started_at) if failure != FATAL else None
            if evicted is not None:
                # Kueue took the run off its nodes and its pods failed of it: not the run's failure.
                failure, live.reason = EVICTED, f"{kueue.eviction_text(evicted)} (not counted against max_retries)"
                reason = live.reason
            summary = summary_of(live, failure, live_events)
            if failure == FATAL:
                action = Action("fail", summary=summary, reason=reason)
            elif record is not None and retry_allowed(
                spec, finished, failure, int(annotations(record).get(keys.RECORD_RESTARTED) or 1)
            ):
                # The backoff counts from the end of the failed attempt (its Job's Failed condition).
                due = (live.ended_at or now) + timedelta(seconds=RetryPolicy.from_spec(spec).delay(job_attempt))
                if now >= due:
                    action = Action("retry", summary=summary, next_attempt=job_attempt + 1)
                    status, reason = (
                        RunStatus.PENDING,
                        (f"attempt {job_attempt} failed ({reason}); a retry is due (`launcher reconcile` starts it)"),
                    )
                else:
                    retry_at = due
                    status, reason = RunStatus.PENDING, f"attempt {job_attempt} failed ({reason}); {retry_due(due)}"
        elif live.status is RunStatus.COMPLETED:
            exit_code = 0
    if status is RunStatus.COMPLETED:
        exit_code = 0
    started = [a.started_at for a in attempts if a.started_at]
    ended_at = attempts[-1].ended_at if attempts and status.is_terminal else None
    if final and final.get("at"):
        ended_at = ts(final["at"])
    if final:
        events.append(StatusEvent(status, ended_at or created, attempts[-1].index if attempts else 1, reason))
    if not events and created:
        events.append(StatusEvent(RunStatus.PENDING, created, 1))
    run = Run(
        name=obs.name,
        backend="kubernetes",
        status=status,
        created_at=created,
        spec=spec,
        cluster=obs.cluster,
        started_at=min(started) if started else None,
        ended_at=ended_at,
        reason=reason,
        exit_code=exit_code,
        attempts=attempts,
        events=events,
        retry_at=retry_at,
    )
    kueue.apply(run, queue)
    return run, action
