"""`launcher stop` and `launcher delete`: names or globs, with confirmation."""

from __future__ import annotations

import fnmatch

import click

from launcher.cli.common import FAIL, OK, confirm


def _match(patterns: tuple[str, ...]):
    from launcher.cli.get import all_runs
    from launcher.errors import NotFoundError

    runs = all_runs()
    chosen = [r for r in runs if any(fnmatch.fnmatch(r.name, p) for p in patterns)]
    missing = [p for p in patterns if not any(fnmatch.fnmatch(r.name, p) for r in runs)]
    if missing:
        raise NotFoundError(f"no run matches {', '.join(map(repr, missing))}", hint="list runs with `launcher get runs`")
    return chosen


def _backend_for(run):
    from launcher.cli.common import find_run

    return find_run(run.name)[0]


@click.command()
@click.argument("names", nargs=-1, required=True)
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
def stop(names, yes):
    """Stop runs; their records and logs stay."""
    runs = [r for r in _match(names) if not r.status.is_terminal]
    if not runs:
        click.echo("Nothing to stop: the matching runs have already ended.")
        return
    if len(runs) > 1 and not confirm(f"Stop {len(runs)} runs?", yes):
        return
    for r in runs:
        ended = _backend_for(r).stop(r.name)
        click.echo(f"{OK} Run {r.name} {ended.status.value.lower()}")


@click.command()
@click.argument("names", nargs=-1, required=True)
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
def delete(names, yes):
    """Delete runs, stopping them first, and everything they created."""
    from launcher.backends.registry import RunIndex
    from launcher.metrics.cache import forget_run

    runs = _match(names)
    listing = ", ".join(r.name for r in runs)
    if not confirm(f"Delete {listing}?", yes):
        click.echo(f"{FAIL} Nothing deleted.")
        return
    for r in runs:
        _backend_for(r).delete(r.name)
        RunIndex().forget(r.name)
        forget_run(r.name)
        click.echo(f"{OK} Deleted run {r.name}")
