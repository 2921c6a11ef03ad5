"""`launcher get runs|secrets|clusters`."""

from __future__ import annotations

import click

from launcher import sdk
from launcher.cli.cluster import list_profiles
from launcher.cli.common import (
    NounGroup,
    ago,
    complete_run_names,
    dump,
    duration,
    instance,
    print_table,
    run_record,
    warn,
)
from launcher.cli.secret import list_secrets
from launcher.cli.secret import type_opt as secret_type_opt
from launcher.errors import InputError
from launcher.sdk.records import status_detail
from launcher.sdk.runs import parse_status

# click's defaults plus minutes without seconds, the way people write times.
TIME = click.DateTime(
    formats=["%Y-%m-%d", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"]
)


def _comma(values: tuple[str, ...]) -> list[str]:
    """mcli's comma-separated lists, and repeated options: `-s failed,stopped -s pending`."""
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def _gpu_nums(values: tuple[str, ...]) -> list[int]:
    out = []
    for v in _comma(values):
        try:
            out.append(int(v))
        except ValueError:
            raise click.BadParameter(f"{v!r} is not a number of GPUs", param_hint="'-n' / '--gpu-num'") from None
    return out


def _statuses(values: tuple[str, ...]):
    try:
        return [parse_status(s) for s in _comma(values)]
    except InputError as e:
        raise click.BadParameter(e.message, param_hint="'-s' / '--status'") from None


@click.group(cls=NounGroup, default="runs", strict=True, subcommand_metavar="runs|secrets|clusters [ARGS]...")
def get():
    """List runs, secrets or cluster profiles. `get` alone (or with options only) lists runs."""


@get.command("runs")
@click.argument("patterns", nargs=-1, shell_complete=complete_run_names)
@click.option(
    "-c",
    "--cluster",
    "clusters",
    multiple=True,
    metavar="CLUSTER",
    help="Only runs of these cluster profiles (comma-separated or repeated).",
)
@click.option(
    "-s",
    "--status",
    "statuses",
    multiple=True,
    metavar="STATUS",
    help="Only runs with these statuses, e.g. failed,pending (comma-separated or repeated).",
)
@click.option(
    "-t",
    "--gpu-type",
    "gpu_types",
    multiple=True,
    metavar="GPU",
    help="Only runs of these compute.gpu_type values, e.g. a100_80gb ('cpu' for none).",
)
@click.option(
    "-n",
    "--gpu-num",
    "gpu_nums",
    multiple=True,
    metavar="N",
    help="Only runs with these numbers of GPUs (compute.gpus), e.g. 1,8.",
)
@click.option(
    "--ids",
    "ids",
    multiple=True,
    metavar="NAME",
    help="Only the runs with these full names (a run's name is its id), comma-separated or repeated.",
)
@click.option("-l", "--latest", is_flag=True, help="Only the latest run (of those the other filters leave).")
@click.option("--before", type=TIME, help="Only runs created before this local time (e.g. 2026-11-29T18:00).")
@click.option("--after", type=TIME, help="Only runs created after this local time (e.g. '2026-11-29 09:30').")
@click.option("--limit", type=int, default=50, show_default=True)
@click.option(
    "-o", "--output", type=click.Choice(["table", "name", "json", "yaml"]), default="table", show_default=True
)
def get_runs(patterns, clusters, statuses, gpu_types, gpu_nums, ids, latest, before, after, limit, output):
    """List runs, newest first. PATTERNS are run names, spec names (every run of that
    spec) or globs. The filters are mcli's (launcher.get_runs takes the same).

    \b
    Examples:
      launcher get runs hello --status completed
      launcher get runs -s failed,stopped -t a100_80gb -n 8
      launcher get runs --after 2026-11-29T18:00 -o json
    """
    runs = sdk.get_runs(
        list(patterns),
        cluster=_comma(clusters),
        status=_statuses(statuses),
        gpu_type=_comma(gpu_types),
        gpu_num=_gpu_nums(gpu_nums),
        ids=_comma(ids),
        latest=latest,
        before=before,
        after=after,
        limit=limit,
    )
    for message in runs.warnings:
        warn(message)
    if output == "name":
        for r in runs:
            click.echo(r.name)
        return
    if output in ("json", "yaml"):
        dump([run_record(r) for r in runs], output)
        return
    from rich.table import Table  # lazy: rich costs 3x `python -c pass`, for tables only

    table = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("NAME", "CLUSTER", "INSTANCE", "STATUS", "CREATED", "DURATION", "REASON"):
        table.add_column(col, overflow="fold")
    for r in runs:
        table.add_row(
            r.name,
            r.cluster or r.backend,
            instance(r.spec),
            r.status.value,
            ago(r.created_at),
            duration(r.started_at, r.ended_at),
            status_detail(r),
        )
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
    list_secrets(cluster, output, types)


@get.command("clusters")
@click.option("-o", "--output", type=click.Choice(["table", "json", "yaml"]), default="table", show_default=True)
def get_clusters(output):
    """List cluster profiles (the same as `launcher cluster list`); * marks the current one."""
    list_profiles(output)
