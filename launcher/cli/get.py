"""`launcher get runs|secrets|clusters`."""

from __future__ import annotations

import click

from launcher.backends.records import status_detail
from launcher.cli.common import NounGroup, ago, complete_run_names, dump, duration, instance, print_table, run_record, warn
from launcher.cli.secret import type_opt as secret_type_opt

# click's defaults plus minutes without seconds, the way people write times.
TIME = click.DateTime(formats=["%Y-%m-%d", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S",
                               "%Y-%m-%d %H:%M:%S"])


def all_runs(cluster: str | None = None):
    """Runs from every profile (or one), newest first. An unreachable cluster is a warning."""
    return [run for _, run in runs_with_backends(cluster)]


def runs_with_backends(cluster: str | None = None):
    """(backend, run) for every run of every profile (or one), newest first. A profile that
    cannot be listed is a warning; when none can be, an error (registry.list_runs)."""
    from launcher.backends.registry import list_runs
    from launcher.config import load_config

    config = load_config()
    pairs, warnings = list_runs([config.profile(cluster)] if cluster else config.profiles())
    for message in warnings:
        warn(message)
    return pairs


@click.group(cls=NounGroup, default="runs", strict=True, subcommand_metavar="runs|secrets|clusters [ARGS]...")
def get():
    """List runs, secrets or cluster profiles. `get` alone (or with options only) lists runs."""


@get.command("runs")
@click.argument("patterns", nargs=-1, shell_complete=complete_run_names)
@click.option("--status", "statuses", multiple=True, help="Only runs with this status (repeatable).")
@click.option("--cluster", help="Only runs of this cluster profile.")
@click.option("--before", type=TIME, help="Only runs created before this local time (e.g. 2026-11-29T18:00).")
@click.option("--after", type=TIME, help="Only runs created after this local time (e.g. '2026-11-29 09:30').")
@click.option("--limit", type=int, default=50, show_default=True)
@click.option("-o", "--output", type=click.Choice(["table", "name", "json", "yaml"]), default="table", show_default=True)
def get_runs(patterns, statuses, cluster, before, after, limit, output):
    """List runs, newest first. PATTERNS are run names, spec names (every run of that
    spec) or globs.

    \b
    Examples:
      launcher get runs hello --status completed
      launcher get runs --after 2026-11-29T18:00 -o json
    """
    from launcher.backends.names import matches
    from launcher.backends.base import RunStatus

    # Naive times on the command line are the user's local time.
    before, after = (t.astimezone() if t else None for t in (before, after))

    wanted = set()
    for s in statuses:
        try:
            wanted.add(RunStatus(s.upper()))
        except ValueError:
            raise click.BadParameter(f"{s!r} is not a status; use one of {', '.join(x.value for x in RunStatus)}",
                                     param_hint="--status") from None
    runs = [r for r in all_runs(cluster) if (not wanted or r.status in wanted)
            and (not patterns or any(matches(p, r.name) for p in patterns))
            and (before is None or r.created_at < before) and (after is None or r.created_at > after)][:limit]
    if output == "name":
        for r in runs:
            click.echo(r.name)
        return
    if output in ("json", "yaml"):
        dump([run_record(r) for r in runs], output)
        return
    from rich.table import Table

    table = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("NAME", "CLUSTER", "INSTANCE", "STATUS", "CREATED", "DURATION", "REASON"):
        table.add_column(col, overflow="fold")
    for r in runs:
        table.add_row(r.name, r.cluster or r.backend, instance(r.spec), r.status.value, ago(r.created_at),
                      duration(r.started_at, r.ended_at), status_detail(r))
    if not runs:
        click.echo("No runs found.")
        return
    print_table(table)


@get.command("secrets")
@click.option("--cluster", help="The cluster profile whose secrets to list.")
@secret_type_opt
@click.option("-o", "--output", type=click.Choice(["table", "json", "yaml"]), default="table", show_default=True)
def get_secrets(cluster, types, output):
    """List secrets: names, kinds and dates, never values."""
    from launcher.cli.secret import list_secrets

    list_secrets(cluster, output, types)


@get.command("clusters")
@click.option("-o", "--output", type=click.Choice(["table", "json", "yaml"]), default="table", show_default=True)
def get_clusters(output):
    """List cluster profiles (the same as `launcher cluster list`); * marks the current one."""
    from launcher.cli.cluster import list_profiles

    list_profiles(output)
