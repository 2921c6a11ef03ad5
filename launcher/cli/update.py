"""`launcher update [run] NAME`: change scheduling fields of a run that has not ended (mcli's
`update run`), where its backend can (its UPDATE_* features); otherwise it says why not."""

from __future__ import annotations

import click

from launcher.cli.common import OK, NounGroup, complete_run_names, dump, info, run_record, warn
from launcher.sdk.runs import update_run as update_the_run


@click.group(cls=NounGroup, default="run", subcommand_metavar="[run] NAME")
def update():
    """Update a run. `update NAME ...` is short for `update run NAME ...`."""


@update.command("run")
@click.argument("name", shell_complete=complete_run_names)
@click.option(
    "--max-duration",
    "--max_duration",
    "max_duration",
    type=float,
    metavar="HOURS",
    help="New scheduling.max_duration, in hours from the run's start.",
)
@click.option("--priority", help="New scheduling.priority.")
@click.option("--max-retries", "--max_retries", "max_retries", type=int, help="New scheduling.max_retries.")
@click.option("-o", "--output", type=click.Choice(["json", "yaml"]), help="Print the updated run's record.")
def update_run(name, max_duration, priority, max_retries, output):
    """Change a running run's max_duration, priority or max_retries. The run's record keeps
    the new values (`describe` shows them) and the run acts on them from now on.

    \b
    Examples:
      launcher update run hello --max-duration 12
      launcher update run hello-x7k2pq --max-retries 3
    """
    updated = update_the_run(name, max_duration=max_duration, priority=priority, max_retries=max_retries)
    scheduling = updated.spec.get("scheduling") or {}
    changed = {
        k: scheduling.get(k)
        for k, v in (("max_duration", max_duration), ("priority", priority), ("max_retries", max_retries))
        if v is not None
    }
    if output:
        dump(run_record(updated), output)
    words = ", ".join(f"{k} {v}" + ("h" if k == "max_duration" else "") for k, v in changed.items())
    click.echo(f"{OK} Run {updated.name} updated: {words}.", err=bool(output))
    for warning in updated.warnings:
        warn(warning)
    info(f"See it with `launcher describe run {updated.name}`.")
