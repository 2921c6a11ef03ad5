"""A JobSet run's status: a pure function of what the API server says.

The JobSet controller restarts the group by itself, with no launcher watching:
it deletes the child Job `<run>-node-0` (and so its pods) and creates it again,
and counts in `status.restarts`. Attempt N (1-based) is restart N-1: the child
Job and its pods carry `jobset.sigs.k8s.io/restart-attempt: N-1`.

An attempt whose pods are gone is told from, in order:
1. its summary in the run's record, when a launcher process saw it end;
2. the Job controller's Warning event on the child Job, which outlives it (an hour
   on a default API server): "Container main for pod <ns>/<pod> failed with exit
   code 3 matching FailJob rule at index 1", or "Pod <ns>/<pod> has condition
   DisruptionTarget ..." for a preemption; the k-th such event is attempt k;
3. the JobSet controller's restart event on the JobSet ("applying RestartJobSet
   failure policy action", or ...AndIgnoreMaxRestarts for one that did not count);
4. otherwise: "restarted by the JobSet controller", no exit code.

The JobSet's own terminal state (`status.terminalState`, the Completed/Failed
conditions) ends the run; the only action left to the launcher is failing a run
whose container can never start (an image that does not pull), which Kubernetes
would leave Pending forever.
"""

from __future__ import annotations

import re

from launcher.backends.base import Attempt, RankState, Run, RunStatus, StatusEvent
from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.attempts import (
    Action,
    Observed,
    attempt_from_summary,
    attempt_of,
    attempt_view,
    labels,
    record_json,
    spec_of,
    summary_of,
    true_condition,
    ts,
)
from launcher.spec.retry import FATAL, JOBSET_NO_BACKOFF

JOB_FAILURE_REASONS = ("PodFailurePolicy", "BackoffLimitExceeded", "DeadlineExceeded")
EXIT_MESSAGE = re.compile(r"Container \S+ for pod [^/\s]+/(?P<pod>\S+) failed with exit code (?P<code>-?\d+)")
DISRUPTION_MESSAGE = re.compile(r"Pod [^/\s]+/(?P<pod>\S+) has condition DisruptionTarget")


def child_job_name(run: str) -> str:
    from launcher.backends.kubernetes.render import REPLICATED_JOB

    return f"{run}-{REPLICATED_JOB}-0"


def restarts_of(jobset: dict | None) -> int:
    return int(((jobset or {}).get("status") or {}).get("restarts") or 0)


def _rank_of_pod(run: str, pod: str) -> int | None:
    m = re.match(rf"^{re.escape(child_job_name(run))}-(\d+)-", pod)
    return int(m.group(1)) if m else None


def _when(event: dict) -> str:
    return (
        event.get("lastTimestamp")
        or event.get("eventTime")
        or event.get("firstTimestamp")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )


def job_failure_events(run: str, events: list[dict]) -> list[dict]:
    """The child Job's failure events, oldest first: one per failed attempt."""
    job = child_job_name(run)
    out = [
        e
        for e in events
        if (e.get("involvedObject") or {}).get("kind") == "Job"
        and (e.get("involvedObject") or {}).get("name") == job
        and e.get("reason") in JOB_FAILURE_REASONS
    ]
    return sorted(out, key=_when)


def restart_events(run: str, events: list[dict]) -> list[dict]:
    """The JobSet controller's restart events, oldest first: one per restart (it emits them
    whether or not the restart counts against maxRestarts)."""
    out = [
        e
        for e in events
        if (e.get("involvedObject") or {}).get("kind") == "JobSet"
        and (e.get("involvedObject") or {}).get("name") == run
        and str(e.get("reason", "")).startswith("Restart")
    ]
    return sorted(out, key=_when)


def attempt_from_restart_event(index: int, event: dict) -> Attempt:
    free = "IgnoreMaxRestarts" in (event.get("reason") or "")
    why = event.get("message") or event.get("reason")
    reason = f"restarted by the JobSet controller{' (not counted: a disruption)' if free else ''}: {why}"
    return Attempt(index=index, status=RunStatus.FAILED, ended_at=ts(_when(event) or None), reason=reason)


def attempt_from_event(index: int, run: str, nodes: int, event: dict) -> Attempt:
    message = event.get("message") or event.get("reason") or ""
    when = ts(_when(event) or None)
    ranks: list[RankState] = []
    disrupted = DISRUPTION_MESSAGE.search(message)
    m = EXIT_MESSAGE.search(message)
    if m:
        rank = _rank_of_pod(run, m.group("pod"))
        code = int(m.group("code"))
        reason = f"rank {rank} exited with code {code}"
        if rank is not None:
            ranks.append(RankState(rank, RunStatus.FAILED, code, reason))
    elif disrupted:
        rank = _rank_of_pod(run, disrupted.group("pod"))
        reason = f"rank {rank} was stopped by the cluster: DisruptionTarget"
        if rank is not None:
            ranks.append(RankState(rank, RunStatus.FAILED, None, reason))
    elif event.get("reason") == "DeadlineExceeded":
        reason = f"exceeded max_duration: {message}"
    else:
        reason = message
    have = {r.rank for r in ranks}
    ranks += [RankState(i, RunStatus.STOPPED, reason="stopped with the group") for i in range(nodes) if i not in have]
    ranks.sort(key=lambda r: r.rank)
    return Attempt(index=index, status=RunStatus.FAILED, ended_at=when, reason=reason, ranks=ranks)


def derive_jobset(obs: Observed) -> tuple[Run, Action | None]:
    """The run as a user sees it, and what the launcher must do (only: fail a run that cannot start)."""
    record, jobset = obs.record, obs.jobset
    spec = spec_of(record)
    nodes = int((spec.get("compute") or {}).get("nodes") or 1)
    finished = {s["index"]: s for s in record_json(record, keys.RECORD_ATTEMPTS, [])}
    final = record_json(record, keys.RECORD_FINAL, None)
    created = ts(((record or jobset or {}).get("metadata") or {}).get("creationTimestamp"))
    restarts = restarts_of(jobset)
    current = restarts + 1
    if jobset is None and final and finished:
        # Stopped (or ended by the launcher) and its JobSet gone: the record's summaries,
        # written as the run ended, say how many attempts there were.
        current = max(current, max(finished))

    attempts: list[Attempt] = []
    events: list[StatusEvent] = []
    failures = job_failure_events(obs.name, obs.events)
    restarted = restart_events(obs.name, obs.events)
    for index in range(1, current):
        pods = [p for p in obs.pods if attempt_of(p) == index]
        if index in finished:
            a, ev = attempt_from_summary(finished[index])
        elif pods and all((p.get("status") or {}).get("phase") in ("Failed", "Succeeded") for p in pods):
            job = next((j for j in obs.jobs if attempt_of(j) == index), None)
            a, _, ev = attempt_view(index, job, pods, obs.events, nodes)
            a.status = RunStatus.FAILED
        elif index <= len(failures):
            a = attempt_from_event(index, obs.name, nodes, failures[index - 1])
            if index <= len(restarted) and "IgnoreMaxRestarts" in (restarted[index - 1].get("reason") or ""):
                a.reason = f"{a.reason}; not counted against max_retries (a disruption)"
            ev = [StatusEvent(RunStatus.FAILED, a.ended_at, index, a.reason)] if a.ended_at else []
        elif index <= len(restarted):
            a = attempt_from_restart_event(index, restarted[index - 1])
            ev = [StatusEvent(RunStatus.FAILED, a.ended_at, index, a.reason)] if a.ended_at else []
        else:
            a = Attempt(index=index, status=RunStatus.FAILED, reason="restarted by the JobSet controller")
            ev = []
        attempts.append(a)
        events.extend(ev)

    action: Action | None = None
    reason: str | None = None
    exit_code: int | None = None
    job = next(
        (j for j in obs.jobs if attempt_of(j) == current and not (j.get("metadata") or {}).get("deletionTimestamp")),
        None,
    )
    pods = [p for p in obs.pods if attempt_of(p) == current]
    live, failure, live_events = attempt_view(current, job, pods, obs.events, nodes)
    completed = (
        true_condition(jobset, "Completed") or ((jobset or {}).get("status") or {}).get("terminalState") == "Completed"
    )
    failed = true_condition(jobset, "Failed") or ((jobset or {}).get("status") or {}).get("terminalState") == "Failed"

    if final:
        status, reason, exit_code = RunStatus(final["status"]), final.get("reason"), final.get("exit_code")
        if current in finished:
            a, ev = attempt_from_summary(finished[current])
            attempts.append(a)
            events.extend(ev)
        elif pods or job:
            attempts.append(live)
            events.extend(live_events)
    elif jobset is None:
        status, reason = RunStatus.UNKNOWN, f"its JobSet {obs.name} no longer exists"
    elif completed:
        live.status = RunStatus.COMPLETED
        attempts.append(live)
        events.extend(live_events)
        status, exit_code = RunStatus.COMPLETED, 0
        if not live.ended_at:
            live.ended_at = ts((completed or {}).get("lastTransitionTime") if isinstance(completed, dict) else None)
    elif failed:
        cond = failed if isinstance(failed, dict) else {}
        # The attempt that ended the run: live if its pods are still there, else from its Job's event.
        if pods or job:
            last = live
            last.status = RunStatus.FAILED
        elif len(failures) >= current:
            last = attempt_from_event(current, obs.name, nodes, failures[current - 1])
        else:
            last = Attempt(index=current, status=RunStatus.FAILED, reason=cond.get("message"))
        attempts.append(last)
        events.extend(live_events if last is live else [])
        status = RunStatus.FAILED
        why = cond.get("message") or "the JobSet failed"
        reason = f"{last.reason}; {why}" if last.reason and last.reason not in why else why
        failed_rank = next((r for r in last.ranks if r.status is RunStatus.FAILED and r.exit_code is not None), None)
        exit_code = failed_rank.exit_code if failed_rank else None
        last.ended_at = last.ended_at or ts(cond.get("lastTransitionTime"))
    elif (jobset.get("spec") or {}).get("suspend"):
        live.status = RunStatus.QUEUED
        queue = labels(jobset).get(keys.KUEUE_QUEUE)
        live.reason = f"waiting in queue {queue}" if queue else "the JobSet is suspended"
        attempts.append(live)
        status, reason = live.status, live.reason
    else:
        attempts.append(live)
        events.extend(live_events)
        status, reason = live.status, live.reason
        if job is None and restarts:
            status, reason = RunStatus.PENDING, f"restarting the group: attempt {current}"
        elif live.status is RunStatus.COMPLETED:
            exit_code = 0  # its Job completed before the JobSet controller marked the set
        elif live.status is RunStatus.FAILED:
            if failure == FATAL:
                action = Action("fail", summary=summary_of(live, failure, live_events), reason=reason)
            else:
                # The JobSet controller is about to restart or fail the set.
                status = RunStatus.TERMINATING
    started = [a.started_at for a in attempts if a.started_at]
    ended_at = attempts[-1].ended_at if attempts and status.is_terminal else None
    if final and final.get("at"):
        ended_at = ts(final["at"])
        events.append(StatusEvent(status, ended_at or created, current, reason))
    elif status.is_terminal and ended_at and not (events and events[-1].status is status):
        events.append(StatusEvent(status, ended_at, current, reason))
    if not events and created:
        events.append(StatusEvent(RunStatus.PENDING, created, 1))
    events.sort(key=lambda e: e.at)
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
        backoff=f"none: {JOBSET_NO_BACKOFF}",
    )
    return run, action
