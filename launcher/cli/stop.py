"""`launcher stop` and `launcher delete`: names or globs, with confirmation."""

from __future__ import annotations

import fnmatch

import click

from launcher.cli.common import FAIL, OK, confirm


def _match(patterns: tuple[str, ...]):
    """(backend, run) for each run a name or glob matches; the backend that listed it acts on it."""
    from launcher.cli.get import runs_with_backends
    from launcher.errors import NotFoundError

    pairs = runs_with_backends()
    chosen = [(b, r) for b, r in pairs if any(fnmatch.fnmatch(r.name, p) for p in patterns)]
    missing = [p for p in patterns if not any(fnmatch.fnmatch(r.name, p) for _, r in pairs)]
    if missing:
        raise NotFoundError(f"no run matches {', '.join(map(repr, missing))}", hint="list runs with `launcher get runs`")
    return chosen


@click.command()
@click.argument("names", nargs=-1, required=True)
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
def stop(names, yes):
    """Stop runs; their records and logs stay."""
    runs = [(b, r) for b, r in _match(names) if not r.status.is_terminal]
    if not runs:
        click.echo("Nothing to stop: the matching runs have already ended.")
        return
    if len(runs) > 1 and not confirm(f"Stop {len(runs)} runs?", yes):
        return
    for backend, r in runs:
        ended = backend.stop(r.name)
        click.echo(f"{OK} Run {r.name} {ended.status.value.lower()}")


@click.command()
@click.argument("names", nargs=-1, required=True)
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
def delete(names, yes):
    """Delete runs, stopping them first, and everything they created."""
    from launcher.backends.registry import RunIndex
    from launcher.metrics.cache import forget_run

    runs = _match(names)
    listing = ", ".join(r.name for _, r in runs)
    if not confirm(f"Delete {listing}?", yes):
        click.echo(f"{FAIL} Nothing deleted.")
        return
    for backend, r in runs:
        backend.delete(r.name)
        RunIndex().forget(r.name)
        forget_run(r.name)
        click.echo(f"{OK} Deleted run {r.name}")
