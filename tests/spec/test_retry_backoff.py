"""scheduling.retry_backoff: durations as a user writes them, and precise errors (exit 2
with file:line and field) for what is not one."""

from __future__ import annotations

import pytest

from launcher.spec.load import load_spec_text
from launcher.spec.retry import RetryPolicy
from tests.spec.test_load import errors_of


@pytest.mark.parametrize(
    "value, first, most",
    [
        ("{first: 10s, max: 5m}", 10, 300),
        ("{first: 500ms}", 0.5, 300),
        ("{first: 2, max: 1h}", 2, 3600),
        ("{first: 0}", 0, 300),
        ("{max: 2min, first: 1.5s}", 1.5, 120),
    ],
)
def test_durations(value, first, most):
    spec = load_spec_text(
        f"name: a\ncommand: x\nscheduling:\n  max_retries: 1\n  retry_backoff: {value}\n", "spec.yaml"
    ).spec
    policy = RetryPolicy.from_spec(spec)
    assert (policy.backoff_first, policy.backoff_max) == (first, most)
    assert RetryPolicy.from_spec(spec.to_submitted()) == policy  # the record a backend keeps says the same


def test_no_backoff_at_all_retries_at_once():
    policy = RetryPolicy(max_retries=1, backoff_first=0)
    assert policy.delay(1) == policy.delay(5) == 0 and policy.describe_backoff() == "none (each retry starts at once)"


@pytest.mark.parametrize(
    "value, message",
    [
        (
            "{first: soon}",
            "spec.yaml:3:37: scheduling.retry_backoff.first: must be a duration such as 10s, 5m or a "
            "number of seconds, got 'soon'",
        ),
        ("{first: 10s, max: 1s}", "spec.yaml:3:29: scheduling.retry_backoff: max (1 s) must be at least first (10 s)"),
        ("{first: -1}", "scheduling.retry_backoff.first: must be between 0 and 24h, got -1"),
        ("{first: 2d}", "scheduling.retry_backoff.first: must be a duration such as 10s, 5m"),
        ("{first: true}", "scheduling.retry_backoff.first: must be a duration such as 10s, 5m"),
        ("{frist: 1s}", "scheduling.retry_backoff.frist: unknown field (did you mean 'first'?)"),
        ("5s", "scheduling.retry_backoff: must be a mapping, got '5s'"),
    ],
)
def test_bad_backoffs_get_precise_messages(value, message):
    errs = errors_of(f"name: a\ncommand: x\nscheduling: {{retry_backoff: {value}}}\n")
    assert any(message in e for e in errs), errs
