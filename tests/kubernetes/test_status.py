"""Status rules on API objects as the server returns them (pure: no server needed)."""

from __future__ import annotations

import json

from launcher.backends.base import RunStatus
from launcher.backends.kubernetes.attempts import Observed
from launcher.backends.kubernetes.status import derive, retry_allowed

T0, T1 = "2025-01-01T00:00:00Z", "2025-01-01T00:00:05Z"


def job(conditions=(), attempt=1, nodes=2, **spec):
    return {
        "metadata": {
            "name": "r",
            "uid": "u1",
            "creationTimestamp": T0,
            "annotations": {"launcher.dev/attempt": str(attempt)},
            "labels": {"launcher.dev/run": "r"},
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
        "labels": {"launcher.dev/attempt": str(attempt)},
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
    run, action = derive(Observed("r", record=record(), job=j, pods=pods))
    assert run.status is RunStatus.FAILED and run.reason == "rank 1 exited with code 3" and run.exit_code == 3
    assert [(r.rank, r.status) for r in run.attempts[0].ranks] == [(0, RunStatus.STOPPED), (1, RunStatus.FAILED)]
    assert action is None  # max_retries 0


def test_missing_ranks_of_a_failed_attempt_are_reported_stopped():
    j = job([("Failed", "PodFailurePolicy", "x")], nodes=3)
    run, _ = derive(Observed("r", record=record(), job=j, pods=[pod(2, phase="Failed", state=terminated(1))]))
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
        run, _ = derive(Observed("r", record=record(), job=j, pods=pods))
        assert run.status is want, (want, run.status, run.reason)


def test_fatal_waiting_reason_fails_at_once_and_asks_to_end_the_run():
    p = pod(0, phase="Pending", state={"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}})
    run, action = derive(Observed("r", record=record(), job=job(nodes=1), pods=[p]))
    assert run.status is RunStatus.FAILED and run.reason == "rank 0: ImagePullBackOff: Back-off pulling image"
    assert action.kind == "fail"


def test_queued_reason_is_the_newest_failed_scheduling_event():
    events = [
        {"reason": "FailedScheduling", "involvedObject": {"name": "r-0-abcde"}, "lastTimestamp": ts, "message": m}
        for ts, m in ((T0, "old"), (T1, "0/12 nodes are available: 12 Insufficient nvidia.com/gpu."))
    ]
    run, _ = derive(
        Observed("r", record=record(), job=job(nodes=1), pods=[pod(0, phase="Pending", scheduled=False)], events=events)
    )
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
    # A stopped attempt is no failure: it does not use up a retry.
    assert retry_allowed({"scheduling": {"max_retries": 1}}, [{"status": "STOPPED", "failure": "stopped"}], "user")


def test_retry_accounting():
    spec = {"scheduling": {"max_retries": 1, "retry_on_system_failure": True}}
    user = {"status": "FAILED", "failure": "user"}
    system = {"status": "FAILED", "failure": "system"}
    assert retry_allowed(spec, [], "user")
    assert not retry_allowed(spec, [user], "user")
    assert retry_allowed(spec, [user, system, system], "system")  # free
    assert retry_allowed(spec, [system, system], "user")  # system ones did not count
    assert not retry_allowed(spec, [], "fatal") and not retry_allowed(spec, [], "deadline")
    assert not retry_allowed({"scheduling": {"max_retries": 0}}, [], "system")
    j = job([("Failed", "PodFailurePolicy", "m")], nodes=1)
    run, action = derive(
        Observed(
            "r",
            record=record({"name": "r", "command": "x", "scheduling": {"max_retries": 1}}),
            job=j,
            pods=[pod(0, phase="Failed", state=terminated(2))],
        )
    )
    assert action.kind == "retry" and action.next_attempt == 2 and run.status is RunStatus.PENDING


def test_a_retry_is_due_only_once_its_backoff_has_passed_since_the_attempt_failed():
    from datetime import datetime, timedelta

    from launcher.spec.retry import RetryPolicy

    failed_at = datetime.fromisoformat(T1)
    spec = {"name": "r", "command": "x", "scheduling": {"max_retries": 3, "retry_backoff": {"first": 10, "max": 30}}}
    policy = RetryPolicy.from_spec(spec)
    assert [policy.delay(n) for n in (1, 2, 3, 4)] == [10, 20, 30, 30]
    assert RetryPolicy().delay(1) == 10 and RetryPolicy().delay(20) == 300  # the default: 10 s doubling to 5 min

    def at(seconds: float, attempt: int = 1):
        return derive(
            Observed(
                "r",
                record=record(spec),
                job=job([("Failed", "PodFailurePolicy", "m")], attempt=attempt, nodes=1),
                pods=[pod(0, phase="Failed", state=terminated(2), attempt=attempt)],
            ),
            now=failed_at + timedelta(seconds=seconds),
        )

    run, action = at(9.5)
    assert action is None and run.status is RunStatus.PENDING
    assert run.retry_at == failed_at + timedelta(seconds=10)
    local = run.retry_at.astimezone().strftime("%H:%M:%S")
    assert run.reason == f"attempt 1 failed (rank 0 exited with code 2); a retry is due at {local}"
    run, action = at(10)
    assert action.kind == "retry" and action.next_attempt == 2 and run.retry_at is None
    # The second failure waits twice as long.
    run, action = at(19, attempt=2)
    assert action is None and run.retry_at == failed_at + timedelta(seconds=20)
    assert at(20, attempt=2)[1].kind == "retry"


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
