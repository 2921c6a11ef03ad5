"""`launcher get runs|secrets|clusters`."""

from __future__ import annotations

import click

from launcher.cli.cluster import list_profiles
from launcher.cli.common import (
    NounGroup,
    ago,
    complete_run_names,
    dump,
    instance,
    print_table,
    run_record,
    warn,
)
from launcher.cli.filters import RunFilters, comma, run_filter_options
from launcher.cli.secret import LIST_FORMATS as SECRET_FORMATS
from launcher.cli.secret import ids_opt as secret_ids_opt
from launcher.cli.secret import list_secrets
from launcher.cli.secret import type_opt as secret_type_opt
from launcher.sdk.records import run_duration, status_detail


class LimitParam(click.ParamType):
    """mcli's --limit: a number of runs, or `none` for every one."""

    name = "N|none"

    def convert(self, value, param, ctx):
        if value is None or isinstance(value, int):
            return value
        if str(value).strip().lower() == "none":
            return None
        try:
            return int(value)
        except ValueError:
            self.fail(f"{value!r} is not a number of runs (or 'none' for every one)", param, ctx)


LIMIT = LimitParam()


@click.group(cls=NounGroup, default="runs", strict=True, subcommand_metavar="runs|secrets|clusters [ARGS]...")
def get():
    """List runs, secrets or cluster profiles. `get` alone (or with options only) lists runs."""


@get.command("runs")
@click.argument("patterns", nargs=-1, shell_complete=complete_run_names)
@run_filter_options("Only", latest_help="Only the latest run (of those the other filters leave).")
@click.option(
    "--ids",
    "include_ids",
    is_flag=True,
    help="Add each run's id (mcli's flag): a run's id here is its full name, on every backend.",
)
@click.option(
    "--limit",
    type=LIMIT,
    default="50",
    show_default=True,
    help="At most this many runs, newest first ('none': every run, as mcli's).",
)
@click.option(
    "-o", "--output", type=click.Choice(["table", "name", "json", "yaml"]), default="table", show_default=True
)
def get_runs(patterns, filters: RunFilters, include_ids, limit, output):
    """List runs, newest first. PATTERNS are run names, spec names (every run of that
    spec) or globs, each of them or comma-separated. The filters are mcli's
    (launcher.get_runs takes the same).

    \b
    Examples:
      launcher get runs hello --status completed
      launcher get runs -s failed,stopped -t a100_80gb -n 8
      launcher get runs --after 2026-11-29T18:00 -o json
      launcher get runs --after '11-29-2026 09:30:00' --ids
    """
    runs = filters.runs(comma(patterns), limit=limit)
    for message in runs.warnings:
        warn(message)
    if output == "name":
        for r in runs:
            click.echo(r.name)
        return
    if output in ("json", "yaml"):
        dump([{"id": r.name, **run_record(r)} if include_ids else run_record(r) for r in runs], output)
        return
    from rich.table import Table  # lazy: rich costs 3x `python -c pass`, for tables only

    table = Table(box=None, pad_edge=False, header_style="bold")
    columns = ["NAME", *(["ID"] if include_ids else []), "CLUSTER", "INSTANCE", "STATUS", "CREATED", "DURATION"]
    for col in (*columns, "REASON"):
        table.add_column(col, overflow="fold")
    for r in runs:
        table.add_row(
            r.name,
            *([r.name] if include_ids else []),
            r.cluster or r.backend,
            instance(r.spec),
            r.status.value,
            ago(r.created_at),
            run_duration(r),
            status_detail(r),
        )
    if not runs:
        click.echo("No runs found.")
        return
    print_table(table)


@get.command("secrets")
@click.option("--cluster", help="The cluster profile whose secrets to list.")
@secret_type_opt
@secret_ids_opt
@click.option("-o", "--output", type=SECRET_FORMATS, default="table", show_default=True)
def get_secrets(cluster, types, include_ids, output):
    """List secrets: names, kinds and dates, never values.

    \b
    Examples:
      launcher get secrets --type all -o name
      launcher get secrets --type environment --ids
    """
    list_secrets(cluster, output, types, include_ids=include_ids)


@get.command("clusters")
@click.option(
    "--ids",
    "include_ids",
    is_flag=True,
    help="Add each cluster's id (mcli's flag): a cluster's id here is its profile's name.",
)
@click.option(
    "-o", "--output", type=click.Choice(["table", "name", "json", "yaml"]), default="table", show_default=True
)
def get_clusters(include_ids, output):
    """List cluster profiles (the same as `launcher cluster list`); * marks the current one."""
    list_profiles(output, include_ids=include_ids)
