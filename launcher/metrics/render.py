"""Text outputs of `launcher metrics`: the list of metrics, the table, and exact JSON/CSV.

JSON and CSV share one tidy shape, one object or row per point:
run, metric, step, value, time (Unix seconds, null/empty when unknown), attempt.
Floats are written with repr, so they parse back to the very same values
(a diverged loss stays NaN/Infinity, as Python's json reads and writes it).
"""

from __future__ import annotations

import bisect
import csv
import io
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from launcher.metrics.series import RunMetrics, Series, Summary, summarize, thin

FIELDS = ("run", "metric", "step", "value", "time", "attempt")
LIST_FIELDS = ("run", "metric", "points", "last_step", "last_value")

DEFAULT_TABLE_ROWS = 20


@dataclass(frozen=True)
class Chosen:
    """A run's series picked for output, with the indices the --every/--last filters keep."""

    run: RunMetrics
    series: Series
    keep: list[int]


def choose(runs: list[RunMetrics], names: list[str], *, every: int | None, last: int | None) -> list[Chosen]:
    out = []
    for rm in runs:
        for name in names:
            series = rm.series.get(name)
            if series is not None:
                out.append(Chosen(rm, series, thin(series, every=every, last=last)))
    return out


# --- exact outputs ---------------------------------------------------------------------------


def _stretches(xs: list[int]) -> list[tuple[int, int]]:
    """The [lo, hi) ranges of equal neighbouring values."""
    if not xs:
        return []
    if xs.count(xs[0]) == len(xs):  # one attempt, the usual case: checked in C
        return [(0, len(xs))]
    cuts = [i for i in range(1, len(xs)) if xs[i] != xs[i - 1]]
    return list(zip([0, *cuts], [*cuts, len(xs)], strict=False))


_CHUNK_POINTS = 4096


def json_chunks(chosen: list[Chosen]) -> Iterator[str]:
    """The text of to_json in pieces of a few thousand points: printed piece by piece,
    100k points are never copied as one string of megabytes (each such copy costs more
    in fresh memory than joining the points does).

    One point a line, the same text json.dumps writes for each object: each point's
    text (jsontext, kept in the cached index) joined with the text between two points,
    several times faster than json.dumps or one % per point."""
    yield "["
    between = "\n"
    for c in chosen:
        s = c.series
        whole = len(c.keep) == len(s)
        texts = s.json_points(None if whole else c.keep)
        attempts = s.attempts if whole else [s.attempts[i] for i in c.keep]
        head = '{"run": ' + json.dumps(c.run.run) + ', "metric": ' + json.dumps(s.name) + ", "
        for lo, hi in _stretches(attempts):
            tail = ', "attempt": %d}' % attempts[lo]  # noqa: UP031 - the braces are JSON's, not format's
            sep = tail + ",\n" + head
            for a in range(lo, hi, _CHUNK_POINTS):
                yield between + head + sep.join(texts[a : min(a + _CHUNK_POINTS, hi)]) + tail
                between = ",\n"
    yield "]" if between == "\n" else "\n]"


def to_json(chosen: list[Chosen]) -> str:
    return "".join(json_chunks(chosen))


def to_csv(chosen: list[Chosen]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(FIELDS)
    for c in chosen:
        s = c.series
        for i in c.keep:
            t = s.times[i]
            w.writerow(
                (c.run.run, s.name, s.steps[i], repr(s.values[i]), "" if math.isnan(t) else repr(t), s.attempts[i])
            )
    return buf.getvalue()


def list_records(runs: list[RunMetrics]) -> Iterator[tuple[str, str, int, int, float]]:
    for rm in runs:
        for name in sorted(rm.series):
            s = rm.series[name]
            yield rm.run, name, len(s), s.steps[-1], s.values[-1]


def list_json(runs: list[RunMetrics]) -> str:
    return json.dumps([dict(zip(LIST_FIELDS, r, strict=False)) for r in list_records(runs)], indent=2)


def list_csv(runs: list[RunMetrics]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(LIST_FIELDS)
    for run, name, n, step, value in list_records(runs):
        w.writerow((run, name, n, step, repr(value)))
    return buf.getvalue()


# --- for people ---------------------------------------------------------------------------


def columns(header: tuple[str, ...], rows: Sequence[tuple[str, ...]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def fmt(r: tuple[str, ...]) -> str:
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=False))]
        return "  ".join(cells).rstrip()

    return [fmt(header), *(fmt(r) for r in rows)]


def num(v: float) -> str:
    return f"{v:.6g}"


def elapsed(seconds: float) -> str:
    if math.isnan(seconds):
        return "-"
    s = round(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def run_heading(rm: RunMetrics) -> str:
    parts = [f"run {rm.run} ({rm.status})", f"from {rm.source}"]
    if rm.attempts > 1:
        parts.append(f"{rm.attempts} attempts")
    return " · ".join(parts)


def list_table(runs: list[RunMetrics]) -> str:
    out = []
    for rm in runs:
        rows = [(name, str(n), str(step), num(value)) for _, name, n, step, value in list_records([rm])]
        out += [run_heading(rm), *columns(("METRIC", "POINTS", "LAST STEP", "LAST VALUE"), rows, {1, 2, 3}), ""]
    return "\n".join(out).rstrip() + "\n"


def default_rows(series: Series, limit: int = DEFAULT_TABLE_ROWS) -> list[int]:
    """Evenly spaced rows over the whole curve, always with the first and last points and
    the first point of each attempt, so a long run fits on a screen."""
    n = len(series)
    if n <= limit + 5:
        return list(range(n))
    picks = {round(k * (n - 1) / (limit - 1)) for k in range(limit)}
    return sorted(picks.union(series.attempt_starts()))


def trend_text(summary: Summary, series: Series) -> str:
    text = f"smoothed {num(summary.smoothed)}"
    if summary.change is None:
        return text
    arrow = "→" if abs(summary.change) < 0.005 else ("↓" if summary.change < 0 else "↑")
    span = series.steps[-1] - series.steps[-1 - max(len(series) // 10, 1)]
    return f"{arrow} {text} ({summary.change * 100:+.1f}% over the last {span} step{'s' if span != 1 else ''})"


def summary_line(series: Series) -> str:
    s = summarize(series)
    return (
        f"first {num(s.first[1])} @ step {s.first[0]} · last {num(s.last[1])} @ step {s.last[0]} · "
        f"min {num(s.min[1])} @ step {s.min[0]} · trend {trend_text(s, series)}"
    )


def compare_table(group: list[Chosen], *, rows: list[list[int]] | None = None, note: str | None = None) -> str:
    """One metric of several runs side by side: a STEP column, then a column per run
    (blank where a run has no point at that step), then each run's summary line.
    `rows` gives each run's rows shown (by default those --every/--last kept)."""
    name = group[0].series.name
    values: dict[int, dict[int, float]] = {}
    for k, c in enumerate(group):
        for i in c.keep if rows is None else rows[k]:
            # A retry redoes steps: the attempt that took over has the last word.
            values.setdefault(c.series.steps[i], {})[k] = c.series.values[i]
    header = ("STEP", *(c.run.run for c in group))
    body = [
        (str(step), *(num(at[k]) if k in at else "" for k in range(len(group)))) for step, at in sorted(values.items())
    ]
    out = [f"{name} · " + " vs ".join(run_heading(c.run) for c in group) + (f" · {note}" if note else "")]
    out += columns(header, body, set(range(len(header))))
    out += [f"{c.run.run}: {summary_line(c.series)}" for c in group]
    return "\n".join(out) + "\n"


def table(c: Chosen, *, rows: list[int] | None = None, note: str | None = None) -> str:
    """One series as STEP/VALUE/SMOOTHED/TIME rows, restarts marked, then a summary line.
    `rows` overrides the rows shown (by default those --every/--last kept)."""
    s = c.series
    smooth = s.smoothed
    t0 = s.times[0]
    shown = c.keep if rows is None else rows
    starts = s.attempt_starts()
    body: list[tuple[str, ...]] = []
    marks: dict[int, str] = {}
    prev = None
    for i in shown:
        if prev is not None and s.attempts[i] != s.attempts[prev]:
            # The first point of the attempt that took over, even if that row is not shown.
            first = starts[bisect.bisect_right(starts, prev)]
            marks[len(body)] = f"↻ attempt {s.attempts[first]} takes over at step {s.steps[first]}"
        prev = i
        body.append((str(s.steps[i]), num(s.values[i]), num(smooth[i]), elapsed(s.times[i] - t0)))
    lines = columns(("STEP", "VALUE", "SMOOTHED", "TIME"), body, {0, 1, 2, 3})
    out = [f"{s.name} · {run_heading(c.run)} · {len(s)} points" + (f" · {note}" if note else "")]
    out.append(lines[0])
    for k, line in enumerate(lines[1:]):
        if k in marks:
            out.append(f"  {marks[k]}")
        out.append(line)
    out.append(summary_line(s))
    return "\n".join(out) + "\n"
