"""Curves drawn in the terminal (plotext) and into PNG files (matplotlib, headless).

Both draw one panel per metric, every run given overlaid in it, with x = step, and a
dashed vertical line where a retry took over a run's curve. plotext and matplotlib are
imported only here, and only when a plot is asked for: they cost 0.2-0.4 s to import.
"""

from __future__ import annotations

import math
from pathlib import Path

from launcher.errors import file_boundary
from launcher.metrics.render import Chosen


def _by_metric(chosen: list[Chosen]) -> dict[str, list[Chosen]]:
    groups: dict[str, list[Chosen]] = {}
    for c in chosen:
        groups.setdefault(c.series.name, []).append(c)
    return groups


def _restarts(c: Chosen) -> list[tuple[int, int]]:
    """(attempt, step) where each later attempt takes over this series."""
    s = c.series
    return [(s.attempts[i], s.steps[i]) for i in s.attempt_starts()]


_MARKERS = ("hd", "dot", "+", "x", "o")
_LINE_STYLES = ("-", "--", ":", "-.")


def integer_ticks(lo: int, hi: int, count: int = 6) -> list[int]:
    """At most `count` evenly spaced whole-number ticks from lo to hi: steps are integers,
    so a tick at 9.2 names no step."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(count - 1, 1)
    magnitude = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    stride = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    stride = max(int(stride), 1)
    first = -(-lo // stride) * stride
    ticks = list(range(first, hi + 1, stride))
    return ticks or [lo]


def same_curves(group: list[Chosen]) -> dict[int, int]:
    """Which curves of a panel another one hides: index -> the earlier index it repeats."""
    seen: list[tuple[int, tuple]] = []
    out: dict[int, int] = {}
    for k, c in enumerate(group):
        keep = _finite(c)
        key = (tuple(c.series.steps[i] for i in keep), tuple(c.series.values[i] for i in keep))
        twin = next((j for j, other in seen if other == key), None)
        if twin is not None:
            out[k] = twin
        else:
            seen.append((k, key))
    return out


def _finite(c: Chosen) -> list[int]:
    # A diverged loss (NaN, inf) would wreck the axis scale: plot the finite points only.
    values = c.series.values
    return [i for i in c.keep if math.isfinite(values[i])]


def _sample(keep: list[int], limit: int) -> list[int]:
    # A terminal has a few hundred columns: drawing 100k points only costs time.
    if len(keep) <= limit:
        return keep
    stride = len(keep) / limit
    picked = [keep[int(k * stride)] for k in range(limit)]
    return picked if picked[-1] == keep[-1] else [*picked, keep[-1]]


def terminal_plot(chosen: list[Chosen], *, width: int = 100, height: int = 24, color: bool = False) -> str:
    import plotext

    fig = plotext.figure
    panels = []
    for name, group in _by_metric(chosen).items():
        fig.clear()
        fig.theme("simple")  # foreground colours only: no white box on a dark terminal
        fig.plot_size(width, height)
        drawn = [(c, _sample(_finite(c), 4 * width)) for c in group]
        drawn = [(c, idx) for c, idx in drawn if idx]
        ys = [c.series.values[i] for c, idx in drawn for i in idx]
        for k, (c, idx) in enumerate(drawn):
            # The glyph tells overlaid runs apart, with or without colours.
            sig = fig.signal(
                [c.series.steps[i] for i in idx], [c.series.values[i] for i in idx], marker=_MARKERS[k % len(_MARKERS)]
            )
            sig.lines()
            if len(group) > 1:
                sig.label(c.run.run)
            fig.draw(sig)
            for attempt, step in _restarts(c):
                # A two-point signal rather than figure.line(), which paints a background.
                mark = fig.signal([step, step], [min(ys), max(ys)], marker="┊")
                mark.lines()
                mark.label(f"attempt {attempt}")
                fig.draw(mark)
        if drawn:
            steps = [c.series.steps[i] for c, idx in drawn for i in idx]
            ticks = integer_ticks(min(steps), max(steps))
            fig.ruler("x").ticks(ticks, [str(t) for t in ticks])
            # Top right, where a falling loss curve leaves room.
            right = max(c.series.steps[idx[-1]] for c, idx in drawn)
            fig.legend(x=right, y=max(ys), ha="right", va="top", relative=True)
        fig.title(" vs ".join(c.run.run for c in group))
        fig.label("step", axis="x")
        fig.label(name, axis="y")
        panels.append(fig.build().string(colorless=not color).rstrip("\n"))
    fig.clear()
    return "\n\n".join(panels) + "\n"


def write_png(chosen: list[Chosen], path: Path) -> None:
    """The curves as a PNG file (see png_figure)."""
    fig = png_figure(chosen)
    runs = list(dict.fromkeys(c.run.run for c in chosen))
    # PNG text chunks, so a file found later still says what it shows.
    metadata = {"Title": ", ".join(runs), "Description": "metrics: " + ", ".join(_by_metric(chosen))}
    with file_boundary(path, "write"):
        fig.savefig(path, format="png", metadata=metadata)


def png_figure(chosen: list[Chosen]):
    """A matplotlib figure: one panel per metric with labelled axes, the runs overlaid
    (raw curve faint, smoothed curve solid) and named in the legend and title."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    groups = _by_metric(chosen)
    runs = list(dict.fromkeys(c.run.run for c in chosen))
    fig = Figure(figsize=(9, 1 + 3.2 * len(groups)), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)  # attaches itself: no pyplot, no display, no global state
    axes = fig.subplots(len(groups), 1, squeeze=False)[:, 0]
    from matplotlib.ticker import MaxNLocator

    for ax, (name, group) in zip(axes, groups.items(), strict=False):
        twins = same_curves(group)
        for k, c in enumerate(group):
            s = c.series
            keep = _finite(c)
            steps = [s.steps[i] for i in keep]
            values = [s.values[i] for i in keep]
            smooth = len(values) > 50
            # A line style per run, so a curve drawn over another still shows; the legend
            # says when two are the same.
            style = _LINE_STYLES[k % len(_LINE_STYLES)]
            label = c.run.run + (f" (same as {group[twins[k]].run.run})" if k in twins else "")
            (line,) = ax.plot(
                steps,
                values,
                linewidth=1,
                alpha=0.3 if smooth else 1.0,
                label=None if smooth else label,
                linestyle=style,
                marker="o" if len(values) <= 30 else None,
                markersize=3,
            )
            if smooth:
                ax.plot(
                    steps,
                    [s.smoothed[i] for i in keep],
                    color=line.get_color(),
                    linewidth=1.6,
                    label=label,
                    linestyle=style,
                )
            for attempt, step in _restarts(c):
                ax.axvline(step, color=line.get_color(), linestyle="--", linewidth=1, alpha=0.7)
                ax.annotate(
                    f"attempt {attempt}",
                    (step, 1),
                    xycoords=("data", "axes fraction"),
                    xytext=(3, -3),
                    textcoords="offset points",
                    va="top",
                    fontsize=8,
                    color=line.get_color(),
                )
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("step")
        ax.set_ylabel(name)
        if len(groups) > 1:
            ax.set_title(name)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper right", fontsize=8)
    fig.suptitle(", ".join(runs))
    return fig


# Bottom to top, as an attempt spends its time: waiting (queued, or restarting after the
# attempt before it), starting, working; what was lost is the end of a failed one.
GOODPUT_STACK = ("queued", "restarting", "starting", "productive", "lost")
_GOODPUT_MARKERS = {"queued": "·", "restarting": "r", "starting": "s", "productive": "█", "lost": "x"}
_GOODPUT_COLORS = {
    "queued": "#9ca3af",
    "restarting": "#7c3aed",
    "starting": "#f59e0b",
    "productive": "#16a34a",
    "lost": "#dc2626",
}


def _attempt_label(row: dict) -> str:
    share = "-" if row["goodput"] is None else f"{row['goodput']:.0%}"
    return f"attempt {row['attempt']} ({share})"


def goodput_terminal_plot(
    runs: list[tuple[str, list[dict]]], *, width: int = 100, height: int = 24, color: bool = False
) -> str:
    """Per run, a bar per attempt (launcher.backends.goodput.by_attempt), its parts stacked
    in seconds, each part a glyph named in the legend; the x labels say each attempt's goodput."""
    import plotext

    fig = plotext.figure
    panels = []
    for name, rows in runs:
        fig.clear()
        fig.theme("simple")
        fig.plot_size(width, height)
        labels = [_attempt_label(r) for r in rows]
        base = [0.0] * len(rows)
        for part in GOODPUT_STACK:
            top = [b + r[part] for b, r in zip(base, rows)]
            # Floating bars (x, bottom, top), one signal per part: a labelled legend entry each.
            sig = fig.bar(labels, base, top, marker=_GOODPUT_MARKERS[part])
            sig.label(part)
            fig.draw(sig)
            base = top
        # Room above the tallest bar for the legend (its 5 lines and border, top left).
        tallest = max(base, default=0.0) or 1.0
        rows_free = max(height - 5, 8)
        fig.ruler("y").lim(0, tallest * rows_free / max(rows_free - 8, 1))
        fig.title(f"goodput of {name} by attempt")
        fig.label("seconds", axis="y")
        # The key again under the plot: plotext's legend box may be drawn over by a bar.
        key = "  ".join(f"{_GOODPUT_MARKERS[part]} {part}" for part in GOODPUT_STACK)
        panels.append(fig.build().string(colorless=not color).rstrip("\n") + f"\n   {key}")
    fig.clear()
    return "\n\n".join(panels) + "\n"


def write_goodput_png(runs: list[tuple[str, list[dict]]], path: Path) -> None:
    """The attempts' parts as stacked bars, a panel per run, into a PNG file."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 1 + 3.2 * len(runs)), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(runs), 1, squeeze=False)[:, 0]
    for ax, (name, rows) in zip(axes, runs, strict=True):
        labels = [_attempt_label(r) for r in rows]
        base = [0.0] * len(rows)
        for part in GOODPUT_STACK:
            heights = [r[part] for r in rows]
            ax.bar(labels, heights, bottom=base, label=part, color=_GOODPUT_COLORS[part])
            base = [b + h for b, h in zip(base, heights)]
        ax.set_ylabel("seconds")
        ax.set_title(f"goodput of {name} by attempt")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    metadata = {"Title": ", ".join(name for name, _ in runs), "Description": "goodput by attempt"}
    with file_boundary(path, "write"):
        fig.savefig(path, format="png", metadata=metadata)
