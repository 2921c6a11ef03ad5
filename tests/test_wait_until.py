"""The one poll-with-a-deadline that tests use instead of fixed sleeps."""

from __future__ import annotations

import itertools
import time

import pytest

from tests.conftest import wait_until


def test_returns_the_first_truthy_value_without_waiting_out_the_timeout():
    calls = itertools.count(1)
    started = time.monotonic()
    assert wait_until(lambda: (n := next(calls)) >= 3 and f"call {n}", 30, interval=0.01) == "call 3"
    assert time.monotonic() - started < 5


def test_fails_past_the_timeout_saying_what_it_waited_for_and_the_last_value():
    with pytest.raises(pytest.fail.Exception) as failed:
        wait_until(lambda: [], 0.2, interval=0.05, message="the queue to fill")
    assert "timed out after 0.2s waiting for the queue to fill; last value: []" in str(failed.value)


class NotYet:
    """A falsy answer with a long repr, as a run record that has not reached its state."""

    def __bool__(self):
        return False

    def __repr__(self):
        return "NotYet(" + "x" * 2000 + ")"


def test_a_long_last_value_is_cut_short():
    with pytest.raises(pytest.fail.Exception) as failed:
        wait_until(NotYet, 0.05)
    assert "last value: NotYet(xxx" in str(failed.value) and len(str(failed.value)) < 700


def test_a_message_function_says_what_was_there_at_the_deadline():
    state = {"left": ["logs-rank-0"]}
    with pytest.raises(pytest.fail.Exception) as failed:
        wait_until(lambda: not state["left"], 0.05, message=lambda: f"the threads to end (left: {state['left']})")
    assert "waiting for the threads to end (left: ['logs-rank-0']); last value: False" in str(failed.value)
