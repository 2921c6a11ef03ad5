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

  * local: the supervisor retries after the backoff; each failed attempt's class
    (launcher.pod.failures: a GPU Xid, an NCCL timeout, a hang...) says whether it was the
    system's (`retry_class`) or the run's own (USER), or it ran past the DEADLINE;
  * Kubernetes: the JobSet controller, whose failurePolicy is rendered from this
    policy (maxRestarts, and a rule that ignores maxRestarts for a disruption: it has
    no cap on those, which its warning names). JobSet restarts at once, with no
    launcher watching: its failurePolicy has no backoff (maxRestarts, restartStrategy
    and rules only), which a named warning (a retry_backoff in the spec) and describe
    say. What the launcher's backoff guards against locally (a crash loop that burns
    attempts in seconds) is bounded there by maxRestarts alone.

Successive attempts are spaced as the Kubernetes Job controller spaces a failed pod's
restarts: an exponential backoff, `first` seconds after the first failure, doubling
after each, at most `max` (scheduling.retry_backoff; 10 s and 5 min by default): the
launcher's one backoff (launcher.pod.backoff), not jittered, since the due time is shown.

Plain dataclasses, no pydantic: a Kubernetes record's spec is a plain mapping, and
`launcher --help` must not import pydantic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from launcher.pod import backoff, failures

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
EVICTED = "evicted"
"""Its queue took it off its nodes (a Kueue eviction or preemption): retried, never counted
against max_retries (nor needing retry_on_system_failure), within MAX_SYSTEM_RETRIES."""

RETRYABLE = frozenset({USER, SYSTEM, EVICTED})

# At most this many free (system-failure) retries, so a broken node pool cannot loop forever.
MAX_SYSTEM_RETRIES = 20

# The default backoff: the Job controller's first delay (10 s), doubling to 5 min (it caps at 6).
BACKOFF_FIRST_SECONDS = 10.0
BACKOFF_MAX_SECONDS = 300.0

# JobSet's failurePolicy (maxRestarts, restartStrategy, rules: jobset.x-k8s.io/v1alpha2 up to
# v0.12) has no delay between restarts; its controller recreates the Jobs at once.
JOBSET_NO_BACKOFF = "the JobSet controller restarts the group at once (JobSet's failurePolicy has no backoff)"

# An attempt that fails within this long of starting crashed rather than ran: when every
# attempt of a run did (two at least), describe calls it a crash loop.
CRASH_SECONDS = 10.0


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 0
    """Failed attempts (other than free system failures) that may be followed by another."""
    retry_on_system_failure: bool = False
    """A SYSTEM failure is retried without counting against max_retries (at most MAX_SYSTEM_RETRIES)."""
    backoff_first: float = BACKOFF_FIRST_SECONDS
    """Seconds between the end of the first failed attempt and the start of the next."""
    backoff_max: float = BACKOFF_MAX_SECONDS
    """The backoff doubles after each failed attempt up to this many seconds."""
    max_system_retries: int = MAX_SYSTEM_RETRIES

    @classmethod
    def from_scheduling(cls, scheduling: Any) -> RetryPolicy:
        """From a RunSpec's `scheduling` (the model), or the plain mapping a record keeps."""
        if scheduling is None:
            return cls()
        if isinstance(scheduling, Mapping):
            backoff = scheduling.get("retry_backoff") or {}
            return cls(
                max_retries=int(scheduling.get("max_retries") or 0),
                retry_on_system_failure=bool(scheduling.get("retry_on_system_failure")),
                backoff_first=float(backoff.get("first", BACKOFF_FIRST_SECONDS)),
                backoff_max=float(backoff.get("max", BACKOFF_MAX_SECONDS)),
            )
        backoff = scheduling.retry_backoff
        return cls(
            max_retries=int(scheduling.max_retries or 0),
            retry_on_system_failure=bool(scheduling.retry_on_system_failure),
            backoff_first=backoff.first if backoff else BACKOFF_FIRST_SECONDS,
            backoff_max=backoff.max if backoff else BACKOFF_MAX_SECONDS,
        )

    @classmethod
    def from_spec(cls, spec: Any) -> RetryPolicy:
        """From a RunSpec, or the plain mapping of a submitted spec."""
        if isinstance(spec, Mapping):
            return cls.from_scheduling(spec.get("scheduling"))
        return cls.from_scheduling(spec.scheduling)

    def delay(self, attempt: int) -> float:
        """Seconds from the end of failed attempt `attempt` (1-based) to the start of the
        next: `backoff_first`, doubled for each attempt before it, at most `backoff_max`."""
        return backoff.delay(attempt, self.backoff_first, self.backoff_max)

    def describe_backoff(self) -> str:
        """The backoff in words, as describe shows it: '10 s doubling to 5 min'."""
        if self.backoff_first <= 0:
            return "none (each retry starts at once)"
        if self.backoff_max <= self.backoff_first:
            return f"{seconds_text(self.backoff_first)} before each retry"
        return f"{seconds_text(self.backoff_first)} doubling to {seconds_text(self.backoff_max)}"

    def free(self, failure: str | None) -> bool:
        """Does a failure of this class not count against max_retries?"""
        return failure == EVICTED or (failure == SYSTEM and self.retry_on_system_failure)

    def allows(self, finished: Iterable[str | None], failure: str | None) -> bool:
        """May an attempt that failed with `failure` be followed by another? `finished` are
        the failure classes of the attempts that failed before it (stopped ones excluded)."""
        if failure not in RETRYABLE:
            return False
        earlier = list(finished)
        if self.free(failure):
            return sum(1 for f in earlier if self.free(f)) < self.max_system_retries
        return sum(1 for f in earlier if not self.free(f)) < self.max_retries


_RETRY_CLASS = {
    failures.HARDWARE: SYSTEM,
    failures.COLLECTIVE: SYSTEM,
    failures.PREEMPTED: SYSTEM,
    failures.HANG: SYSTEM,
    failures.EVICTED: EVICTED,
    failures.OOM: USER,
    failures.USER: USER,
}


def retry_class(failure_class: str | None) -> str:
    """How RetryPolicy counts a failure of this class (launcher.pod.failures): a bad node, a
    collective that broke, a preemption or a hang is the cluster's (SYSTEM: free with
    retry_on_system_failure); running out of memory, like any other failure, is the
    program's own (USER: counted against max_retries)."""
    return _RETRY_CLASS.get(failure_class or failures.USER, USER)


def seconds_text(seconds: float) -> str:
    """A duration in its largest whole unit where it is one: '10 s', '5 min', '1.5 s', '2 h'."""
    for unit, size in (("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)} {unit}"
    return f"{seconds:g} s"


def crashed(runtime_seconds: float | None) -> bool:
    """Did an attempt that failed after this long crash (end within seconds of starting)?"""
    return runtime_seconds is not None and runtime_seconds < CRASH_SECONDS
