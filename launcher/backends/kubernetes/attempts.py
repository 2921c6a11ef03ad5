"""An attempt of a run, from what the API server says: pure functions.

Inputs are plain API objects (dicts): the run's ConfigMap (its durable record), one
attempt's child Job, its pods and recent Warning events. status.py builds a run's
status from these.

Rules for one attempt, from its Job's conditions first and its pods second:
  Complete -> COMPLETED; Failed -> FAILED; FailureTarget -> TERMINATING; Suspended -> QUEUED.
  Pod Pending and unscheduled -> QUEUED, with the newest FailedScheduling message.
  Pod scheduled, container creating or pulling -> STARTING.
  ErrImagePull, ImagePullBackOff, CreateContainerConfigError, a missing secret volume -> FAILED, fast.
  No pod, and the Job's FailedCreate event says the namespace's Pod Security level refused
  them -> FAILED, fast; another refusal (a ResourceQuota) -> PENDING with its message.
How an attempt failed is one of launcher.spec.retry's failure classes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from launcher.backends.base import Attempt, RankState, RunStatus, StatusEvent
from launcher.backends.goodput import attempt_progress
from launcher.backends.kubernetes import keys
from launcher.pod import contract, failures, resumed, stragglers
from launcher.spec.retry import DEADLINE, FATAL, SYSTEM, USER

# Waiting reasons that never fix themselves: fail the run instead of waiting forever.
FATAL_WAITING = {
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "ErrImageNeverPull",
}
# Pod-level reasons that mean the cluster, not the user's program, ended the pod.
SYSTEM_POD_REASONS = {
    "Evicted",
    "Preempting",
    "NodeLost",
    "Shutdown",
    "NodeShutdown",
    "Terminated",
    "UnexpectedAdmissionError",
    "DeletionByTaintManager",
}

NEVER = datetime.max.replace(tzinfo=UTC)
# In the API server's refusal of a pod that breaks the namespace's Pod Security level:
# 'pods "x" is forbidden: violates PodSecurity "restricted:latest": ...'.
POD_SECURITY = "violates PodSecurity"


def ts(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def annotations_of(obj: dict | None) -> dict[str, str]:
    return ((obj or {}).get("metadata") or {}).get("annotations") or {}


def labels(obj: dict | None) -> dict[str, str]:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


def first_attempt(obj: dict | None) -> int:
    """The first attempt of the JobSet an object belongs to: 1, or N+1 for a JobSet a restart
    (`run -r`) created after attempt N (the launcher.dev/attempt label it renders)."""
    try:
        return max(1, int(labels(obj).get(keys.ATTEMPT) or 1))
    except ValueError:
        return 1


def attempt_of(obj: dict | None) -> int:
    """The attempt a child Job or pod belongs to: its JobSet's first attempt plus the JobSet
    controller's restart count (the restart-attempt label, 0-based)."""
    try:
        restarts = int(labels(obj).get(keys.JOBSET_RESTART) or 0)
    except ValueError:
        restarts = 0
    return first_attempt(obj) + restarts


def conditions(obj: dict | None) -> dict[str, dict]:
    out = {}
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        out[c["type"]] = c
    return out


def true_condition(obj: dict | None, kind: str) -> dict | None:
    c = conditions(obj).get(kind)
    return c if c and c.get("status") == "True" else None


def record_json(record: dict | None, key: str, default: Any) -> Any:
    raw = annotations_of(record).get(key)
    if not raw:
        return default
    try:
        return json.loads(raw)
    except ValueError:
        return default


def pod_rank(pod: dict) -> int:
    meta = pod.get("metadata") or {}
    value = (meta.get("annotations") or {}).get(keys.COMPLETION_INDEX) or (meta.get("labels") or {}).get(
        keys.COMPLETION_INDEX, "0"
    )
    return int(value)


@dataclass
class Observed:
    """Everything the API server told us about one run."""

    name: str
    record: dict | None = None
    jobset: dict | None = None
    jobs: list[dict] = field(default_factory=list)
    """The JobSet's child Jobs (one per attempt whose Job is not yet deleted)."""
    pods: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    cluster: str | None = None
    kueue: Any = None
    """kueue.KueueView: what Kueue said of the namespace's Workloads (None: not asked)."""
    nodes: dict[str, dict] = field(default_factory=dict)
    """The nodes its failed pods ran on, by name (observe.failed_pod_nodes; none where the
    user may not read nodes): a condition or taint there can say the hardware failed."""
    scheduled: dict[str, str] = field(default_factory=dict)
    """The node each failed pod that a restart deleted ran on, by pod name, from its Scheduled
    event while the cluster keeps it (observe.scheduled_nodes)."""


@dataclass
class Action:
    """What a stop must do beyond the JobSet controller (`fail`: a run whose container can
    never start, which Kubernetes would leave Pending forever): its summary and reason."""

    kind: str
    summary: dict[str, Any] | None = None
    reason: str | None = None


@dataclass
class RankView(RankState):
    """A rank as its pod tells it: the contract's RankState, and what the attempt's
    status is derived from (how it failed, when it was scheduled, started, finished)."""

    failure: str | None = None
    finished_at: datetime | None = None
    started_at: datetime | None = None
    scheduled_at: datetime | None = None
    pod: str = ""
    cause: str | None = None
    """What the pod says of why it failed, for launcher.pod.failures: its termination message
    (the entrypoint leaves `CLASS: evidence` there), OOMKilled, a disruption's message."""
    progress: dict | None = None
    """The step time its entrypoint left in the termination message (launcher.pod.stragglers)."""
    resumed: dict | None = None
    """The checkpoint its entrypoint resumed from ({"path", "step"}), as it left it in the
    termination message (launcher.pod.resumed)."""
    named: list[str] = field(default_factory=list)
    """The stragglers its entrypoint named while the ranks ran (rank 0's: launcher.entrypoint.progress)."""

    def state(self) -> RankState:
        return RankState(self.rank, self.status, self.exit_code, self.reason, self.node)


def newest_event(events: list[dict], pod_name: str, reason: str) -> dict | None:
    best = None
    for e in events:
        if e.get("reason") != reason or (e.get("involvedObject") or {}).get("name") != pod_name:
            continue
        when = e.get("lastTimestamp") or e.get("eventTime") or (e.get("metadata") or {}).get("creationTimestamp") or ""
        if best is None or when >= best[0]:
            best = (when, e)
    return best[1] if best else None


def refused_pods(job: dict | None, events: list[dict]) -> str | None:
    """The API server's refusal of the Job's pods (its controller's newest FailedCreate
    event, "Error creating: pods ... is forbidden: ..."); None when it created them."""
    if job is None:
        return None
    uid = (job.get("metadata") or {}).get("uid")
    best = None
    for e in events:
        involved = e.get("involvedObject") or {}
        if e.get("reason") != "FailedCreate" or involved.get("kind") != "Job" or involved.get("uid") != uid:
            continue
        when = e.get("lastTimestamp") or e.get("eventTime") or (e.get("metadata") or {}).get("creationTimestamp") or ""
        if best is None or when >= best[0]:
            best = (when, e.get("message") or "")
    return best[1].removeprefix("Error creating: ") if best else None


def _container(pod: dict) -> dict:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    for s in statuses:
        if s.get("name") == keys.CONTAINER:
            return s
    return statuses[0] if statuses else {}


def _init_failure(pod: dict) -> str | None:
    """Why an init container (inject mode's runtime copy) keeps the main container from
    ever starting: a waiting reason that never fixes itself, or a non-zero exit."""
    for c in (pod.get("status") or {}).get("initContainerStatuses") or []:
        state = c.get("state") or {}
        waiting, terminated = state.get("waiting") or {}, state.get("terminated") or {}
        if waiting.get("reason") in FATAL_WAITING:
            msg = waiting.get("message") or ""
            return f"init container {c.get('name')}: {waiting['reason']}" + (f": {msg}" if msg else "")
        if terminated and terminated.get("exitCode"):
            msg = (terminated.get("message") or "").strip()
            return (
                f"init container {c.get('name')} (image {c.get('image', '?')}) exited with code "
                f"{terminated['exitCode']}" + (f": {msg}" if msg else "")
            )
    return None


def rank_view(pod: dict, events: list[dict]) -> RankView:
    rank = pod_rank(pod)
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    node = spec.get("nodeName")
    phase = status.get("phase", "Pending")
    cstat = _container(pod)
    state = cstat.get("state") or {}
    conds = conditions(pod)
    scheduled = conds.get("PodScheduled", {})
    scheduled_at = ts(scheduled.get("lastTransitionTime")) if scheduled.get("status") == "True" else None
    running = state.get("running")
    terminated = state.get("terminated")
    started_at = ts((running or terminated or {}).get("startedAt"))
    disrupted = true_condition(pod, "DisruptionTarget")
    pod_reason = status.get("reason")
    deleting = bool((pod.get("metadata") or {}).get("deletionTimestamp"))

    # The container's termination message: the entrypoint leaves a failed rank's class and every
    # rank's step time there; a setup failure (inject mode: an image without bash) its reason.
    # A retried attempt's rank leaves there the checkpoint it resumed from, too.
    message, resumed_from = resumed.from_termination_message((terminated or {}).get("message"))
    told, progress, named = stragglers.from_termination_message(message)

    def view(st: RunStatus, **kw: Any) -> RankView:
        return RankView(
            rank,
            st,
            node=node,
            started_at=started_at,
            scheduled_at=scheduled_at,
            pod=(pod.get("metadata") or {}).get("name", ""),
            progress=progress,
            resumed=resumed_from,
            named=named,
            **kw,
        )

    init = None if (running or terminated) else _init_failure(pod)
    if init:
        return view(RunStatus.FAILED, failure=FATAL, reason=f"rank {rank}: {init}")

    if phase in ("Failed", "Succeeded") or terminated:
        code = (terminated or {}).get("exitCode")
        finished = ts((terminated or {}).get("finishedAt"))
        if phase == "Succeeded" or (terminated and code == 0 and not disrupted):
            return view(RunStatus.COMPLETED, exit_code=0, finished_at=finished)
        if deleting and not disrupted:
            # Killed while being deleted: the Job controller ending the group, or a stop.
            return view(RunStatus.STOPPED, exit_code=code, finished_at=finished, reason="stopped with the group")
        if disrupted or pod_reason in SYSTEM_POD_REASONS:
            why = (disrupted or {}).get("message") or status.get("message") or pod_reason or "disrupted"
            return view(
                RunStatus.FAILED,
                exit_code=code,
                failure=SYSTEM,
                finished_at=finished,
                reason=f"rank {rank} was stopped by the cluster: {why}",
                cause=" ".join(filter(None, [(disrupted or {}).get("reason"), pod_reason, why])),
            )
        if pod_reason == "DeadlineExceeded":
            return view(
                RunStatus.FAILED,
                exit_code=code,
                failure=DEADLINE,
                finished_at=finished,
                reason=f"rank {rank}: {status.get('message') or 'deadline exceeded'}",
            )
        if code is None:
            return view(
                RunStatus.FAILED,
                failure=USER,
                finished_at=finished,
                reason=f"rank {rank} failed: {status.get('message') or pod_reason or 'unknown reason'}",
            )
        extra = " (out of memory)" if (terminated or {}).get("reason") == "OOMKilled" else ""
        told = [t for t in (line.strip() for line in told) if t]
        if told:
            extra += f": {told[0]}"
        oom = "OOMKilled" if (terminated or {}).get("reason") == "OOMKilled" else None
        return view(
            RunStatus.FAILED,
            exit_code=code,
            failure=USER,
            finished_at=finished,
            reason=f"rank {rank} exited with code {code}{extra}",
            cause=oom or (told[0] if told else None),
        )
    if deleting:
        return view(RunStatus.TERMINATING)
    if running:
        return view(RunStatus.RUNNING)
    waiting = state.get("waiting") or {}
    if waiting.get("reason") in FATAL_WAITING:
        msg = waiting.get("message") or ""
        return view(
            RunStatus.FAILED, failure=FATAL, reason=f"rank {rank}: {waiting['reason']}" + (f": {msg}" if msg else "")
        )
    if not node and scheduled.get("status") != "True":
        ev = newest_event(events, pod["metadata"]["name"], "FailedScheduling")
        why = (ev or {}).get("message") or scheduled.get("message")
        return view(RunStatus.QUEUED, reason=f"rank {rank} is waiting for a node: {why}" if why else None)
    mount = newest_event(events, pod["metadata"]["name"], "FailedMount")
    # A missing secret of the user's is fatal; the run's own code Secret is created right after its pods' owner.
    # The kubelet words it `: secret "NAME" not found`: "secret" elsewhere (a run named uses-secret) is not it.
    ours = f'"{keys.code_object_name(labels(pod).get(keys.RUN, ""))}"'
    if (
        mount
        and ': secret "' in (mount.get("message") or "")
        and "not found" in mount.get("message", "")
        and ours not in mount["message"]
    ):
        return view(RunStatus.FAILED, failure=FATAL, reason=f"rank {rank}: {mount['message']}")
    why = waiting.get("reason")
    return view(RunStatus.STARTING, reason=f"rank {rank}: {why}" if why and why != "ContainerCreating" else None)


def _first_failure(ranks: list[RankView]) -> RankView | None:
    failed = [r for r in ranks if r.status is RunStatus.FAILED]
    if not failed:
        return None
    # A rank the cluster disrupted explains the attempt even if others died of it later.
    system = [r for r in failed if r.failure == SYSTEM]
    pool = system or failed
    return min(pool, key=lambda r: (r.finished_at or NEVER, r.rank))


def _job_failure_kind(job: dict | None, ranks: list[RankView]) -> str:
    failed = true_condition(job, "Failed") or true_condition(job, "FailureTarget") or {}
    if failed.get("reason") == "DeadlineExceeded":
        return DEADLINE
    if "DisruptionTarget" in (failed.get("message") or ""):
        return SYSTEM
    first = _first_failure(ranks)
    return first.failure if first and first.failure else USER


def _events(
    job: dict | None,
    ranks: list[RankView],
    status: RunStatus,
    index: int,
    ended_at: datetime | None,
    reason: str | None,
) -> list[StatusEvent]:
    out: list[StatusEvent] = []
    created = ts(((job or {}).get("metadata") or {}).get("creationTimestamp"))
    if created:
        out.append(StatusEvent(RunStatus.PENDING, created, index))
    scheduled = [r.scheduled_at for r in ranks if r.scheduled_at]
    if scheduled:
        out.append(StatusEvent(RunStatus.STARTING, min(scheduled), index))
    started = [r.started_at for r in ranks if r.started_at]
    if started and len(started) == len(ranks):
        out.append(StatusEvent(RunStatus.RUNNING, max(started), index))
    target = true_condition(job, "FailureTarget")
    targeted_at = ts(target.get("lastTransitionTime")) if target else None
    if targeted_at:
        out.append(StatusEvent(RunStatus.TERMINATING, targeted_at, index))
    if status.is_terminal and ended_at:
        out.append(StatusEvent(status, ended_at, index, reason))
    elif out and out[-1].status is not status:
        out.append(StatusEvent(status, out[-1].at, index, reason))
    out.sort(key=lambda e: e.at)
    return out


def attempt_view(
    index: int,
    job: dict | None,
    pods: list[dict],
    events: list[dict],
    nodes: int,
    node_objects: dict[str, dict] | None = None,
    straggler_factor: float = 2.0,
) -> tuple[Attempt, str | None, list[StatusEvent]]:
    """The live attempt: status, ranks, why it failed (user, system, fatal, deadline), and its
    stragglers among the ranks whose pods ended and left their step time."""
    ranks = sorted((rank_view(p, events) for p in pods), key=lambda r: r.rank)
    started = [r.started_at for r in ranks if r.started_at]
    started_at = min(started) if started else None
    ended_at = None
    failure = None
    reason = None
    complete = true_condition(job, "Complete")
    failed = true_condition(job, "Failed")
    if complete:
        status = RunStatus.COMPLETED
        ended_at = ts(complete.get("lastTransitionTime"))
    elif failed:
        status = RunStatus.FAILED
        ended_at = ts(failed.get("lastTransitionTime"))
        failure = _job_failure_kind(job, ranks)
        named = [r for r in ranks if r.pod and f"/{r.pod} " in (failed.get("message") or "")]
        first = named[0] if named and named[0].status is RunStatus.FAILED else _first_failure(ranks)
        if failure == DEADLINE:
            reason = f"exceeded max_duration: {failed.get('message') or 'deadline exceeded'}"
        else:
            reason = first.reason if first else (failed.get("message") or failed.get("reason"))
    elif target := true_condition(job, "FailureTarget"):
        status = RunStatus.TERMINATING
        first = _first_failure(ranks)
        reason = first.reason if first else target.get("message")
    elif true_condition(job, "Suspended") or (job and (job.get("spec") or {}).get("suspend")):
        status = RunStatus.QUEUED
        susp = true_condition(job, "Suspended") or {}
        queue = labels(job).get(keys.KUEUE_QUEUE)
        reason = susp.get("message") or (f"waiting in queue {queue}" if queue else "the Job is suspended")
    else:
        fatal = [r for r in ranks if r.failure == FATAL]
        refused = refused_pods(job, events) if len(ranks) < nodes else None
        if fatal:
            status, failure, reason = RunStatus.FAILED, FATAL, fatal[0].reason
        elif refused and POD_SECURITY in refused:
            # Never fixes itself: the namespace's level or the profile must change.
            status, failure = RunStatus.FAILED, FATAL
            reason = f"the cluster refused the run's pods: {refused}"
            if f'{POD_SECURITY} "restricted' in refused:
                reason += " (a profile with pod_security: restricted renders pods this namespace admits)"
        elif refused and not ranks:
            status, reason = RunStatus.PENDING, f"the cluster does not create the run's pods: {refused}"
        elif (first := _first_failure(ranks)) is not None:  # a rank failed
            # The Job controller has not caught up yet; the group is going down.
            status, reason = RunStatus.TERMINATING, first.reason
        elif not ranks:
            status = RunStatus.PENDING
        elif any(r.status is RunStatus.QUEUED for r in ranks):
            status = RunStatus.QUEUED
            reason = next((r.reason for r in ranks if r.status is RunStatus.QUEUED and r.reason), None)
        elif any(r.status is RunStatus.TERMINATING for r in ranks):
            status = RunStatus.TERMINATING
        elif len(ranks) < nodes or any(r.status is RunStatus.STARTING for r in ranks):
            status = RunStatus.STARTING
            reason = next((r.reason for r in ranks if r.status is RunStatus.STARTING and r.reason), None)
        else:
            status = RunStatus.RUNNING
    states = [r.state() for r in ranks]
    if status in (RunStatus.FAILED, RunStatus.TERMINATING):
        # The Job controller deletes the other ranks' pods when one fails: say so.
        have = {r.rank for r in ranks}
        states += [
            RankState(i, RunStatus.STOPPED, reason="stopped with the group") for i in range(nodes) if i not in have
        ]
        states.sort(key=lambda r: r.rank)
    attempt = Attempt(index=index, status=status, started_at=started_at, ended_at=ended_at, reason=reason, ranks=states)
    if status is RunStatus.FAILED and failure not in (FATAL, DEADLINE):
        found = _failure_class(ranks, node_objects)
        if found is not None:
            attempt.failure_class, attempt.evidence = found
    # What the ranks' termination messages say, where their pods are still there to read
    # (a JobSet restart deletes an attempt's pods: then nothing is said rather than guessed).
    for field_name, value in attempt_progress({**(r.progress or {}), "resumed": r.resumed} for r in ranks).items():
        setattr(attempt, field_name, value)
    # Those rank 0 named while the ranks ran, then, for any other rank, the comparison of the
    # step times the ranks left as they ended: each straggler once.
    live = {n[0]: line for r in ranks for line in r.named if (n := stragglers.named_in(line)) is not None}
    times = {r.rank: t for r in ranks if (t := stragglers.timed(r.progress)) is not None}
    node_of = {r.rank: r.node for r in ranks}
    attempt.stragglers = list(live.values()) + [
        stragglers.line(s, node_of.get(s.rank), straggler_factor)
        for s in stragglers.stragglers(times, straggler_factor)
        if s.rank not in live
    ]
    return attempt, failure, _events(job, ranks, status, index, ended_at, reason)


# Node conditions every node has: none of them says the hardware failed.
_STOCK_CONDITIONS = {"Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"}


def node_fault(node: dict | None) -> str | None:
    """What a node says of a hardware fault, if anything: a condition that is True (a GPU
    operator's or node-problem-detector's, e.g. GpuXid/XidError) or a taint whose words
    launcher.pod.failures reads as hardware (Xid, ECC, gpu-unhealthy)."""
    if not node:
        return None
    name = (node.get("metadata") or {}).get("name", "?")
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") in _STOCK_CONDITIONS or c.get("status") != "True":
            continue
        text = " ".join(filter(None, [c.get("type"), c.get("reason")])) + (
            f": {c['message']}" if c.get("message") else ""
        )
        if failures.classify(None, text, []).kind == failures.HARDWARE:
            return f"node {name}: {text}"
    for t in (node.get("spec") or {}).get("taints") or []:
        text = "=".join(filter(None, [t.get("key"), t.get("value")])) + f":{t.get('effect', '')}"
        if failures.classify(None, text, []).kind == failures.HARDWARE:
            return f"node {name}: taint {text}"
    return None


def _failure_class(ranks: list[RankView], nodes: dict[str, dict] | None = None) -> tuple[str, str] | None:
    """How the attempt failed (launcher.pod.failures), from what its failed pods say: the
    entrypoint's termination message, OOMKilled, a disruption, and the node a rank ran on
    where it says its hardware failed (`nodes`). The pods' logs are not read (a status is a
    cheap read), so a class shows only where the pod or its node tells it."""
    found = []
    for r in ranks:
        if r.status is not RunStatus.FAILED or r.failure in (FATAL, DEADLINE):
            continue
        f = failures.classify(r.exit_code, r.cause, [])
        if r.failure == SYSTEM and f.kind == failures.USER:
            f = failures.Failure(failures.PREEMPTED, f.evidence)  # the cluster ended it
        told = node_fault((nodes or {}).get(r.node or ""))
        if told and f.kind != failures.HARDWARE:
            # The node's own word outranks what the program made of a device that vanished.
            f = failures.Failure(failures.HARDWARE, failures.bounded(told))
        found.append(failures.Failure(f.kind, f"rank {r.rank}: {f.evidence or r.reason}"))
    best = failures.most_telling(found)
    return (best.kind, best.evidence or "") if best else None


EXCLUDED_CLASSES = (failures.HARDWARE, failures.COLLECTIVE)
"""The failure classes whose node the next attempt leaves out (resilience.exclude_faulty_nodes)."""
_EVIDENCE_RANK = re.compile(r"^rank (\d+): ")


def fault_node_of(attempt: Attempt) -> str | None:
    """The node a hardware or collective failure is pinned to: the node of the rank its
    evidence names (`rank N: ...`, as _failure_class writes it), where the record knows it.
    A collective failure only where that rank alone failed: when a collective times out,
    every rank fails alike, and the one named says nothing of whose node was bad. A
    straggler's: the node of the straggler its evidence names (`rank N: hardware: straggler:
    rank N on NODE: ...`); where only the exit code is left, a straggler that ended itself when
    rank 0 told it (contract.EXIT_STRAGGLER) is on its own node, whereas for rank 0's own end
    (contract.EXIT_STRAGGLER_PEER) the failed pod is rank 0's: none."""
    if attempt.failure_class not in EXCLUDED_CLASSES:
        return None
    failed = [r for r in attempt.ranks if r.status is RunStatus.FAILED]
    if attempt.failure_class == failures.COLLECTIVE and len(failed) != 1:
        return None
    m = _EVIDENCE_RANK.match(attempt.evidence or "")
    rank = next((r for r in attempt.ranks if m and r.rank == int(m.group(1))), None)
    straggler = stragglers.named_in(attempt.evidence)
    if straggler is not None:
        slow = next((r for r in attempt.ranks if r.rank == straggler[0]), None)
        return (slow.node if slow else None) or straggler[1]
    if rank is not None and rank.exit_code == contract.EXIT_STRAGGLER_PEER:
        return None  # the straggler is not named: never rank 0's own node
    return rank.node if rank else None


def excluded_nodes(attempts: list[Attempt]) -> list[dict[str, Any]]:
    """The nodes the run's failed attempts pin a hardware or collective failure to, each
    once (its first failure): [{node, class, evidence, attempt}], oldest first."""
    out: dict[str, dict[str, Any]] = {}
    for a in sorted(attempts, key=lambda a: a.index):
        node = fault_node_of(a)
        if node and node not in out:
            out[node] = {"node": node, "class": a.failure_class, "evidence": a.evidence, "attempt": a.index}
    return list(out.values())


def summary_of(attempt: Attempt, failure: str | None, events: list[StatusEvent]) -> dict[str, Any]:
    """A finished attempt as JSON for the record (its pods may be gone later)."""
    iso = lambda d: d.isoformat() if d else None  # noqa: E731
    return {
        "index": attempt.index,
        "status": attempt.status.value,
        "reason": attempt.reason,
        "failure": failure,
        "failure_class": attempt.failure_class,
        "evidence": attempt.evidence,
        "started_at": iso(attempt.started_at),
        "ended_at": iso(attempt.ended_at),
        "ranks": [
            {"rank": r.rank, "status": r.status.value, "exit_code": r.exit_code, "reason": r.reason, "node": r.node}
            for r in attempt.ranks
        ],
        "stragglers": list(attempt.stragglers),
        "last_step": attempt.last_step,
        "progress_age": attempt.progress_age,
        "setup_seconds": attempt.setup_seconds,
        "resumed_from": attempt.resumed_from,
        "resumed_step": attempt.resumed_step,
        "events": [{"status": e.status.value, "at": iso(e.at), "reason": e.reason} for e in events],
    }


def attempt_from_summary(s: dict[str, Any]) -> tuple[Attempt, list[StatusEvent]]:
    attempt = Attempt(
        index=s["index"],
        status=RunStatus(s["status"]),
        started_at=ts(s.get("started_at")),
        ended_at=ts(s.get("ended_at")),
        reason=s.get("reason"),
        ranks=[
            RankState(r["rank"], RunStatus(r["status"]), r.get("exit_code"), r.get("reason"), r.get("node"))
            for r in s.get("ranks", [])
        ],
        failure_class=s.get("failure_class"),
        evidence=s.get("evidence"),
        stragglers=list(s.get("stragglers") or []),
        last_step=s.get("last_step"),
        progress_age=s.get("progress_age"),
        setup_seconds=s.get("setup_seconds"),
        resumed_from=s.get("resumed_from"),
        resumed_step=s.get("resumed_step"),
    )
    events = [
        StatusEvent(RunStatus(e["status"]), at, s["index"], e.get("reason"))
        for e in s.get("events", [])
        if (at := ts(e.get("at"))) is not None
    ]
    return attempt, events


def spec_of(record: dict | None) -> dict[str, Any]:
    raw = ((record or {}).get("data") or {}).get(keys.SPEC_FILE)
    try:
        return json.loads(raw) if raw else {}
    except ValueError:
        return {}
