"""`launcher watchdog RUN [--disable]` (mcli's `watchdog`): retry a running run after its
failures, as mcli turns on retry_on_system_failure and max_retries (10) for it."""

from __future__ import annotations

import click

from launcher.cli.common import OK, complete_run_names, find_run, info, warn
from launcher.errors import InputError
from launcher.sdk.runs import update_run

DEFAULT_RETRIES = 10  # mcli's


@click.command("watchdog")
@click.argument("name", metavar="RUN", shell_complete=complete_run_names)
@click.option("--disable", is_flag=True, help="Turn it off: the run is not retried (max_retries 0).")
@click.option(
    "--max-retries",
    type=click.IntRange(min=0),
    default=DEFAULT_RETRIES,
    show_default=True,
    metavar="N",
    help="How many times a failure of the run is retried.",
)
def watchdog(name, disable, max_retries):
    """Enable mcli's watchdog on a run that has not ended: its failures are retried up to
    --max-retries times (scheduling.max_retries); --disable turns it off. Where the backend
    cannot change a running run's retries (a JobSet's failurePolicy is immutable), it says
    so (exit 2): submit with `scheduling: {retry_on_system_failure: true, max_retries: 10}`.

    \b
    Examples:
      launcher watchdog hello
      launcher watchdog hello --disable
    """
    _, run = find_run(name)
    if run.status.is_terminal:
        raise InputError(
            f"run {run.name} has ended ({run.status.value}): there is nothing to watch",
            hint="enable the watchdog on a run that has not ended",
        )
    retries = 0 if disable else max_retries
    try:
        updated = update_run(run.name, max_retries=retries)
    except InputError as e:
        if e.hint is not None or disable:
            raise
        raise InputError(
            e.message,
            hint="submit it again with `scheduling: {retry_on_system_failure: true, max_retries: 10}`",
        ) from None
    for warning in updated.warnings:
        warn(warning)
    if disable:
        click.echo(f"{OK} Disabled the watchdog for run {updated.name}: a failure will not be retried.")
        return
    click.echo(f"{OK} Enabled the watchdog for run {updated.name}: a failure will be retried up to {retries} times.")
    info(f"Turn it off with `launcher watchdog {updated.name} --disable`.")
