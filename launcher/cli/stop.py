"""`launcher stop [run]` and `launcher delete [run|secret]`: names, spec names or globs,
with confirmation (-y skips it; without a terminal, -y is required, as in mcli)."""

from __future__ import annotations

import click

from launcher import sdk
from launcher.cli.common import FAIL, OK, NounGroup, complete_run_names, confirm, warn
from launcher.cli.get import TIME, _comma, _statuses
from launcher.cli.secret import all_opt as secret_all_opt
from launcher.cli.secret import delete_secrets
from launcher.errors import InputError
from launcher.sdk.runs import select_runs

yes_opt = click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")


all_opt = click.option("-a", "--all", "every", is_flag=True, help="Every run (of every cluster profile).")
latest_opt = click.option("-l", "--latest", is_flag=True, help="Only the latest run (of those NAMES mean, if given).")


def _selected(names: tuple[str, ...], every: bool, latest: bool):
    """The runs the names, --all or --latest mean (launcher.sdk.runs.select_runs)."""
    try:
        runs = select_runs(names, all=every, latest=latest)
    except InputError as e:
        if not names and not every and not latest:
            raise click.UsageError(e.message) from None
        raise
    for message in runs.warnings:
        warn(message)
    return runs


def _counted(verb: str, runs) -> str:
    """`Stop 3 runs (a, b, c)?`: how many an action touches, then which."""
    shown = ", ".join(r.name for r in runs[:10]) + (f", and {len(runs) - 10} more" if len(runs) > 10 else "")
    return f"{verb} {len(runs)} run{'s' if len(runs) != 1 else ''} ({shown})?"


@click.group(cls=NounGroup, default="run", subcommand_metavar="[run] NAME...")
def stop():
    """Stop runs; their records and logs stay. `stop NAME...` is short for `stop run NAME...`."""


@stop.command("run")
@click.argument("names", nargs=-1, shell_complete=complete_run_names)
@all_opt
@latest_opt
@yes_opt
def stop_run(names, every, latest, yes):
    """Stop runs by name, spec name (its latest run) or glob; or every run (-a) or the
    latest (-l). The confirmation counts the runs it will stop.

    \b
    Examples:
      launcher stop hello -y          # the latest run of runspecs/hello.yaml
      launcher stop run 'hello-*' -y  # every run of it
      launcher stop run --all -y      # every run still going (without -y, after a y/N)
    """
    runs = [r for r in _selected(names, every, latest) if not r.status.is_terminal]
    if not runs:
        click.echo("Nothing to stop: the matching runs have already ended.")
        return
    if not confirm(_counted("Stop", runs), yes):
        click.echo(f"{FAIL} Nothing stopped.")
        return
    for ended in sdk.stop_runs(runs):
        click.echo(f"{OK} Run {ended.name} {ended.status.value.lower()}")


@click.group(cls=NounGroup, default="run", subcommand_metavar="[run|secret] NAME...")
def delete():
    """Delete runs or secrets. `delete NAME...` is short for `delete run NAME...`."""


@delete.command("run")
@click.argument("names", nargs=-1, shell_complete=complete_run_names)
@all_opt
@latest_opt
@click.option(
    "--before", type=TIME, help="Only runs created before this local time (e.g. 2026-06-01): a history's retention."
)
@click.option(
    "-s",
    "--status",
    "statuses",
    multiple=True,
    metavar="STATUS",
    help="Only runs with these statuses, e.g. completed,failed (comma-separated or repeated).",
)
@click.option(
    "-c",
    "--cluster",
    "clusters",
    multiple=True,
    metavar="CLUSTER",
    help="Only runs of these cluster profiles (comma-separated or repeated).",
)
@yes_opt
def delete_run(names, every, latest, before, statuses, clusters, yes):
    """Delete runs (stopping them first) and everything they created; or every run (-a)
    or the latest (-l). With --before, --status or --cluster, the runs `get runs` shows
    with those filters (and NAMES, as there: names, spec names or globs). The
    confirmation counts the runs it will delete.

    \b
    Examples:
      launcher delete run 'hello-*' -y  # every run of runspecs/hello.yaml
      launcher delete run --latest -y
      launcher delete --before 2026-06-01 --status completed,failed,stopped -y
    """
    if before is not None or statuses or clusters:
        runs = sdk.get_runs(
            list(names), before=before, status=_statuses(statuses), cluster=_comma(clusters), latest=latest
        )
        for message in runs.warnings:
            warn(message)
    else:
        runs = _selected(names, every, latest)
    if not runs:
        click.echo("Nothing to delete: no run matches." if before or statuses or clusters or names else
                   "Nothing to delete: there are no runs.")
        return
    if not confirm(_counted("Delete", runs), yes):
        click.echo(f"{FAIL} Nothing deleted.")
        return
    for run in runs:  # one at a time, so each deleted run is said before the next
        sdk.delete_run(run)
        click.echo(f"{OK} Deleted run {run.name}")


@delete.command("secret")
@click.argument("names", nargs=-1)
@secret_all_opt
@yes_opt
@click.option("--cluster", help="The cluster profile whose store to use (default: the current one).")
def delete_secret(names, all_, yes, cluster):
    """Delete secrets by NAME, or all of them with -a (the same as `launcher secret delete`)."""
    delete_secrets(names, yes, cluster, all_=all_)
