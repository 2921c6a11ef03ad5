"""launcher.pod.backoff, the one backoff: the API client's retries and informers, the retry
policy's due times and the in-pod rendezvous all wait by it."""

from __future__ import annotations

from launcher.pod.backoff import Backoff, delay
from launcher.spec.retry import RetryPolicy


def test_the_wait_doubles_from_first_to_the_cap_and_none_is_zero():
    assert [delay(n, 0.2, 2.0) for n in (1, 2, 3, 4, 5, 6)] == [0.2, 0.4, 0.8, 1.6, 2.0, 2.0]
    assert delay(10_000, 10, 300) == 300 and delay(3, 0, 300) == 0
    # The retry policy's due times are this sequence, unjittered.
    assert [RetryPolicy(backoff_first=10, backoff_max=30).delay(n) for n in (1, 2, 3)] == [10, 20, 30]


def test_a_backoff_jitters_within_half_its_step_and_starts_small_after_a_reset():
    plain = Backoff(0.2, 2.0, jitter=False)
    assert [plain.next() for _ in range(6)] == [0.2, 0.4, 0.8, 1.6, 2.0, 2.0]
    plain.reset()
    assert plain.current == 0.2
    jittered = Backoff(1.0, 8.0)
    waits = [jittered.next() for _ in range(5)]
    assert all(step / 2 <= wait <= step for wait, step in zip(waits, [1, 2, 4, 8, 8])), waits
