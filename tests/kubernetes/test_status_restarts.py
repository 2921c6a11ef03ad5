"""A JobSet run's status from the objects the API server returns (status.derive on the
JobSet form): attempts whose pods the JobSet controller deleted are told from the child
Job's failure events; the JobSet's terminal state ends the run."""

from __future__ import annotations

import json

from launcher.backends.base import RunStatus
from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.attempts import Observed, attempt_of
from launcher.backends.kubernetes.status import derive

RUN = "group-abc123"
T0 = "2026-12-01T10:00:00+00:00"


def record() -> dict:
    spec = {
        "name": RUN,
        "command": "x",
        "compute": {"nodes": 2, "gpus": 0, "gpu_type": "none"},
        "scheduling": {"max_retries": 1},
    }
    return {
        "metadata": {
            "name": RUN,
            "creationTimestamp": T0,
            "resourceVersion": "1",
            "annotations": {keys.RECORD_SECRETS: "[]"},
        },
        "data": {keys.SPEC_FILE: json.dumps(spec)},
    }


def jobset(restarts: int = 0, terminal: str | None = None, condition: dict | None = None) -> dict:
    status: dict = {"restarts": restarts}
    if terminal:
        status["terminalState"] = terminal
    if condition:
        status["conditions"] = [condition]
    return {"metadata": {"name": RUN, "uid": "js-uid", "creationTimestamp": T0}, "spec": {}, "status": status}


def child_job(restart: int, *, complete: bool = False) -> dict:
    conds = (
        [{"type": "Complete", "status": "True", "lastTransitionTime": "2026-12-01T10:05:00+00:00"}] if complete else []
    )
    return {
        "metadata": {"name": f"{RUN}-node-0", "labels": {keys.JOBSET_RESTART: str(restart)}, "creationTimestamp": T0},
        "spec": {"completions": 2},
        "status": {"conditions": conds},
    }


def pod(rank: int, restart: int, *, phase: str = "Succeeded", code: int = 0, waiting: str | None = None) -> dict:
    state = (
        {"waiting": {"reason": waiting}}
        if waiting
        else {
            "terminated": {
                "exitCode": code,
                "startedAt": "2026-12-01T10:03:00+00:00",
                "finishedAt": "2026-12-01T10:04:00+00:00",
            }
        }
    )
    return {
        "metadata": {
            "name": f"{RUN}-node-0-{rank}-x{restart}",
            "labels": {keys.RUN: RUN, keys.JOBSET_RESTART: str(restart)},
            "annotations": {keys.COMPLETION_INDEX: str(rank)},
        },
        "spec": {"nodeName": "fake-node-0"},
        "status": {"phase": "Pending" if waiting else phase, "containerStatuses": [{"name": "main", "state": state}]},
    }


def job_event(message: str, reason: str = "PodFailurePolicy", at: str = "2026-12-01T10:01:00+00:00") -> dict:
    return {
        "type": "Warning",
        "reason": reason,
        "message": message,
        "lastTimestamp": at,
        "involvedObject": {"kind": "Job", "name": f"{RUN}-node-0"},
    }


def test_the_restart_attempt_label_numbers_attempts_from_one():
    assert attempt_of(pod(0, 0)) == 1 and attempt_of(pod(0, 2)) == 3


def test_an_unobserved_restart_is_told_from_the_child_jobs_failure_event():
    obs = Observed(
        RUN,
        record=record(),
        jobset=jobset(1, "Completed"),
        jobs=[child_job(1, complete=True)],
        pods=[pod(0, 1), pod(1, 1)],
        events=[
            job_event(
                f"Container main for pod default/{RUN}-node-0-1-k2x9q failed with exit code 3 "
                "matching FailJob rule at index 1"
            )
        ],
    )
    run, action = derive(obs)
    assert action is None
    assert run.status is RunStatus.COMPLETED and run.exit_code == 0
    first, second = run.attempts
    assert (first.index, first.status, first.reason) == (1, RunStatus.FAILED, "rank 1 exited with code 3")
    assert [(r.rank, r.status, r.exit_code) for r in first.ranks] == [
        (0, RunStatus.STOPPED, None),
        (1, RunStatus.FAILED, 3),
    ]
    assert (second.index, second.status) == (2, RunStatus.COMPLETED)
    assert [r.exit_code for r in second.ranks] == [0, 0]


def test_a_disruption_event_names_the_cluster():
    obs = Observed(
        RUN,
        record=record(),
        jobset=jobset(1),
        jobs=[],
        pods=[],
        events=[
            job_event(
                f"Pod default/{RUN}-node-0-0-abcde has condition DisruptionTarget matching FailJob rule at index 0"
            )
        ],
    )
    run, _ = derive(obs)
    assert run.attempts[0].reason == "rank 0 was stopped by the cluster: DisruptionTarget"
    # Between the deletion of attempt 1's Job and the creation of attempt 2's.
    assert run.status is RunStatus.PENDING and run.reason == "restarting the group: attempt 2"


def test_reaching_max_restarts_fails_with_the_last_attempts_reason():
    cond = {
        "type": "Failed",
        "status": "True",
        "reason": "ReachedMaxRestarts",
        "message": f"jobset failed due to reaching max number of restarts (first failed job: {RUN}-node-0)",
        "lastTransitionTime": "2026-12-01T10:09:00+00:00",
    }
    events = [
        job_event(
            f"Container main for pod default/{RUN}-node-0-1-aaaaa failed with exit code 3 matching "
            "FailJob rule at index 1",
            at="2026-12-01T10:01:00+00:00",
        ),
        job_event(
            f"Container main for pod default/{RUN}-node-0-1-bbbbb failed with exit code 4 matching "
            "FailJob rule at index 1",
            at="2026-12-01T10:08:00+00:00",
        ),
    ]
    run, _ = derive(Observed(RUN, record=record(), jobset=jobset(1, "Failed", cond), events=events))
    assert run.status is RunStatus.FAILED and run.exit_code == 4
    assert run.reason.startswith("rank 1 exited with code 4; jobset failed due to reaching max number of restarts")
    assert [(a.index, a.reason) for a in run.attempts] == [
        (1, "rank 1 exited with code 3"),
        (2, "rank 1 exited with code 4"),
    ]


def test_an_image_that_cannot_be_pulled_is_ended_by_the_launcher():
    obs = Observed(
        RUN,
        record=record(),
        jobset=jobset(0),
        jobs=[child_job(0)],
        pods=[pod(0, 0, waiting="ErrImagePull"), pod(1, 0, waiting="ContainerCreating")],
    )
    run, action = derive(obs)
    assert run.status is RunStatus.FAILED and action is not None and action.kind == "fail"
    assert "ErrImagePull" in action.reason


def test_a_restarted_runs_jobset_numbers_its_attempts_on_from_the_record():
    """After `run -r` at attempt 2, the record holds attempts 1 and 2, and the new JobSet (first
    attempt 3, its launcher.dev/attempt label) has restarted once: attempt 3 is told from its
    child Job's event, not from the old JobSet's event of the same Job name, and 4 runs."""
    from launcher.backends.kubernetes.attempts import first_attempt

    born = "2026-12-01T11:00:00+00:00"
    summaries = [
        {"index": 1, "status": "FAILED", "reason": "rank 0 exited with code 1", "ranks": [], "events": []},
        {"index": 2, "status": "STOPPED", "reason": "stopped by the user", "ranks": [], "events": []},
    ]
    rec = record()
    rec["metadata"]["annotations"][keys.RECORD_ATTEMPTS] = json.dumps(summaries)
    js = jobset(1)
    js["metadata"]["labels"] = {keys.ATTEMPT: "3"}
    js["metadata"]["creationTimestamp"] = born
    live = child_job(1)
    live["metadata"]["labels"][keys.ATTEMPT] = "3"
    pods = [pod(r, 1) for r in (0, 1)]
    for p in pods:
        p["metadata"]["labels"][keys.ATTEMPT] = "3"
        p["status"] = {"phase": "Running", "containerStatuses": [{"name": "main", "state": {"running": {}}}]}
    old = (
        f"Container main for pod default/{RUN}-node-0-0-aaaaa failed with exit code 9 matching FailJob rule at index 1"
    )
    new = (
        f"Container main for pod default/{RUN}-node-0-1-bbbbb failed with exit code 4 matching FailJob rule at index 1"
    )
    events = [job_event(old), job_event(new, at="2026-12-01T11:05:00+00:00")]
    assert first_attempt(js) == 3 and attempt_of(pods[0]) == 4
    run, _ = derive(Observed(RUN, record=rec, jobset=js, jobs=[live], pods=pods, events=events))
    assert [a.index for a in run.attempts] == [1, 2, 3, 4]
    assert [a.reason for a in run.attempts[:3]] == [
        "rank 0 exited with code 1",
        "stopped by the user",
        "rank 1 exited with code 4",
    ]
    assert run.current_attempt == 4 and not run.status.is_terminal
