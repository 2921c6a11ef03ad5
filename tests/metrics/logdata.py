"""Log lines as the trainer and its neighbours write them, for the metrics tests."""

from __future__ import annotations

from launcher.metrics.records import format_record

T0 = 1_764_000_000.0


def loss(step: int, attempt: int) -> float:
    """A distinct, exactly representable-as-repr value per (step, attempt)."""
    return round(10.0 / (step + 1) + attempt / 1000, 6)


def step_line(step: int, attempt: int = 1, *, rank: int = 0, extra: dict | None = None, dt: float = 0.5) -> str:
    metrics = {"loss/train/total": loss(step, attempt), "throughput/tokens_per_sec": 1000.0 * step}
    metrics.update(extra or {})
    return format_record({"step": step, "time": T0 + attempt * 100 + step * dt, "rank": rank, "metrics": metrics})


def fit_start(attempt: int = 1, max_batches: int = 10, start: int = 0) -> str:
    return format_record(
        {
            "event": "fit_start",
            "step": start,
            "time": T0 + attempt * 100,
            "rank": 0,
            "max_duration": f"{max_batches}ba",
            "max_batches": max_batches,
        }
    )


NOISE = [
    "Downloading shards...",
    "[batch=3/10] Train loss/train/total: 2.3",
    "@@launcher.metrics {not json",
    "@@launcher.metrics [1, 2]",
    "",
    "Traceback (most recent call last):",
]


def attempt_lines(attempt: int, steps: range, *, max_batches: int = 10) -> list[str]:
    """One attempt's rank-0 log: fit_start, then per step the record, a noise line, and
    an interleaved record from global rank 1 (same step, different loss)."""
    lines = ["starting the trainer", fit_start(attempt, max_batches, steps.start - 1)]
    for i, step in enumerate(steps):
        lines.append(NOISE[i % len(NOISE)])
        lines.append(step_line(step, attempt))
        lines.append(step_line(step, attempt, rank=1, extra={"loss/train/total": 99.0}))
    return lines


# Attempt 1 logs steps 1-6 then dies; attempt 2 resumes from a checkpoint at step 4.
ATTEMPT_1 = range(1, 7)
ATTEMPT_2 = range(5, 11)


def expected_points(metric: str = "loss/train/total") -> list[tuple[int, float, int]]:
    """(step, value, attempt): attempt 1's steps before the resumption, then attempt 2's."""
    pts = [(s, loss(s, 1), 1) for s in ATTEMPT_1 if s < ATTEMPT_2.start]
    pts += [(s, loss(s, 2), 2) for s in ATTEMPT_2]
    if metric == "throughput/tokens_per_sec":
        pts = [(s, 1000.0 * s, a) for s, _, a in pts]
    return pts


def expected_time(step: int, attempt: int) -> float:
    return T0 + attempt * 100 + step * 0.5
