"""A Databricks run's state as ours: life_cycle_state and result_state (API 2.0's), or the
newer status.state with its termination_details where the workspace gives them, to a
RunStatus and the reason, in words a user reads."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from launcher.backends.runstatus import RunStatus

LIFE_CYCLE = {
    "QUEUED": RunStatus.QUEUED,
    "BLOCKED": RunStatus.QUEUED,
    "WAITING": RunStatus.QUEUED,
    "PENDING": RunStatus.STARTING,
    "WAITING_FOR_RETRY": RunStatus.STARTING,
    "RUNNING": RunStatus.RUNNING,
    "TERMINATING": RunStatus.TERMINATING,
}
RESULT = {
    "SUCCESS": RunStatus.COMPLETED,
    "SUCCESS_WITH_FAILURES": RunStatus.COMPLETED,
    "CANCELED": RunStatus.STOPPED,
    "FAILED": RunStatus.FAILED,
    "TIMEDOUT": RunStatus.FAILED,
    "MAXIMUM_CONCURRENT_RUNS_REACHED": RunStatus.FAILED,
    "UPSTREAM_CANCELED": RunStatus.STOPPED,
    "UPSTREAM_FAILED": RunStatus.FAILED,
    "EXCLUDED": RunStatus.FAILED,
}
# termination_details.code values that say the run was stopped, not that it failed.
STOPPED_CODES = {"USER_CANCELED", "CANCELED"}


def _enum(value: Any) -> str | None:
    """An SDK enum's name, or None."""
    if value is None:
        return None
    return getattr(value, "value", None) or str(value)


def status_of(run: Any) -> tuple[RunStatus, str | None]:
    """(status, reason) of a databricks.sdk.service.jobs.Run."""
    state, newer = run.state, run.status
    life = _enum(state.life_cycle_state) if state else None
    result = _enum(state.result_state) if state else None
    message = (state.state_message or None) if state else None
    details = newer.termination_details if newer is not None else None
    code = _enum(details.code) if details is not None else None
    if details is not None and details.message:
        message = details.message
    ended = life in ("TERMINATED", "SKIPPED", "INTERNAL_ERROR") or (
        newer is not None and _enum(newer.state) == "TERMINATED"
    )
    if not ended:
        current = _enum(newer.state) if newer is not None and newer.state is not None else life
        return LIFE_CYCLE.get(current or "", RunStatus.PENDING), message or None
    if code in STOPPED_CODES or result == "CANCELED":
        return RunStatus.STOPPED, message or "stopped (runs/cancel)"
    if result == "TIMEDOUT":
        return RunStatus.FAILED, f"max_duration: {message or 'the run timed out'}"
    if result in RESULT:
        status = RESULT[result]
        if status is RunStatus.COMPLETED:
            return status, None
        return status, _with_code(message or f"the run ended {result}", code)
    if code == "SUCCESS":
        return RunStatus.COMPLETED, None
    # INTERNAL_ERROR, SKIPPED, or a result we do not know: the run did not finish its work.
    return RunStatus.FAILED, _with_code(message or f"the run ended {life}", code)


# termination_details.type: the Databricks platform or the cloud ended the run, not its program.
PLATFORM_TYPES = {"CLOUD_FAILURE", "INTERNAL_ERROR"}
# termination_details.code: the platform's or the cloud's doing, or a limit of the workspace
# that a later submit may not meet (the system's, as a preemption is).
PLATFORM_CODES = {
    "CLOUD_FAILURE",
    "DRIVER_ERROR",
    "INTERNAL_ERROR",
    "WORKSPACE_RUN_LIMIT_EXCEEDED",
    "CLUSTER_REQUEST_LIMIT_EXCEEDED",
    "MAX_CONCURRENT_RUNS_EXCEEDED",
    "MAX_JOB_QUEUE_SIZE_EXCEEDED",
    "MAX_SPARK_CONTEXTS_EXCEEDED",
}
# How a failed run ended, for the retry policy (launcher.spec.retry):
PROGRAM = "program"
"""Its task ran and failed (RUN_EXECUTION_ERROR): what its log says decides the class."""
PLATFORM = "platform"
"""The platform or the cloud ended it (PLATFORM_TYPES, PLATFORM_CODES): the system's."""
NEVER_RAN = "never-ran"
"""Its configuration, a permission, a library, a missing secret: the same submit fails again."""
TIMED_OUT = "timed-out"
"""It ran past timeout_seconds (max_duration)."""


def ending_of(run: Any) -> str:
    """How a run that ended FAILED ended: PROGRAM, PLATFORM, NEVER_RAN or TIMED_OUT."""
    state, newer = run.state, run.status
    life = _enum(state.life_cycle_state) if state else None
    result = _enum(state.result_state) if state else None
    details = newer.termination_details if newer is not None else None
    code = _enum(details.code) if details is not None else None
    kind = _enum(details.type) if details is not None else None
    if result == "TIMEDOUT":
        return TIMED_OUT
    if (
        kind in PLATFORM_TYPES
        or code in PLATFORM_CODES
        or (life == "INTERNAL_ERROR" and code is None)
        or result == "MAXIMUM_CONCURRENT_RUNS_REACHED"  # API 2.0's word for a workspace limit
    ):
        return PLATFORM
    if code in (None, "RUN_EXECUTION_ERROR") and result in (None, "FAILED"):
        return PROGRAM
    return NEVER_RAN


def _with_code(message: str, code: str | None) -> str:
    return f"{message} ({code})" if code and code not in message else message


def ms_time(ms: int | None) -> datetime | None:
    return datetime.fromtimestamp(ms / 1000, UTC) if ms else None


def cluster_id_of(job_run: Any) -> str | None:
    for task in job_run.tasks or []:
        if task.cluster_instance and task.cluster_instance.cluster_id:
            return task.cluster_instance.cluster_id
    return job_run.cluster_instance.cluster_id if job_run.cluster_instance else None


def task_run_id_of(job_run: Any) -> int | None:
    for task in job_run.tasks or []:
        return task.run_id
    return None
