"""When a failed attempt is followed by another: one policy, read by every backend.

A run's `scheduling` says it (mcli's fields): `max_retries` failed attempts may be
followed by a new one, and with `retry_on_system_failure` a failure that the
cluster caused (a preemption, a drained or lost node) is retried without counting
against `max_retries`, up to MAX_SYSTEM_RETRIES of them, so that a broken node pool
cannot loop forever. A retry restarts the whole group (a static rendezvous cannot
take one replacement rank).

Each backend classifies how an attempt failed into one of the failure classes below
and asks `RetryPolicy.allows`; what a backend cannot honour it names in its
`unhonoured` warnings:

  * local: the supervisor retries at once; nothing but the run itself ends its
    ranks on this machine, so every failure is USER (or DEADLINE) and
    retry_on_system_failure is named as not honoured;
  * Kubernetes, Job form: the reconciler (`launcher reconcile`, `run --follow`)
    classifies from the pods (a DisruptionTarget condition or an eviction is SYSTEM);
  * Kubernetes, JobSet form: the JobSet controller, whose failurePolicy is rendered
    from this policy (maxRestarts, and a rule that ignores maxRestarts for a disruption:
    it has no cap on those, which its warning names).

Plain dataclasses, no pydantic: a Kubernetes record's spec is a plain mapping, and
`launcher --help` must not import pydantic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# How an attempt failed.
USER = "user"
"""The run's own program failed (a non-zero exit, out of memory): counts against max_retries."""
SYSTEM = "system"
"""The cluster ended it (preempted, evicted, node lost or drained): free with retry_on_system_failure."""
FATAL = "fatal"
"""It can never start (an image that does not pull, a missing secret): never retried."""
DEADLINE = "deadline"
"""It ran past scheduling.max_duration: never retried (the duration is the run's, not an attempt's)."""
STOPPED = "stopped"
"""Stopped by the user: never retried."""

RETRYABLE = frozenset({USER, SYSTEM})

# At most this many free (system-failure) retries, so a broken node pool cannot loop forever.
MAX_SYSTEM_RETRIES = 20


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 0
    """Failed attempts (other than free system failures) that may be followed by another."""
    retry_on_system_failure: bool = False
    """A SYSTEM failure is retried without counting against max_retries (at most MAX_SYSTEM_RETRIES)."""
    backoff_seconds: float = 0.0
    """How long after a failed attempt the next one starts. No run field sets it: every
    backend restarts the group at once, as mcli does."""
    max_system_retries: int = MAX_SYSTEM_RETRIES

    @classmethod
    def from_scheduling(cls, scheduling: Any) -> RetryPolicy:
        """From a RunSpec's `scheduling` (the model), or the plain mapping a record keeps."""
        if scheduling is None:
            return cls()
        if isinstance(scheduling, Mapping):
            return cls(max_retries=int(scheduling.get("max_retries") or 0),
                       retry_on_system_failure=bool(scheduling.get("retry_on_system_failure")))
        return cls(max_retries=int(scheduling.max_retries or 0),
                   retry_on_system_failure=bool(scheduling.retry_on_system_failure))

    @classmethod
    def from_spec(cls, spec: Any) -> RetryPolicy:
        """From a RunSpec, or the plain mapping of a submitted spec."""
        if isinstance(spec, Mapping):
            return cls.from_scheduling(spec.get("scheduling"))
        return cls.from_scheduling(spec.scheduling)

    def free(self, failure: str | None) -> bool:
        """Does a failure of this class not count against max_retries?"""
        return failure == SYSTEM and self.retry_on_system_failure

    def allows(self, finished: Iterable[str | None], failure: str | None) -> bool:
        """May an attempt that failed with `failure` be followed by another? `finished` are
        the failure classes of the attempts that failed before it (stopped ones excluded)."""
        if failure not in RETRYABLE:
            return False
        earlier = list(finished)
        if self.free(failure):
            return sum(1 for f in earlier if self.free(f)) < self.max_system_retries
        return sum(1 for f in earlier if not self.free(f)) < self.max_retries
