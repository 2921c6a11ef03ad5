"""A run's metrics as points: what the trainer logged (its `@@launcher.metrics` records,
or the run's metrics.jsonl), read as `launcher metrics` reads them (launcher.metrics):
every attempt, merged into one curve per metric."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from launcher.backends.base import Backend, Run
from launcher.sdk.runs import RunRef, resolve

__all__ = ["MetricPoint", "MetricPoints", "get_run_metrics"]

# The trainer's records are rank 0's (launcher.metrics.index reads rank 0's only).
METRICS_RANK = 0


@dataclass(frozen=True)
class MetricPoint:
    metric: str
    step: int
    value: float
    time: float
    """When it was logged, in seconds since the epoch (as `launcher metrics -o json`)."""
    rank: int
    attempt: int = 1
    """Which attempt logged it (a retry that took over is attempt 2 from its step on)."""


class MetricPoints(list):
    """MetricPoints, by metric then step. `notes`: why some may be missing (an attempt
    whose log could not be read)."""

    def __init__(self, points: Iterable[MetricPoint] = (), notes: Iterable[str] = ()):
        super().__init__(points)
        self.notes = list(notes)

    def to_pandas(self):
        """A pandas DataFrame, a row per point: metric, step, value, time, rank, attempt."""
        try:
            import pandas
        except ImportError:
            raise ImportError("to_pandas() needs pandas: pip install pandas") from None
        columns = ["metric", "step", "value", "time", "rank", "attempt"]
        return pandas.DataFrame([[getattr(p, c) for c in columns] for p in self], columns=columns)


def collect(backend: Backend, run: Run, *, follow: bool = False):
    """The launcher.metrics Collector of one run; refresh() reads what is new."""
    from launcher.metrics.collect import Collector

    return Collector(backend, run, follow=follow)


def with_throughput(backend: Backend, run: Run) -> Run:
    """`run` with its tokens/s and MFU from its metric records (its goodput shows them);
    where they cannot be read, without (its goodput says "-")."""
    from launcher.errors import LauncherError
    from launcher.metrics.throughput import throughput_of

    try:
        collector = collect(backend, run)
        try:
            run.throughput = throughput_of(collector.refresh())
        finally:
            collector.close()
    except LauncherError:
        pass  # no logs to read (pods gone, no archive): the speed is not known
    return run


# How many recent runs latest_with_metrics looks through.
LATEST_SCAN = 20


def latest_with_metrics() -> tuple[Backend, Run, str | None]:
    """The latest run, unless it ended without metrics (a hello-world run): then the latest
    of the recent runs that has some. The third item says so when it is not the latest."""
    from launcher.errors import LauncherError
    from launcher.sdk.index import RunIndex

    latest = resolve(None)
    if not latest[1].status.is_terminal:
        return (*latest, None)  # still going: its metrics may be on their way
    for name in RunIndex().names()[:LATEST_SCAN]:
        try:
            backend, run = latest if name == latest[1].name else resolve(name)
            collector = collect(backend, run)
            try:
                has = bool(collector.refresh().series)
            finally:
                collector.close()
        except LauncherError:
            continue
        if has:
            if run.name != latest[1].name:
                return backend, run, f"showing {run.name}, the latest run with metrics ({latest[1].name} has none)"
            return backend, run, None
    return (*latest, None)


def get_run_metrics(run: RunRef | None, metric: str | Iterable[str] | None = None) -> MetricPoints:
    """The run's metric points: every metric, or `metric` (a name, a glob like 'loss/*',
    or several; an unknown one is an InputError with a did-you-mean)."""
    from launcher.metrics.series import resolve_metrics

    backend, record = resolve(run)
    collector = collect(backend, record)
    try:
        metrics = collector.refresh()
    finally:
        collector.close()
        backend.close()
    available = sorted(metrics.series)
    if metric is None:
        names = available
    else:
        wanted = [metric] if isinstance(metric, str) else list(metric)
        names = resolve_metrics(wanted, available, f"run {record.name}") if available else []
    points = []
    for name in names:
        s = metrics.series[name]
        points += [
            MetricPoint(name, step, value, at, METRICS_RANK, attempt)
            for step, value, at, attempt in zip(s.steps, s.values, s.times, s.attempts)
        ]
    return MetricPoints(points, metrics.notes)
