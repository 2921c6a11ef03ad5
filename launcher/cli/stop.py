"""`launcher stop [run]` and `launcher delete [run|secret]`: names, spec names or globs,
with confirmation (-y skips it; without a terminal, -y is required, as in mcli)."""

from __future__ import annotations

import click

from launcher.cli.common import FAIL, OK, NounGroup, complete_run_names, confirm
from launcher.cli.secret import all_opt as secret_all_opt

yes_opt = click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")


def _match(patterns: tuple[str, ...]):
    """(backend, run) for each run a name, spec name or glob means; the backend that
    listed it acts on it."""
    from launcher.backends.names import not_found, select
    from launcher.cli.get import runs_with_backends

    pairs = runs_with_backends()
    names = [r.name for _, r in pairs]
    wanted: dict[str, None] = {}
    for p in patterns:
        chosen = select(p, names)
        if not chosen:
            raise not_found(p, names)
        wanted.update(dict.fromkeys(chosen))
    return [(b, r) for b, r in pairs if r.name in wanted]


@click.group(cls=NounGroup, default="run", subcommand_metavar="[run] NAME...")
def stop():
    """Stop runs; their records and logs stay. `stop NAME...` is short for `stop run NAME...`."""


@stop.command("run")
@click.argument("names", nargs=-1, required=True, shell_complete=complete_run_names)
@yes_opt
def stop_run(names, yes):
    """Stop runs by name, spec name (its latest run) or glob.

    \b
    Examples:
      launcher stop hello -y          # the latest run of runspecs/hello.yaml
      launcher stop run 'hello-*' -y  # every run of it
    """
    runs = [(b, r) for b, r in _match(names) if not r.status.is_terminal]
    if not runs:
        click.echo("Nothing to stop: the matching runs have already ended.")
        return
    if not confirm(f"Stop {', '.join(r.name for _, r in runs)}?", yes):
        click.echo(f"{FAIL} Nothing stopped.")
        return
    for backend, r in runs:
        ended = backend.stop(r.name)
        click.echo(f"{OK} Run {r.name} {ended.status.value.lower()}")


@click.group(cls=NounGroup, default="run", subcommand_metavar="[run|secret] NAME...")
def delete():
    """Delete runs or secrets. `delete NAME...` is short for `delete run NAME...`."""


@delete.command("run")
@click.argument("names", nargs=-1, required=True, shell_complete=complete_run_names)
@yes_opt
def delete_run(names, yes):
    """Delete runs (stopping them first) and everything they created.

    \b
    Examples:
      launcher delete run 'hello-*' -y  # every run of runspecs/hello.yaml
    """
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


@delete.command("secret")
@click.argument("names", nargs=-1)
@secret_all_opt
@yes_opt
@click.option("--cluster", help="The cluster profile whose store to use (default: the current one).")
def delete_secret(names, all_, yes, cluster):
    """Delete secrets by NAME, or all of them with -a (the same as `launcher secret delete`)."""
    from launcher.cli.secret import delete_secrets

    delete_secrets(names, yes, cluster, all_=all_)
