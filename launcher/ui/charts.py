"""Metric curves for the charts: read with launcher.metrics, downsampled with LTTB.

One Collector is kept per run while the dashboard runs, so a refresh (the chart polls
while the run trains) parses only the bytes appended since the last one; a curve that
has not changed since is not downsampled again.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from typing import Any, Literal

import numpy as np

from launcher.backends.base import Backend, Run
from launcher.errors import LauncherError
from launcher.metrics.collect import Collector
from launcher.metrics.series import Series, ema, resolve_metrics, smoothing_weight
from launcher.metrics.throughput import throughput_of
from launcher.ui.lttb import lttb

DEFAULT_POINTS = 2000
MAX_POINTS = 20000
_KEEP_COLLECTORS = 32
_KEEP_CURVES = 256

# An EMA weight in [0, 1), or "auto": the window `launcher metrics` uses for the curve's length.
Smoothing = float | Literal["auto"]


def _finite_or_none(values: list[float]) -> list[float | None]:
    # JSON has no NaN or Infinity: a gap in the chart (null) is what uPlot draws for them.
    return [v if -math.inf < v < math.inf else None for v in values]


def parse_smoothing(text: str | None) -> Smoothing:
    """'auto' (the window `launcher metrics` uses), or an EMA weight in [0, 1)."""
    if text in (None, "", "auto"):
        return "auto"
    weight = float(text)
    if not 0.0 <= weight < 1.0:
        raise ValueError("smoothing must be 'auto' or a number from 0 to below 1")
    return weight


def downsample(series: Series, keep: np.ndarray, smoothing: Smoothing) -> dict[str, Any]:
    """A curve as the chart draws it: the points at `keep` (LTTB's choice), with the
    smoothed curve (computed over every point, then sampled at the same steps)."""
    weight = smoothing_weight(len(series)) if isinstance(smoothing, str) else smoothing
    steps, values = series.steps, series.values
    out: dict[str, Any] = {
        "metric": series.name,
        "points": len(series),
        "steps": [steps[i] for i in keep.tolist()],
        "values": _finite_or_none([values[i] for i in keep.tolist()]),
        "smoothing": weight,
    }
    if weight > 0:
        smooth = ema(values, weight)
        out["smoothed"] = _finite_or_none([smooth[i] for i in keep.tolist()])
    return out


class ChartData:
    """Per run, a Collector; per curve that did not change, its downsampled form."""

    def __init__(self) -> None:
        self._collectors: OrderedDict[str, tuple[Collector, threading.Lock]] = OrderedDict()
        self._curves: OrderedDict[tuple, Any] = OrderedDict()
        """Downsampled curves by (shape, smoothing), and LTTB's indices by shape."""
        self._lock = threading.Lock()

    def _collector(self, backend: Backend, run: Run) -> tuple[Collector, threading.Lock]:
        key = f"{backend.name}:{run.name}:{run.created_at.isoformat()}"
        with self._lock:
            entry = self._collectors.get(key)
            if entry is None:
                entry = (Collector(backend, run), threading.Lock())
                self._collectors[key] = entry
                while len(self._collectors) > _KEEP_COLLECTORS:
                    _, (old, _) = self._collectors.popitem(last=False)
                    old.close()
            self._collectors.move_to_end(key)
            return entry

    def payload(
        self,
        backend: Backend,
        run: Run,
        wanted: list[str],
        *,
        points: int = DEFAULT_POINTS,
        smoothing: Smoothing = "auto",
    ) -> dict[str, Any]:
        """The run's metric list and the chosen curves. An unknown metric raises
        InputError (with a did-you-mean)."""
        collector, lock = self._collector(backend, run)
        with lock:
            rm = collector.refresh(run)
        names = sorted(rm.series)
        chosen = resolve_metrics(wanted, names, f"run {run.name}") if names else []
        series = []
        for name in chosen:
            s = rm.series[name]
            # The same curve as last time (a finished run, a poll between two steps): reuse
            # what was sent; another smoothing of it: reuse the points LTTB chose.
            shape = (run.name, run.created_at, name, len(s), s.steps[-1], s.values[-1], s.attempts[-1], points)
            with self._lock:
                curve = self._curves.get((*shape, smoothing))
                keep = self._curves.get(shape)
            if curve is None:
                if keep is None:
                    keep = lttb(np.asarray(s.steps), np.asarray(s.values), points)
                curve = downsample(s, keep, smoothing)
                with self._lock:
                    self._curves[(*shape, smoothing)] = curve
                    self._curves[shape] = keep
                    while len(self._curves) > _KEEP_CURVES:
                        self._curves.popitem(last=False)
            series.append(curve)
        return {
            "run": run.name,
            "status": run.status.value,
            "source": rm.source,
            "metrics": names,  # names only: counting every curve's points would merge them all
            "restarts": [{"attempt": r.attempt, "step": r.step} for r in rm.restarts],
            "series": series,
            "notes": rm.notes,
        }

    def with_throughput(self, backend: Backend, run: Run) -> Run:
        """`run` with its tokens/s and MFU (its goodput's), from the records its charts read;
        without them where its logs cannot be read (the page says "-")."""
        collector, lock = self._collector(backend, run)
        try:
            with lock:
                rm = collector.refresh(run)
        except LauncherError:
            return run
        run.throughput = throughput_of(rm)
        return run

    def close(self) -> None:
        with self._lock:
            for collector, _ in self._collectors.values():
                collector.close()
            self._collectors.clear()
