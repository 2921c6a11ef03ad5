"""A run's metrics as curves: merging attempts, choosing metrics, thinning and smoothing."""

from __future__ import annotations

import bisect
import difflib
import fnmatch
import functools
import math
import operator
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress
from typing import Any

from launcher.errors import InputError
from launcher.metrics.index import Columns, Segment
from launcher.metrics.jsontext import point_texts
from launcher.metrics.records import DEFAULT_METRIC, FIT_START


@dataclass
class Series:
    """One metric's curve: parallel lists, ordered by step, one point per step."""

    name: str
    steps: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    attempts: list[int] = field(default_factory=list)
    pieces: list[tuple[Columns, int, int]] = field(default_factory=list, repr=False, compare=False)
    """Where the points came from, in order: slices [lo, hi) of segments' columns. Lets
    json_points reuse the text the columns keep (and the cache carries) for them."""

    def __len__(self) -> int:
        return len(self.steps)

    @functools.cached_property
    def smoothed(self) -> list[float]:
        return ema(self.values, smoothing_weight(len(self.values)))

    def attempt_starts(self) -> list[int]:
        """Indices where a later attempt's points begin (attempts only grow along a curve)."""
        return [bisect.bisect_left(self.attempts, a) for a in sorted(set(self.attempts))[1:]]

    def json_points(self, keep: list[int] | None = None) -> list[str]:
        """The JSON text (jsontext.point_texts) of every point, or of the points at
        `keep`. The whole curve's text comes from its columns, which format it once and
        keep it; a subset whose text is not kept yet is formatted here and not kept (a
        --last 10 need not pay for 100k points)."""
        covered = sum(hi - lo for _, lo, hi in self.pieces) == len(self)
        if keep is None or len(keep) == len(self):
            return self._kept_texts() if covered else point_texts(self.steps, self.values, self.times)
        if covered and all(cols.json_count >= hi for cols, _, hi in self.pieces):
            texts = self._kept_texts()
            return [texts[i] for i in keep]
        return point_texts([self.steps[i] for i in keep], [self.values[i] for i in keep], [self.times[i] for i in keep])

    def _kept_texts(self) -> list[str]:
        out: list[str] = []
        for cols, lo, hi in self.pieces:
            texts = cols.json_points()
            out += texts if lo == 0 and hi == len(texts) else texts[lo:hi]
        return out

    def _truncate(self, n: int) -> None:
        del self.steps[n:], self.values[n:], self.times[n:], self.attempts[n:]
        pieces, self.pieces, total = self.pieces, [], 0
        for cols, lo, hi in pieces:
            if total >= n:
                break
            hi = min(hi, lo + n - total)
            self.pieces.append((cols, lo, hi))
            total += hi - lo

    def _extend(
        self, cols: Columns, lo: int, hi: int, steps: list[int], values: list[float], times: list[float], attempt: int
    ) -> None:
        self.steps += steps[lo:hi]
        self.values += values[lo:hi]
        self.times += times[lo:hi]
        self.attempts += [attempt] * (hi - lo)
        self.pieces.append((cols, lo, hi))


@dataclass(frozen=True)
class Restart:
    """Where a later attempt's points take over the curve."""

    attempt: int
    step: int
    time: float


class MergedSeries(Mapping[str, Series]):
    """Every metric of a run, each merged into one curve only when it is looked up: a
    100k-step run logs a dozen metrics, and a call usually shows one."""

    def __init__(self, labelled: list[tuple[int, Segment]]):
        self._labelled = labelled
        self._names = sorted({name for _, seg in labelled for name in seg.metrics})
        self._merged: dict[str, Series] = {}

    def __getitem__(self, name: str) -> Series:
        if name not in self._merged:
            if name not in self._names:
                raise KeyError(name)
            out = Series(name)
            for attempt, seg in self._labelled:
                cols = seg.metrics.get(name)
                if cols is not None:
                    _append(out, cols, attempt)
            self._merged[name] = out
        return self._merged[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


@dataclass
class RunMetrics:
    run: str
    status: str
    source: str
    """Where the points came from: "metrics.jsonl" or "logs"."""
    series: Mapping[str, Series]
    restarts: list[Restart]
    fit: dict[str, Any] | None = None
    """The latest fit_start event (max_duration, max_batches), if any."""
    notes: list[str] = field(default_factory=list)
    """Why some points may be missing, for the user."""

    @property
    def attempts(self) -> int:
        """How many attempts the curves are made of."""
        return len(self.restarts) + 1


def merge(labelled: list[tuple[int, Segment]]) -> tuple[MergedSeries, list[Restart], dict[str, Any] | None]:
    """One continuous curve per metric from segments in the order they ran.

    A segment that starts at or before a step already seen is a restart (a retry, or a
    resumption from a checkpoint): like TensorBoard's purge of orphaned steps, the later
    points replace the earlier points from that step on, since the model that produced
    those was thrown away. A restart is marked where a new attempt takes over.
    """
    restarts: list[Restart] = []
    fit = None
    last_attempt = None
    for attempt, seg in labelled:
        for event in seg.events:
            if event.get("event") == FIT_START:
                fit = event
        if not seg.metrics:
            continue
        if last_attempt is not None and attempt != last_attempt:
            first = min(seg.metrics.values(), key=lambda c: c.steps[0])
            restarts.append(Restart(attempt, first.steps[0], first.times[0]))
        last_attempt = attempt
    return MergedSeries(labelled), restarts, fit


def _append(out: Series, cols: Columns, attempt: int) -> None:
    # Split into strictly increasing runs (usually one: the whole list) and add each in
    # bulk; a run starting at or before the last step kept replaces the points from there.
    steps, values, times = cols.steps.tolist(), cols.values.tolist(), cols.times.tolist()
    breaks = list(compress(range(1, len(steps)), map(operator.ge, steps, steps[1:])))  # steps[i-1] >= steps[i], in C
    for a, b in zip([0, *breaks], [*breaks, len(steps)], strict=False):
        if out.steps and steps[a] <= out.steps[-1]:
            out._truncate(bisect.bisect_left(out.steps, steps[a]))
        out._extend(cols, a, b, steps, values, times, attempt)


TRACKER_TRAINING_LOSS = "loss"


def default_metric(names: list[str]) -> str:
    """The curve people mean by "the loss": Composer's total training loss, else the training
    loss as transformers names it in a tracker (`loss`, beside `eval_loss`), else any loss."""
    if DEFAULT_METRIC in names:
        return DEFAULT_METRIC
    if TRACKER_TRAINING_LOSS in names:
        return TRACKER_TRAINING_LOSS
    losses = sorted(n for n in names if "loss" in n)
    return losses[0] if losses else sorted(names)[0]


def resolve_metrics(requested: list[str], available: list[str], where: str) -> list[str]:
    """Metric names for the user's --metric values (exact names or globs like 'loss/*'),
    in the order asked; an unknown name is an InputError with a did-you-mean."""
    if not requested:
        return [default_metric(available)]
    chosen: list[str] = []
    for want in requested:
        if any(c in want for c in "*?["):
            matches = sorted(n for n in available if fnmatch.fnmatchcase(n, want))
        else:
            matches = [want] if want in available else []
        if not matches:
            close = difflib.get_close_matches(want, available, n=3, cutoff=0.6)
            hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
            raise InputError(
                f"no metric {want!r} in {where}{hint}",
                hint=None
                if close
                else f"its metrics: {', '.join(sorted(available)[:12])}" + (" …" if len(available) > 12 else ""),
            )
        chosen += [m for m in matches if m not in chosen]
    return chosen


def thin(series: Series, *, every: int | None = None, last: int | None = None) -> list[int]:
    """The indices --every K (points whose step is a multiple of K) and --last N keep."""
    keep: Sequence[int] = range(len(series))
    if every and every > 1:
        keep = [i for i in keep if series.steps[i] % every == 0]
    if last is not None:
        keep = keep[max(len(keep) - last, 0) :]
    return list(keep)


def smoothing_weight(n: int) -> float:
    """An EMA weight whose window is about 5% of the curve: enough to show the trend of a
    noisy loss without hiding a short run's shape."""
    window = min(max(n / 20, 1.0), 200.0)
    return 1.0 - 2.0 / (window + 1.0)


def ema(values: list[float], weight: float) -> list[float]:
    """Debiased exponential moving average (TensorBoard's smoothing); non-finite values
    are skipped rather than poisoning the rest of the curve."""
    out: list[float] = []
    append = out.append
    acc = norm = 0.0
    rest = 1.0 - weight
    inf = math.inf
    for v in values:
        if -inf < v < inf:  # finite; one comparison chain instead of a call, on 100k points
            acc = weight * acc + rest * v
            norm = weight * norm + rest
        append(acc / norm if norm else v)
    return out


@dataclass(frozen=True)
class Summary:
    first: tuple[int, float]
    last: tuple[int, float]
    min: tuple[int, float]
    smoothed: float
    change: float | None
    """Relative change of the smoothed curve over its last tenth, or None if too short."""


def summarize(series: Series) -> Summary:
    smooth = series.smoothed
    values = series.values
    finite = [v for v in values if -math.inf < v < math.inf]
    lo = values.index(min(finite)) if finite else 0
    change = None
    back = max(len(series) // 10, 1)
    if len(series) > back:
        before = smooth[-1 - back]
        if before and math.isfinite(before):
            change = (smooth[-1] - before) / abs(before)
    return Summary(
        first=(series.steps[0], values[0]),
        last=(series.steps[-1], values[-1]),
        min=(series.steps[lo], values[lo]),
        smoothed=smooth[-1],
        change=change,
    )
