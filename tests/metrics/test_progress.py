from __future__ import annotations

from launcher.metrics.progress import ProgressLine
from launcher.metrics.records import format_record


def rec(step: int, t: float, *, loss: float = 2.5, rank: int = 0, tps: float | None = 14_200.0) -> str:
    metrics = {"loss/train/total": loss}
    if tps is not None:
        metrics["throughput/tokens_per_sec"] = tps
    return format_record({"step": step, "time": t, "rank": rank, "metrics": metrics})


def fit(max_batches: int | None = 50, max_duration: str = "50ba") -> str:
    return format_record(
        {
            "event": "fit_start",
            "step": 0,
            "time": 0.0,
            "rank": 0,
            "max_duration": max_duration,
            "max_batches": max_batches,
        }
    )


def test_nothing_to_show_before_the_first_step():
    p = ProgressLine()
    for line in ["hello", fit(), "[rank1] " + rec(1, 1.0, rank=1)]:
        p.feed(line)
    assert p.render() is None


def test_step_loss_throughput_and_eta():
    p = ProgressLine()
    p.feed("Downloading...")
    p.feed(fit())
    for step in range(1, 13):  # one step every 2.5 s
        p.feed(rec(step, 100.0 + 2.5 * step, loss=2.3125))
        p.feed(rec(step, 100.0 + 2.5 * step, loss=99.0, rank=1))
    # 38 steps left at 2.5 s each.
    assert p.render() == "step 12/50 · loss 2.312 · 14.2k tok/s · ETA 0:01:35"


def test_without_max_batches_the_duration_is_shown_and_no_eta():
    p = ProgressLine()
    p.feed(fit(max_batches=None, max_duration="1ep"))
    p.feed(rec(3, 1.0, tps=None))
    p.feed(rec(4, 2.0, tps=None))
    assert p.render() == "step 4 of 1ep · loss 2.5"


def test_max_batches_comes_from_a_batch_duration_when_missing():
    p = ProgressLine()
    p.feed(fit(max_batches=None, max_duration="20ba"))
    p.feed(rec(1, 0.0, tps=2_500_000.0))
    p.feed(rec(2, 1.0, tps=2_500_000.0))
    assert p.render() == "step 2/20 · loss 2.5 · 2.5M tok/s · ETA 0:00:18"


def test_a_restart_resets_the_pace():
    p = ProgressLine()
    p.feed(fit())
    for step in range(1, 11):
        p.feed(rec(step, float(step)))  # 1 s/step
    p.feed(fit())
    p.feed(rec(5, 1000.0))
    assert p.render() == "step 5/50 · loss 2.5 · 14.2k tok/s"  # one point: no pace yet
    p.feed(rec(6, 1010.0))  # 10 s/step now
    assert p.render().endswith("ETA 0:07:20")
