"""Status rules on API objects as the server returns them (pure: no server needed): one
attempt's child Job and pods under a JobSet, and the retry policy every backend reads."""

from __future__ import annotations

import json

from launcher.backends.base import RunStatus
from launcher.backends.kubernetes.attempts import Observed
from launcher.backends.kubernetes.status import derive

T0, T1 = "2025-01-01T00:00:00Z", "2025-01-01T00:00:05Z"


def job(conditions=(), attempt=1, nodes=2, **spec):
    """The JobSet's child Job of attempt `attempt` (its restart count attempt - 1)."""
    return {
        "metadata": {
            "name": "r-node-0",
            "uid": "u1",
            "creationTimestamp": T0,
            "labels": {"launcher.dev/run": "r", "jobset.sigs.k8s.io/restart-attempt": str(attempt - 1)},
        },
        "spec": {"completions": nodes, **spec},
        "status": {
            "conditions": [
                {"type": t, "status": "True", "reason": r, "message": m, "lastTransitionTime": T1}
                for t, r, m in conditions
            ]
        },
    }


def pod(rank, *, phase="Running", state=None, deleting=False, scheduled=True, conditions=(), attempt=1):
    meta = {
        "name": f"r-{rank}-abcde",
        "annotations": {"batch.kubernetes.io/job-completion-index": str(rank)},
        "labels": {"jobset.sigs.k8s.io/restart-attempt": str(attempt - 1)},
    }
    if deleting:
        meta["deletionTimestamp"] = T1
    conds = [{"type": "PodScheduled", "status": "True" if scheduled else "False", "lastTransitionTime": T0}]
    conds += [{"type": t, "status": "True", "message": m} for t, m in conditions]
    status = {"phase": phase, "conditions": conds}
    if state is not None:
        status["containerStatuses"] = [{"name": "main", "state": state}]
    return {"metadata": meta, "spec": {"nodeName": "n1"} if scheduled else {}, "status": status}


def record(spec=None, attempts=None):
    ann = {}
    if attempts is not None:
        ann["launcher.dev/attempts"] = json.dumps(attempts)
    return {
        "metadata": {"name": "r", "creationTimestamp": T0, "annotations": ann, "resourceVersion": "1"},
        "data": {"spec.json": json.dumps(spec or {"name": "r", "command": "x"})},
    }


def observed(j, pods, *, terminal=None, events=()):
    """The run of JobSet r with child Job j (and the JobSet's terminal state, if any)."""
    status = {"restarts": 0, **({"terminalState": terminal} if terminal else {})}
    jobset = {"metadata": {"name": "r", "uid": "js", "creationTimestamp": T0}, "spec": {}, "status": status}
    spec = {"name": "r", "command": "x", "compute": {"nodes": j["spec"]["completions"]}}
    return Observed("r", record=record(spec), jobset=jobset, jobs=[j], pods=pods, events=list(events))


def terminated(code, finished=T1):
    return {"terminated": {"exitCode": code, "startedAt": T0, "finishedAt": finished}}


def test_the_failed_rank_named_by_the_job_wins_a_timestamp_tie():
    j = job(
        [
            (
                "Failed",
                "PodFailurePolicy",
                "Container main for pod default/r-1-abcde failed with exit code 3 matching FailJob rule at index 1",
            )
        ]
    )
    pods = [pod(0, phase="Failed", state=terminated(143), deleting=True), pod(1, phase="Failed", state=terminated(3))]
    run, action = derive(observed(j, pods, terminal="Failed"))
    assert run.status is RunStatus.FAILED and run.reason.startswith("rank 1 exited with code 3") and run.exit_code == 3
    assert [(r.rank, r.status) for r in run.attempts[0].ranks] == [(0, RunStatus.STOPPED), (1, RunStatus.FAILED)]
    assert action is None  # max_retries 0


def test_missing_ranks_of_a_failed_attempt_are_reported_stopped():
    j = job([("Failed", "PodFailurePolicy", "x")], nodes=3)
    run, _ = derive(observed(j, [pod(2, phase="Failed", state=terminated(1))], terminal="Failed"))
    assert [(r.rank, r.status) for r in run.attempts[0].ranks] == [
        (0, RunStatus.STOPPED),
        (1, RunStatus.STOPPED),
        (2, RunStatus.FAILED),
    ]


def test_conditions_and_pod_states():
    cases = [
        (
            job([("FailureTarget", "PodFailurePolicy", "m")]),
            [pod(0, state={"running": {"startedAt": T0}})],
            RunStatus.TERMINATING,
        ),
        (job([("Suspended", "JobSuspended", "waiting for quota")]), [], RunStatus.QUEUED),
        (job(), [], RunStatus.PENDING),
        (job(), [pod(0, phase="Pending", scheduled=False)], RunStatus.QUEUED),
        (job(), [pod(0, phase="Pending", state={"waiting": {"reason": "ContainerCreating"}})], RunStatus.STARTING),
        (job(nodes=1), [pod(0, state={"running": {"startedAt": T0}})], RunStatus.RUNNING),
        (job(nodes=2), [pod(0, state={"running": {"startedAt": T0}})], RunStatus.STARTING),
        (
            job([("Complete", "CompletionsReached", "")], nodes=1),
            [pod(0, phase="Succeeded", state=terminated(0))],
            RunStatus.COMPLETED,
        ),
    ]
    for j, pods, want in cases:
        run, _ = derive(observed(j, pods))
        assert run.status is want, (want, run.status, run.reason)


def test_fatal_waiting_reason_fails_at_once_and_asks_to_end_the_run():
    p = pod(0, phase="Pending", state={"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}})
    run, action = derive(observed(job(nodes=1), [p]))
    assert run.status is RunStatus.FAILED and run.reason == "rank 0: ImagePullBackOff: Back-off pulling image"
    assert action.kind == "fail"


def test_queued_reason_is_the_newest_failed_scheduling_event():
    events = [
        {"reason": "FailedScheduling", "involvedObject": {"name": "r-0-abcde"}, "lastTimestamp": ts, "message": m}
        for ts, m in ((T0, "old"), (T1, "0/12 nodes are available: 12 Insufficient nvidia.com/gpu."))
    ]
    run, _ = derive(observed(job(nodes=1), [pod(0, phase="Pending", scheduled=False)], events=events))
    assert run.reason == "rank 0 is waiting for a node: 0/12 nodes are available: 12 Insufficient nvidia.com/gpu."


def test_retry_policy_is_the_same_from_a_spec_or_its_record_and_caps_free_retries():
    from launcher.spec.models import RunSpec
    from launcher.spec.retry import MAX_SYSTEM_RETRIES, RetryPolicy

    scheduling = {"max_retries": 1, "retry_on_system_failure": True}
    spec = RunSpec.model_validate({"name": "r", "command": "x", "scheduling": scheduling})
    policy = RetryPolicy.from_spec(spec)
    assert policy == RetryPolicy.from_spec(spec.to_submitted()) == RetryPolicy(1, True)
    assert policy.allows(["system"] * (MAX_SYSTEM_RETRIES - 1), "system")
    assert not policy.allows(["system"] * MAX_SYSTEM_RETRIES, "system")  # a broken node pool ends
    assert policy.allows(["system"] * MAX_SYSTEM_RETRIES, "user")  # and user failures still have theirs
    assert not RetryPolicy().allows([], "user") and not RetryPolicy(5).allows([], "stopped")
    assert not RetryPolicy(1).allows([], "fatal") and not RetryPolicy(1).allows([], "deadline")


def test_the_retry_backoff_doubles_up_to_its_max():
    from launcher.spec.retry import RetryPolicy

    spec = {"name": "r", "command": "x", "scheduling": {"max_retries": 3, "retry_backoff": {"first": 10, "max": 30}}}
    policy = RetryPolicy.from_spec(spec)
    assert [policy.delay(n) for n in (1, 2, 3, 4)] == [10, 20, 30, 30]
    assert RetryPolicy().delay(1) == 10 and RetryPolicy().delay(20) == 300  # the default: 10 s doubling to 5 min


def test_a_run_whose_every_attempt_fails_within_seconds_is_a_crash_loop():
    from datetime import datetime, timedelta

    from launcher.backends.base import Attempt, Run

    t = datetime.fromisoformat(T0)

    def run_of(*runtimes: float, last: RunStatus = RunStatus.FAILED) -> Run:
        attempts = [Attempt(i + 1, RunStatus.FAILED, t, t + timedelta(seconds=s)) for i, s in enumerate(runtimes)]
        attempts[-1].status = last
        return Run("r", "kubernetes", last, t, {}, attempts=attempts)

    assert run_of(1, 2).crash_loop and run_of(0.1, 0.1, 9.9).crash_loop
    assert not run_of(1).crash_loop  # one attempt is no loop
    assert not run_of(1, 12).crash_loop  # one attempt ran
    assert not run_of(1, 2, last=RunStatus.COMPLETED).crash_loop
    assert run_of(1, 2, 0, last=RunStatus.RUNNING).crash_loop  # the attempts that ended crashed
