"""`launcher metrics`: a run's loss curves as tables, terminal plots, PNGs, JSON and CSV."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from launcher.cli.common import complete_run_names, info
from launcher.errors import InputError, LauncherError
from launcher.metrics import render
from launcher.metrics.export import export
from launcher.metrics.plot import terminal_plot, write_png
from launcher.metrics.render import num
from launcher.metrics.series import resolve_metrics
from launcher.sdk.metrics import collect, latest_with_metrics, with_throughput
from launcher.sdk.runs import resolve

if TYPE_CHECKING:
    from launcher.backends.base import Backend, Run
    from launcher.metrics.collect import Collector
    from launcher.metrics.render import Chosen
    from launcher.metrics.series import RunMetrics

FOLLOW_SECONDS = 1.0


def _complete(ctx, param, incomplete):
    """Run names for shell completion (common is imported only when completing)."""
    return complete_run_names(ctx, param, incomplete)


@click.command("metrics")
@click.argument("runs", nargs=-1, shell_complete=_complete)
@click.option(
    "-m",
    "--metric",
    "metric_names",
    multiple=True,
    metavar="NAME",
    help="Metric to show, or a glob like 'loss/*'; repeatable. Default: loss/train/total.",
)
@click.option("--list", "list_only", is_flag=True, help="List the metric names with point counts and last values.")
@click.option("--last", type=click.IntRange(min=1), metavar="N", help="Only the last N points.")
@click.option("--every", type=click.IntRange(min=1), metavar="K", help="Only points whose step is a multiple of K.")
@click.option(
    "-o",
    "--output",
    type=click.Choice(["table", "json", "csv"]),
    help="table (the default, except with --png alone), or json and csv, which hold every point "
    "exactly: run, metric, step, value, time, attempt.",
)
@click.option("--plot", is_flag=True, help="Draw the curves in the terminal.")
@click.option(
    "--png",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Write the curves to a PNG file, the runs given overlaid.",
)
@click.option("-f", "--follow", is_flag=True, help="Keep the table (and --plot) updating while the run trains.")
@click.option(
    "--to",
    "export_to",
    type=(click.Choice(["mlflow", "tensorboard"]), str),
    metavar="mlflow|tensorboard DEST",
    help="Export every point of the runs instead: to an MLflow tracking URI, or a TensorBoard log directory.",
)
@click.option("--experiment", default="launcher", show_default=True, help="With --to mlflow: the experiment name.")
@click.option(
    "--goodput",
    is_flag=True,
    help="Where each attempt's time went instead (queued, restarting, starting, productive, lost): "
    "a table, with --plot stacked bars in the terminal, with --png FILE a PNG.",
)
def metrics(
    runs: tuple[str, ...],
    metric_names: tuple[str, ...],
    list_only: bool,
    last: int | None,
    every: int | None,
    output: str | None,
    plot: bool,
    png: Path | None,
    follow: bool,
    export_to: tuple[str, str] | None,
    experiment: str,
    goodput: bool,
) -> None:
    """Show the metrics of RUNS: run names, spec names (the latest run of each) or globs.
    By default, the latest run that has metrics. Several runs share one table, a column
    per run, and are overlaid in plots.

    Points come from the run's metrics.jsonl when it has one, else from its logs, across
    every attempt: a retried run is one curve, with the step where a retry took over
    marked.
    """

    # `--png FILE` alone writes the file and prints nothing else.
    quiet = png is not None and output is None and not plot and not follow
    output = output or "table"
    if plot and output != "table":
        raise InputError("--plot draws in the terminal and goes with the table output; use --png FILE with -o json/csv")
    if follow and output != "table":
        raise InputError("--follow updates the table and plot; -o json/csv print every point once, without it")
    if list_only and (plot or png or follow):
        raise InputError("--list only lists metric names; leave out --plot, --png and --follow")

    if goodput:
        asked = {
            "-m": metric_names,
            "--list": list_only,
            "--last": last,
            "--every": every,
            "--follow": follow,
            "--to": export_to,
        }
        clashing = [flag for flag, value in asked.items() if value]
        if clashing:
            raise InputError(f"--goodput shows each attempt's time, not metric points; leave out {', '.join(clashing)}")
        targets = [resolve(name) for name in dict.fromkeys(runs)] if runs else [resolve(None)]
        try:
            runs_read = [with_throughput(backend, run) for backend, run in targets]  # tokens/s, MFU
            _goodput(runs_read, output=None if quiet else output, plot=plot, png=png)
        finally:
            for backend in {id(b): b for b, _ in targets}.values():
                backend.close()
        return
    if runs:
        targets = [resolve(name) for name in dict.fromkeys(runs)]
    else:
        backend, run, note = latest_with_metrics()
        if note:
            info(note)
        targets = [(backend, run)]
    collectors = [collect(backend, run, follow=follow) for backend, run in targets]
    try:
        if export_to is not None:
            _export([c.refresh() for c in collectors], *export_to, experiment)
        elif follow:
            _follow(collectors, targets, list(metric_names), last=last, every=every, plot=plot, png=png)
        else:
            _once(
                [c.refresh() for c in collectors],
                list(metric_names),
                list_only=list_only,
                last=last,
                every=every,
                output=None if quiet else output,
                plot=plot,
                png=png,
            )
    finally:
        for c in collectors:
            c.close()
        for backend in {id(b): b for b, _ in targets}.values():
            backend.close()


def _goodput(runs: list[Run], *, output: str | None, plot: bool, png: Path | None) -> None:
    """Each run's attempts, part by part (launcher.backends.goodput.by_attempt)."""
    import json

    from launcher.backends.goodput import PARTS, by_attempt
    from launcher.cli.describe import goodput_line
    from launcher.metrics.plot import GOODPUT_STACK, goodput_terminal_plot, write_goodput_png

    split = [(run, by_attempt(run)) for run in runs]
    named = [(run.name, rows) for run, rows in split]
    if png is not None:
        write_goodput_png(named, png)
        click.echo(f"✔ Wrote {png}", err=True)
    if output == "json":
        records = [{"run": run.name, "goodput": run.goodput().record(), "attempts": rows} for run, rows in split]
        click.echo(json.dumps(records, indent=2))
    elif output == "csv":
        columns = ["run", "attempt", "status", *PARTS, "total", "goodput"]
        lines = [",".join(columns)]
        for run, rows in split:
            for r in rows:
                values = {"run": run.name, **r}
                lines.append(",".join("" if values[c] is None else str(values[c]) for c in columns))
        click.echo("\n".join(lines))
    elif output == "table":
        if plot:
            cols, height = shutil.get_terminal_size((100, 40))
            text = goodput_terminal_plot(
                named, width=max(min(cols, 140), 40), height=max(min(24, height - 12), 14), color=sys.stdout.isatty()
            )
            click.echo(text, nl=False)
        for run, rows in split:
            click.echo(f"{run.name}: {goodput_line(run.goodput())}")
            head = ["ATTEMPT", "STATUS", *(p.upper() for p in GOODPUT_STACK), "TOTAL", "GOODPUT"]
            table = [head]
            for r in rows:
                share = "-" if r["goodput"] is None else f"{r['goodput']:.0%}"
                seconds = [f"{r[p]:.1f}" for p in (*GOODPUT_STACK, "total")]
                table.append([str(r["attempt"]), r["status"] or "-", *seconds, share])
            widths = [max(len(row[i]) for row in table) for i in range(len(head))]
            for row in table:
                click.echo("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
            click.echo("  (seconds; GOODPUT: the productive share of the attempt's time)")


def _export(results: list[RunMetrics], target: str, dest: str, experiment: str) -> None:
    for rm in results:
        done = export(rm, target, dest, experiment)
        click.echo(f"✔ Exported {done.points:,} points of {done.metrics} metrics of {done.run} to {done.where}")


def _require_metrics(results: list[RunMetrics]) -> None:
    for rm in results:
        if not rm.series and rm.notes:
            # No curve because no log could be read (its pods are gone, no archive): say why.
            raise LauncherError("; ".join(rm.notes))
        if not rm.series:
            ended = rm.status in ("COMPLETED", "FAILED", "STOPPED")
            raise InputError(
                f"run {rm.run} {'ended' if ended else 'has'} ({rm.status}) without any metrics"
                if ended
                else f"run {rm.run} has no metrics yet ({rm.status})",
                hint=None
                if ended
                else f"the trainer logs them as it trains; `launcher metrics {rm.run} --follow` waits for them",
            )


def _names(results: list[RunMetrics], wanted: list[str]) -> list[str]:
    available = sorted({n for rm in results for n in rm.series})
    where = f"run {results[0].run}" if len(results) == 1 else "runs " + ", ".join(rm.run for rm in results)
    return resolve_metrics(wanted, available, where)


def _once(
    results: list[RunMetrics],
    wanted: list[str],
    *,
    list_only: bool,
    last: int | None,
    every: int | None,
    output: str | None,
    plot: bool,
    png: Path | None,
) -> None:
    """Print `output` (None: nothing, only write the PNG)."""

    _require_metrics(results)
    for rm in results:
        for message in rm.notes:
            click.echo(f"! {message}", err=True)
    if list_only:
        listing = render.list_json if output == "json" else render.list_csv if output == "csv" else render.list_table
        text = listing(results)
        click.echo(text, nl=output == "json")
        return
    chosen = render.choose(results, _names(results, wanted), every=every, last=last)
    if png is not None:
        write_png(chosen, png)
        click.echo(f"✔ Wrote {png}", err=True)
    if output == "json":
        # color=True: JSON escapes control characters, so there is no ANSI code for click
        # to strip, and its regex pass over megabytes of points is skipped.
        for chunk in render.json_chunks(chosen):
            click.echo(chunk, nl=False, color=True)
        click.echo()
    elif output == "csv":
        click.echo(render.to_csv(chosen), nl=False)
    elif output == "table":
        if plot:
            click.echo(_plot(chosen, reserve=0), nl=False)
        sampled = last is None and every is None
        tables = []
        for group in _by_metric(chosen):
            rows = [render.default_rows(c.series) if sampled else c.keep for c in group]
            cut = any(len(r) < len(c.keep) for r, c in zip(rows, group))
            note = "sampled rows (--every K or --last N for others)" if cut else None
            if len(group) == 1:
                tables.append(render.table(group[0], rows=rows[0], note=note))
            else:  # runs compared: one table, a column per run
                tables.append(render.compare_table(group, rows=rows, note=note))
        click.echo("\n".join(tables), nl=False)


def _by_metric(chosen: list[Chosen]) -> list[list[Chosen]]:
    groups: dict[str, list[Chosen]] = {}
    for c in chosen:
        groups.setdefault(c.series.name, []).append(c)
    return list(groups.values())


def _plot(chosen: list[Chosen], *, reserve: int) -> str:
    cols, lines = shutil.get_terminal_size((100, 40))
    panels = len({c.series.name for c in chosen})
    height = max(min(24, (lines - reserve) // max(panels, 1)), 10)
    return terminal_plot(chosen, width=max(min(cols, 140), 40), height=height, color=sys.stdout.isatty())


def _follow(
    collectors: list[Collector],
    targets: list[tuple[Backend, Run]],
    wanted: list[str],
    *,
    last: int | None,
    every: int | None,
    plot: bool,
    png: Path | None,
) -> None:
    """Redraw the plot and table in place on a terminal; elsewhere, print each new point
    once as a plain line. Returns when every run has ended."""

    tty = sys.stdout.isatty()
    printed: dict[tuple[str, str], tuple[int, int]] = {}
    waiting_said: set[str] = set()
    while True:
        runs = [backend.get(run.name) for backend, run in targets]
        results = [c.refresh(r) for c, r in zip(collectors, runs)]
        ended = all(r.status.is_terminal for r in runs)
        have = [rm for rm in results if rm.series]
        names: list[str] = []
        unknown = None
        if have:
            try:
                names = _names(have, wanted)
            except InputError as e:  # the metric may not have been logged yet (an eval metric)
                if ended:
                    raise
                unknown = e.message
        chosen = render.choose(have, names, every=every, last=last) if names else []
        waiting = [rm for rm in results if not rm.series]
        if tty:
            frame = []
            plot_text = _plot(chosen, reserve=12) if plot and chosen else ""
            frame.append(plot_text)
            room = shutil.get_terminal_size((100, 40)).lines - plot_text.count("\n") - 4 * len(chosen) - 3
            for group in _by_metric(chosen):
                rows = [c.keep[-max(room // max(len(chosen), 1), 3) :] for c in group]
                frame.append(
                    render.table(group[0], rows=rows[0]) if len(group) == 1 else render.compare_table(group, rows=rows)
                )
            frame += [f"waiting for the first metrics of {rm.run} ({rm.status})…" for rm in waiting]
            frame += [f"waiting: {unknown}"] if unknown else []
            frame.append("" if ended else f"following {', '.join(r.name for r in runs)} · Ctrl-C to stop")
            click.echo("\x1b[H\x1b[2J" + "\n".join(f for f in frame if f), nl=True)
        else:
            for rm in waiting:
                if rm.run not in waiting_said:
                    click.echo(f"waiting for the first metrics of {rm.run} ({rm.status})")
                    waiting_said.add(rm.run)
            for c in chosen:
                _print_new_points(c, printed)
        if ended:
            break
        time.sleep(FOLLOW_SECONDS)
    _require_metrics(results)
    if not tty:
        for c in chosen:
            click.echo(f"{c.run.run} {c.series.name}: {render.summary_line(c.series)}")
    if png is not None:
        write_png(chosen, png)
        click.echo(f"✔ Wrote {png}", err=True)


def _print_new_points(c: Chosen, printed: dict[tuple[str, str], tuple[int, int]]) -> None:
    """Print the points of `c` not printed yet; a retry that takes over is announced, and
    the steps it redoes are printed again."""
    s = c.series
    key = (c.run.run, s.name)
    last_step, last_attempt = printed.get(key, (-1, 0))
    for i in c.keep:
        step, attempt = s.steps[i], s.attempts[i]
        if attempt > last_attempt and last_attempt:
            click.echo(f"{key[0]}  ↻ attempt {attempt} takes over at step {step}")
            last_step = step - 1
        last_attempt = max(attempt, last_attempt)
        if step > last_step:
            click.echo(f"{key[0]}  {s.name}  step {step}  {num(s.values[i])}")
            last_step = step
    printed[key] = (last_step, last_attempt)
