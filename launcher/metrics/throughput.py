"""A run's speed from its trainer's metric records, for its goodput (tokens/s and MFU).

Composer's SpeedMonitor logs `throughput/tokens_per_sec` (all ranks together) and, where
the model gives its FLOPs per batch and Composer knows the GPU's peak,
`throughput/device/mfu` (our MPT trainer gives its FLOPs on GPU: launcher.train.model).
Each value is already an average over a window of batches; the run's figure is their
median, so that the first windows (compilation, warm-up) and a slow last one do not
speak for the run.
"""

from __future__ import annotations

import math
import statistics

from launcher.backends.goodput import Throughput
from launcher.metrics.series import RunMetrics

TOKENS_PER_SEC = "throughput/tokens_per_sec"
MFU = "throughput/device/mfu"


def _median(rm: RunMetrics, name: str) -> float | None:
    series = rm.series.get(name)
    values = [v for v in series.values if math.isfinite(v)] if series is not None else []
    return float(statistics.median(values)) if values else None


def throughput_of(rm: RunMetrics) -> Throughput:
    return Throughput(tokens_per_sec=_median(rm, TOKENS_PER_SEC), mfu=_median(rm, MFU))
