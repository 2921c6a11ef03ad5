"""A one-line training status, built from the metric records: `launcher run --follow` shows it
from the log lines it reads, and the MPT trainer prints it every console_log_interval.

    step 12/50 · loss 2.31 · 14.2k tok/s · ETA 0:00:31
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from launcher.metrics.records import DEFAULT_METRIC, FIT_START, parse_record, record_rank

# Composer's SpeedMonitor names; the first one present is shown.
_TOKENS_PER_SEC = ("throughput/tokens_per_sec", "throughput/device/tokens_per_sec")
_RATE_WINDOW = 20  # steps the ETA's pace is measured over: recent, but not jittery


def _fmt_rate(v: float) -> str:
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.1f}{unit}"
    return f"{v:.0f}"


def _fmt_duration(seconds: float) -> str:
    s = max(round(seconds), 0)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _loss_of(metrics: dict[str, Any]) -> float | None:
    if DEFAULT_METRIC in metrics:
        return metrics[DEFAULT_METRIC]
    losses = sorted(k for k in metrics if k.startswith("loss/"))
    return metrics[losses[0]] if losses else None


class ProgressLine:
    """Feed it every log line; render() the status once rank 0 has logged a step."""

    def __init__(self) -> None:
        self.step: int | None = None
        self.max_batches: int | None = None
        self.max_duration: str | None = None
        self.loss: float | None = None
        self.tokens_per_sec: float | None = None
        self._pace: deque[tuple[int, float]] = deque(maxlen=_RATE_WINDOW)

    def feed(self, text: str) -> None:
        record = parse_record(text)
        if record is not None:
            self.feed_record(record)

    def feed_record(self, record: dict[str, Any]) -> None:
        """One metric record (the trainer feeds its own as it writes them)."""
        if record_rank(record) != 0:
            return
        if record.get("event") == FIT_START:
            self.max_duration = record.get("max_duration") if isinstance(record.get("max_duration"), str) else None
            mb = record.get("max_batches")
            if not isinstance(mb, int) and self.max_duration and self.max_duration.endswith("ba"):
                mb = int(self.max_duration[:-2]) if self.max_duration[:-2].isdigit() else None
            self.max_batches = mb if isinstance(mb, int) and mb > 0 else None
            self._pace.clear()  # a new attempt: the old pace says nothing about this one
            return
        metrics, step = record.get("metrics"), record.get("step")
        if not isinstance(metrics, dict) or not isinstance(step, int):
            return
        self.step = step
        loss = _loss_of(metrics)
        if isinstance(loss, int | float):
            self.loss = float(loss)
        for name in _TOKENS_PER_SEC:
            if isinstance(metrics.get(name), int | float):
                self.tokens_per_sec = float(metrics[name])
                break
        t = record.get("time")
        if isinstance(t, int | float):
            if self._pace and step <= self._pace[-1][0]:
                self._pace.clear()  # steps went back: a restart
            self._pace.append((step, float(t)))

    def eta_seconds(self) -> float | None:
        if self.max_batches is None or self.step is None or len(self._pace) < 2:
            return None
        (s0, t0), (s1, t1) = self._pace[0], self._pace[-1]
        if s1 <= s0 or t1 < t0:
            return None
        return max(self.max_batches - self.step, 0) * (t1 - t0) / (s1 - s0)

    def render(self) -> str | None:
        if self.step is None:
            return None
        if self.max_batches is not None:
            parts = [f"step {self.step}/{self.max_batches}"]
        elif self.max_duration:
            parts = [f"step {self.step} of {self.max_duration}"]
        else:
            parts = [f"step {self.step}"]
        if self.loss is not None:
            parts.append(f"loss {self.loss:.4g}" if math.isfinite(self.loss) else f"loss {self.loss}")
        if self.tokens_per_sec is not None:
            parts.append(f"{_fmt_rate(self.tokens_per_sec)} tok/s")
        eta = self.eta_seconds()
        if eta is not None:
            parts.append(f"ETA {_fmt_duration(eta)}")
        return " · ".join(parts)
