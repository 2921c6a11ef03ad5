"""A Databricks run's retries, by the launcher's own policy (launcher.spec.retry).

A one-time run (runs/submit) is never retried by the workspace, so the launcher does it:
whoever observes the run (the backend's get and list, which watch, `run --follow`,
`describe`, `get runs` and the dashboard go through) and finds its latest attempt FAILED,
with a failure the run's RetryPolicy allows another attempt for, submits attempt N+1 once the
backoff is over, by the path `launcher run -r` takes. Its idempotency token is the run's
name and the attempt's number (render.idempotency_token), so two launchers that notice at
once make one run: the workspace answers the second submit with the first one's run id.

How an attempt failed is told from what the workspace says of its ending (status.ending_of)
and, for a task that ran, from its log's evidence lines (launcher.pod.failures, as on the
other backends): a bad GPU, a broken collective or a hang is the system's; a plain failure of
the command, or out of memory, the user's; the platform or the cloud ending it (a
CLOUD_FAILURE, a lost driver) is a preemption; a configuration the workspace refuses is never
retried, nor a run past its max_duration.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from launcher.backends.databricks.status import NEVER_RAN, PLATFORM, TIMED_OUT
from launcher.pod import failures
from launcher.spec.retry import DEADLINE, FATAL, SYSTEM, USER, RetryPolicy, retry_class


def classify(ending: str, reason: str | None, lines: Iterable[str]) -> tuple[str, failures.Failure | None]:
    """(the retry class, how it failed) of an attempt that ended FAILED as `ending` says."""
    if ending == TIMED_OUT:
        return DEADLINE, None
    if ending == NEVER_RAN:
        return FATAL, None
    found = failures.classify(None, reason, lines)
    if ending == PLATFORM and found.kind == failures.USER:
        found = failures.Failure(failures.PREEMPTED, found.evidence)  # the platform ended it, not the program
    return retry_class(found.kind), found


def counted(entries: list[Mapping[str, Any]]) -> list[str]:
    """The retry classes of the failed attempts before the latest that count against its
    retry budget: those since the last attempt that was not a retry (the first submit, or a
    `run -r`, from which the budget counts afresh, as on the other backends)."""
    since = 0
    for i, entry in enumerate(entries):
        if not entry.get("retry"):
            since = i
    return [str(e["retried_as"]) for e in entries[since:-1] if e.get("retried_as")]


def may_retry(policy: RetryPolicy, finished: list[str]) -> bool:
    """Could any failure be followed by another attempt? (If not, no log need be read.)"""
    return any(policy.allows(finished, kind) for kind in (USER, SYSTEM))
