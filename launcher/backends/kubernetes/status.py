"""A run's status: a pure function of what the API server says.

The JobSet controller restarts the group by itself, with no launcher watching:
it deletes the child Job `<run>-node-0` (and so its pods) and creates it again,
and counts in `status.restarts`. The child Job and its pods carry
`jobset.sigs.k8s.io/restart-attempt: R`; their attempt is the JobSet's first (1, or
N+1 for the JobSet a `run -r` created after attempt N: its `launcher.dev/attempt`
label) plus R. Attempts of earlier JobSets are the record's summaries.

An attempt whose pods are gone is told from, in order:
1. its summary in the run's record, when a launcher process saw it end;
2. the Job controller's Warning event on the child Job, which outlives it (an hour
   on a default API server): "Container main for pod <ns>/<pod> failed with exit
   code 3 matching FailJob rule at index 1", or "Pod <ns>/<pod> has condition
   DisruptionTarget ..." for a preemption; the k-th such event is attempt k;
3. the JobSet controller's restart event on the JobSet ("applying RestartJobSet
   failure policy action", or ...AndIgnoreMaxRestarts for one that did not count);
4. otherwise: "restarted by the JobSet controller", no exit code.
Events older than the JobSet belong to an earlier one of the same name and are not read.

The JobSet's own terminal state (`status.terminalState`, the Completed/Failed
conditions) ends the run. A run whose container can never start (an image that does
not pull) is FAILED here, though Kubernetes would leave its pods Pending forever:
`launcher stop` (or delete) removes its JobSet, and `Action` says what the stop records.
"""

from __future__ import annotations

import re
from typing import cast

from launcher.backends.base import Attempt, RankState, Run, RunStatus, StatusEvent, SubmittedSpec, utcnow
from launcher.backends.kubernetes import keys, kueue
from launcher.backends.kubernetes.attempts import (
    Action,
    Observed,
    annotations_of,
    attempt_from_summary,
    attempt_of,
    attempt_view,
    first_attempt,
    labels,
    node_fault,
    record_json,
    spec_of,
    summary_of,
    true_condition,
    ts,
)
from launcher.pod import contract, failures
from launcher.spec.retry import FATAL, JOBSET_NO_BACKOFF

# The record is created right after the JobSet; a submit's retries end well within this.
UNFINISHED_SUBMIT_SECONDS = 120.0

JOB_FAILURE_REASONS = ("PodFailurePolicy", "BackoffLimitExceeded", "DeadlineExceeded")
EXIT_CODE_MEANS = {
    contract.EXIT_HANG: "the entrypoint saw no progress for resilience.hang_timeout",
    contract.EXIT_HARDWARE: "the entrypoint found a hardware fault; the log has its evidence",
    contract.EXIT_COLLECTIVE: "the entrypoint found a collective's failure; the log has its evidence",
    contract.EXIT_STRAGGLER: "the rank stayed a straggler for resilience.straggler_grace, and rank 0 told it to end",
    contract.EXIT_STRAGGLER_PEER: (
        "rank 0 ended the attempt: a rank stayed a straggler for resilience.straggler_grace and did not end when told"
    ),
}
"""What an exit code of the entrypoint's own says, where the pod that told more is gone."""
EXIT_MESSAGE = re.compile(r"Container \S+ for pod [^/\s]+/(?P<pod>\S+) failed with exit code (?P<code>-?\d+)")
# In the scheduler's FailedScheduling message: nodes its required node affinity rules out.
NODE_AFFINITY_MISMATCH = "didn't match Pod's node affinity"
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


def _order(event: dict) -> tuple[str, int]:
    """Events oldest first: by their time, which has whole seconds, then, within a second, by
    their resourceVersion where it is a number (etcd's revision, which only grows)."""
    rv = str((event.get("metadata") or {}).get("resourceVersion") or "")
    return _when(event), int(rv) if rv.isdigit() else 0


def _since(events: list[dict], jobset: dict | None) -> list[dict]:
    """The events of this JobSet's life: not those of an earlier JobSet of the same name."""
    born = ts(((jobset or {}).get("metadata") or {}).get("creationTimestamp"))
    if born is None:
        return events
    return [e for e in events if (ts(_when(e) or None) or born) >= born]


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
    return sorted(out, key=_order)


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
    return sorted(out, key=_order)


def attempt_from_restart_event(index: int, event: dict) -> Attempt:
    free = "IgnoreMaxRestarts" in (event.get("reason") or "")
    why = event.get("message") or event.get("reason")
    reason = f"restarted by the JobSet controller{' (not counted: a system failure)' if free else ''}: {why}"
    return Attempt(index=index, status=RunStatus.FAILED, ended_at=ts(_when(event) or None), reason=reason)


def failed_pod_of_event(event: dict) -> str | None:
    """The pod a child Job's failure event names (its exit code or its disruption), if any."""
    message = event.get("message") or ""
    m = EXIT_MESSAGE.search(message) or DISRUPTION_MESSAGE.search(message)
    return m.group("pod") if m else None


def attempt_from_event(
    index: int,
    run: str,
    nodes: int,
    event: dict,
    scheduled: dict[str, str] | None = None,
    node_objects: dict[str, dict] | None = None,
) -> Attempt:
    """An attempt whose pods the JobSet's restart deleted, from its Job's failure event; the
    failed pod's node from its Scheduled event (`scheduled`, pod -> node: observe.scheduled_nodes)
    where the cluster still keeps it, and what that node says of a hardware fault."""
    message = event.get("message") or event.get("reason") or ""
    when = ts(_when(event) or None)
    ranks: list[RankState] = []
    disrupted = DISRUPTION_MESSAGE.search(message)
    m = EXIT_MESSAGE.search(message)
    node = (scheduled or {}).get(failed_pod_of_event(event) or "")
    if m:
        rank = _rank_of_pod(run, m.group("pod"))
        code = int(m.group("code"))
        reason = f"rank {rank} exited with code {code}"
        if rank is not None:
            ranks.append(RankState(rank, RunStatus.FAILED, code, reason, node))
    elif disrupted:
        rank = _rank_of_pod(run, disrupted.group("pod"))
        reason = f"rank {rank} was stopped by the cluster: DisruptionTarget"
        if rank is not None:
            ranks.append(RankState(rank, RunStatus.FAILED, None, reason, node))
    elif event.get("reason") == "DeadlineExceeded":
        reason = f"exceeded max_duration: {message}"
    else:
        reason = message
    have = {r.rank for r in ranks}
    ranks += [RankState(i, RunStatus.STOPPED, reason="stopped with the group") for i in range(nodes) if i not in have]
    ranks.sort(key=lambda r: r.rank)
    attempt = Attempt(index=index, status=RunStatus.FAILED, ended_at=when, reason=reason, ranks=ranks)
    if m and rank is not None:
        # The pod, and the termination message its entrypoint left, went with the restart:
        # the class that the exit code alone tells (the entrypoint's own codes: a hang).
        told = failures.classify(code, None, [])
        fault = node_fault((node_objects or {}).get(node or ""))
        if fault:  # the node's own word says more than an exit code
            attempt.failure_class, attempt.evidence = failures.HARDWARE, f"rank {rank}: {failures.bounded(fault)}"
        elif told.kind != failures.USER:
            attempt.failure_class = told.kind
            attempt.evidence = f"rank {rank}: {told.kind}: exit code {code} ({EXIT_CODE_MEANS.get(code, told.kind)})"
    return attempt


def gone_after_its_ttl(obs: Observed) -> bool:
    """A record whose JobSet had a TTL and is gone, with nothing recorded of how it ended: the
    cluster deleted it after it finished, and nothing of the run will change any more."""
    return (
        obs.record is not None
        and obs.jobset is None
        and bool(annotations_of(obs.record).get(keys.RECORD_TTL))
        and not record_json(obs.record, keys.RECORD_FINAL, None)
    )


def unfinished_submit(obs: Observed) -> bool:
    """A JobSet without its record, older than any submit still on its way: the submit failed
    part way and could not clean up (the cluster went away, the launcher was killed)."""
    if obs.record is not None or obs.jobset is None:
        return False
    created = ts(obs.jobset["metadata"].get("creationTimestamp"))
    return created is not None and (utcnow() - created).total_seconds() > UNFINISHED_SUBMIT_SECONDS


def derive(obs: Observed) -> tuple[Run, Action | None]:
    """The run as a user sees it, and what a stop must record beyond deleting the JobSet
    (Action "fail": a run whose container can never start)."""
    run, action = _derive(obs)
    kueue.apply(run, kueue.queue_state(obs.jobset, obs.kueue))
    if unfinished_submit(obs):
        # Its pods wait for a ConfigMap that will never come: without this it is STARTING forever.
        run.status = RunStatus.FAILED
        run.reason = f"its submit never finished (no record); `launcher delete {obs.name}` removes its JobSet"
    return run, action


def _derive(obs: Observed) -> tuple[Run, Action | None]:
    record, jobset = obs.record, obs.jobset
    spec = spec_of(record)
    nodes = int((spec.get("compute") or {}).get("nodes") or 1)
    factor = float((spec.get("resilience") or {}).get("straggler_factor") or 2.0)
    finished = {s["index"]: s for s in record_json(record, keys.RECORD_ATTEMPTS, [])}
    final = record_json(record, keys.RECORD_FINAL, None)
    created = ts(((record or jobset or {}).get("metadata") or {}).get("creationTimestamp"))
    # The API server stamps every object, and a run is observed by its record or its JobSet.
    assert created is not None, f"run {obs.name!r}: neither a record nor a JobSet with a creationTimestamp"
    restarts = restarts_of(jobset)
    first = first_attempt(jobset) if jobset is not None else 1
    current = first + restarts
    if jobset is None and final and finished:
        # Stopped (or ended by the launcher) and its JobSet gone: the record's summaries,
        # written as the run ended, say how many attempts there were.
        current = max(current, max(finished))

    attempts: list[Attempt] = []
    events: list[StatusEvent] = []
    own = _since(obs.events, jobset)
    failures = job_failure_events(obs.name, own)
    restarted = restart_events(obs.name, own)
    for index in range(1, current):
        pods = [p for p in obs.pods if attempt_of(p) == index]
        nth = index - first  # the how-manieth of this JobSet's ended attempts (0-based)
        if index in finished:
            a, ev = attempt_from_summary(finished[index])
        elif index < first:
            a = Attempt(index=index, status=RunStatus.FAILED, reason="an attempt of an earlier JobSet of the run")
            ev = []
        elif pods and all((p.get("status") or {}).get("phase") in ("Failed", "Succeeded") for p in pods):
            job = next((j for j in obs.jobs if attempt_of(j) == index), None)
            a, _, ev = attempt_view(index, job, pods, obs.events, nodes, obs.nodes, factor)
            a.status = RunStatus.FAILED
        elif nth < len(failures):
            a = attempt_from_event(index, obs.name, nodes, failures[nth], obs.scheduled, obs.nodes)
            if nth < len(restarted) and "IgnoreMaxRestarts" in (restarted[nth].get("reason") or ""):
                kind = "a disruption" if DISRUPTION_MESSAGE.search(failures[nth].get("message") or "") else None
                kind = kind or (f"a {a.failure_class} failure" if a.failure_class else "a system failure")
                a.reason = f"{a.reason}; not counted against max_retries ({kind})"
            ev = [StatusEvent(RunStatus.FAILED, a.ended_at, index, a.reason)] if a.ended_at else []
        elif nth < len(restarted):
            a = attempt_from_restart_event(index, restarted[nth])
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
    live, failure, live_events = attempt_view(current, job, pods, obs.events, nodes, obs.nodes, factor)
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
    elif gone_after_its_ttl(obs):
        status = RunStatus.UNKNOWN
        reason = (
            f"it finished, and the cluster deleted its JobSet {obs.name} "
            f"{annotations_of(record)[keys.RECORD_TTL]} s after (ttl_seconds_after_finished): "
            "how it ended is in its logs"
        )
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
        elif len(failures) > current - first:
            last = attempt_from_event(current, obs.name, nodes, failures[current - first], obs.scheduled, obs.nodes)
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
    excluded = record_json(record, keys.RECORD_EXCLUDED, [])
    if status is RunStatus.QUEUED and excluded and reason and NODE_AFFINITY_MISMATCH in reason:
        # The scheduler counts the nodes the run keeps off without naming them: say which.
        off = ", ".join(f"{e['node']} ({e['class']} in attempt {e['attempt']})" for e in excluded)
        reason = f"{reason}; it keeps off {off} (resilience.exclude_faulty_nodes)"
        if attempts and attempts[-1].status is RunStatus.QUEUED:
            attempts[-1].reason = reason
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
        spec=cast(SubmittedSpec, spec),  # the record's JSON, as RunSpec.to_submitted wrote it
        cluster=obs.cluster,
        started_at=min(started) if started else None,
        ended_at=ended_at,
        reason=reason,
        exit_code=exit_code,
        attempts=attempts,
        events=events,
        backoff=f"none: {JOBSET_NO_BACKOFF}",
        excluded_nodes=excluded,
    )
    return run, action
