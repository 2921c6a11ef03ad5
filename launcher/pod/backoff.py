"""The one backoff of the launcher: a wait that starts at `first` and doubles after each
failure in a row, up to `cap`; optionally jittered.

Its users:
  * the Kubernetes API client (backends/kubernetes/kubeapi.py): the pause between tries of
    one request, and an informer's between failed watches (`Backoff`), both jittered;
  * the retry policy (spec/retry.py): how long after a failed attempt the next one is
    due. Not jittered: the due time is written in a run's status and describe shows it;
  * the in-pod rendezvous (entrypoint/rendezvous.py): the pause between DNS look-ups of
    node rank 0's address.

Hand-written, in the standard library, rather than a retry library (tenacity), because
none of the four is a "call this until it succeeds" that such a library wraps:
  * the rendezvous runs inside any image, where only the standard library is (as all of
    launcher.pod and launcher.entrypoint);
  * the retry policy sleeps nowhere: it computes a due time from an attempt's number,
    for a record and for describe (tenacity's waits exist only inside its loop);
  * an informer's backoff lives as long as the informer and starts small again after a
    success, across many calls;
  * the API client's loop returns an object that an earlier, unanswered try created,
    and gives a connection failure and an HTTP error different numbers of tries; in
    tenacity those would be a custom stop, a custom retry predicate and this same wait.
So tenacity would replace one loop of the four, and the sequence of waits would still be
written here. This module is that sequence, once.
"""

from __future__ import annotations

import random

# Past 2**64 the cap has long been reached; the bound keeps the float finite.
_MAX_DOUBLINGS = 64


def delay(failures: int, first: float, cap: float) -> float:
    """The wait after `failures` failures in a row (1 for the first): `first`, doubled for
    each failure before it, at most `cap`. 0 when `first` is 0 or less (no backoff)."""
    if first <= 0:
        return 0.0
    return min(cap, first * 2.0 ** min(max(failures - 1, 0), _MAX_DOUBLINGS))


def jittered(step: float) -> float:
    """Equal jitter: half the step, plus up to as much again at random, so that clients
    that failed together do not retry together."""
    return step / 2 + random.uniform(0, step / 2)


class Backoff:
    """`delay` for as long as failures go on; `reset` after a success. Jittered unless
    told not to: a pause that many clients share should not end for all at once."""

    def __init__(self, first: float, cap: float, *, jitter: bool = True):
        self.first, self.cap, self.jitter = first, cap, jitter
        self.failures = 0

    @property
    def current(self) -> float:
        """The step (before jitter) of the next wait."""
        return delay(self.failures + 1, self.first, self.cap)

    def next(self) -> float:
        """The next wait; the one after it doubles, up to the cap."""
        step = self.current
        if step < self.cap:
            self.failures += 1
        return jittered(step) if self.jitter else step

    def reset(self) -> None:
        self.failures = 0
