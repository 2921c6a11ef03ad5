"""How a failed Databricks attempt is counted by the retry policy, from what runs/get says of
its ending and what its log shows (launcher/backends/databricks/retries.py): pure, no workspace."""

from __future__ import annotations

import pytest
from databricks.sdk.service.jobs import Run

from launcher.backends.databricks.retries import classify, counted
from launcher.backends.databricks.status import ending_of, status_of


def ended(result: str | None, code: str | None, kind: str | None, life: str = "TERMINATED") -> Run:
    state = {"life_cycle_state": life, "state_message": "it ended"}
    if result:
        state["result_state"] = result
    status: dict = {"state": "TERMINATED"}
    if code:
        status["termination_details"] = {"code": code, "type": kind, "message": "it ended"}
    return Run.from_dict({"run_id": 1, "state": state, "status": status})


@pytest.mark.parametrize(
    "run, lines, retried_as, failure_class",
    [
        (ended("FAILED", "RUN_EXECUTION_ERROR", "CLIENT_ERROR"), ["exit 1"], "user", "user"),
        (
            ended("FAILED", "RUN_EXECUTION_ERROR", "CLIENT_ERROR"),
            ["NVRM: Xid (PCI:0000:00): 79, pid=1"],
            "system",
            "hardware",
        ),
        (
            ended("FAILED", "RUN_EXECUTION_ERROR", "CLIENT_ERROR"),
            ["torch.OutOfMemoryError: CUDA out of memory"],
            "user",
            "oom",
        ),
        (ended("FAILED", "CLOUD_FAILURE", "CLOUD_FAILURE"), [], "system", "preempted"),
        (ended("FAILED", "DRIVER_ERROR", "INTERNAL_ERROR"), [], "system", "preempted"),
        (ended(None, None, None, life="INTERNAL_ERROR"), [], "system", "preempted"),
        (ended("MAXIMUM_CONCURRENT_RUNS_REACHED", None, None), [], "system", "preempted"),
        (ended(None, "CLUSTER_ERROR", "CLIENT_ERROR", life="INTERNAL_ERROR"), [], "fatal", None),
        (ended("FAILED", "LIBRARY_INSTALLATION_ERROR", "CLIENT_ERROR"), [], "fatal", None),
        (ended("TIMEDOUT", "RUN_EXECUTION_ERROR", "CLIENT_ERROR"), [], "deadline", None),
    ],
)
def test_an_ending_and_its_log_decide_how_a_failure_is_retried(run, lines, retried_as, failure_class):
    _, reason = status_of(run)
    kind, failure = classify(ending_of(run), reason, lines)
    assert (kind, failure.kind if failure else None) == (retried_as, failure_class)


def test_the_budget_counts_the_failures_since_the_last_submit_or_restart():
    entries = [
        {"retried_as": "user"},
        {"retry": True, "retried_as": "system"},
        {"retried_as": "user"},  # `run -r`: the budget counts afresh from here
        {"retry": True, "retried_as": "user"},
        {"retry": True},
    ]
    assert counted(entries) == ["user", "user"]
