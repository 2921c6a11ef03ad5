from __future__ import annotations

import math
from array import array

import pytest

from launcher.errors import InputError
from launcher.metrics.index import Columns, Segment
from launcher.metrics.series import Restart, ema, merge, resolve_metrics, summarize, thin


def seg(steps: list[int], values: list[float] | None = None, name: str = "loss/train/total") -> Segment:
    values = values if values is not None else [float(s) for s in steps]
    cols = Columns(array("q", steps), array("d", [100.0 + s for s in steps]), array("d", values))
    return Segment(metrics={name: cols}, first_time=100.0 + steps[0])


def test_a_resumed_attempt_replaces_the_steps_it_redid_and_is_marked():
    series, restarts, _ = merge([(1, seg([1, 2, 3, 4], [9, 8, 7, 6])), (2, seg([3, 4, 5], [5, 4, 3]))])
    s = series["loss/train/total"]
    assert list(zip(s.steps, s.values, s.attempts)) == [(1, 9, 1), (2, 8, 1), (3, 5, 2), (4, 4, 2), (5, 3, 2)]
    assert restarts == [Restart(attempt=2, step=3, time=103.0)]


def test_a_retry_from_scratch_keeps_only_the_retry():
    series, restarts, _ = merge([(1, seg([1, 2, 3])), (2, seg([1, 2]))])
    assert series["loss/train/total"].attempts == [2, 2]
    assert restarts[0].step == 1


def test_a_repeated_step_keeps_the_last_value():
    series, _, _ = merge([(1, seg([1, 2, 2, 3], [1.0, 2.0, 2.5, 3.0]))])
    s = series["loss/train/total"]
    assert (s.steps, s.values) == ([1, 2, 3], [1.0, 2.5, 3.0])


def test_an_attempt_without_points_marks_nothing():
    series, restarts, _ = merge([(1, Segment(events=[{"event": "fit_start"}])), (2, seg([1, 2]))])
    assert restarts == [] and series["loss/train/total"].attempts == [2, 2]


def test_resolve_metrics_defaults_to_the_training_loss_and_expands_globs():
    names = ["lr", "loss/train/total", "loss/train/ce", "throughput/tokens_per_sec"]
    assert resolve_metrics([], names, "run r") == ["loss/train/total"]
    assert resolve_metrics([], ["lr", "loss/x"], "run r") == ["loss/x"]
    # transformers' names in MLflow: the training loss, not the eval loss sorted first
    assert resolve_metrics([], ["eval_loss", "learning_rate", "loss", "train_loss"], "run r") == ["loss"]
    assert resolve_metrics(["lr", "loss/*"], names, "run r") == ["lr", "loss/train/ce", "loss/train/total"]


def test_an_unknown_metric_is_a_did_you_mean_input_error():
    with pytest.raises(InputError) as e:
        resolve_metrics(["loss/trian/total"], ["loss/train/total", "lr"], "run r")
    assert e.value.exit_code == 2
    assert "did you mean 'loss/train/total'" in e.value.message and "run r" in e.value.message
    with pytest.raises(InputError) as e:
        resolve_metrics(["zzz"], ["loss/train/total", "lr"], "run r")
    assert "did you mean" not in e.value.message and "loss/train/total" in (e.value.hint or "")


def test_thin_by_step_multiple_then_last():
    s = merge([(1, seg(list(range(1, 21))))])[0]["loss/train/total"]
    assert [s.steps[i] for i in thin(s, every=5)] == [5, 10, 15, 20]
    assert [s.steps[i] for i in thin(s, every=5, last=2)] == [15, 20]
    assert [s.steps[i] for i in thin(s, last=3)] == [18, 19, 20]


def test_ema_is_debiased_and_skips_nan():
    assert ema([4.0, 4.0, 4.0], 0.9) == pytest.approx([4.0, 4.0, 4.0])
    out = ema([2.0, math.nan, 2.0], 0.5)
    assert out == pytest.approx([2.0, 2.0, 2.0])


def test_summary_of_a_falling_curve():
    s = merge([(1, seg(list(range(1, 101)), [100.0 - i for i in range(100)]))])[0]["loss/train/total"]
    summary = summarize(s)
    assert summary.first == (1, 100.0) and summary.last == (100, 1.0) and summary.min == (100, 1.0)
    assert summary.change is not None and summary.change < 0
