"""`launcher reconcile [RUN] [--watch] [--cluster C]`: act on what runs need.

Reads (`get`, `describe`, `logs`, `metrics`, the dashboard) never change a cluster. On a
cluster without JobSet a run's retries, and on any cluster the removal of what a submit
that died part way left, need a reconciler: `run --follow` is one for the run it
follows, a submit makes one pass over its namespace, and this command is one for every
run (or RUN), once or, with --watch, until interrupted. docs/reconciler.yaml runs it in
the cluster as a Deployment.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import click

from launcher.backends.base import utcnow
from launcher.cli.common import complete_run_names, info, warn

# A single pass is the last thing to act on its runs for a while: it carries a retry it
# starts through to the next attempt's Job (the old Job must go first) for up to this long.
# With --watch the next pass carries it on.
CARRY_SECONDS = 30.0
# With --watch, a run that changed in a pass is looked at again this soon (its next step may
# be due), and a retry waiting out its backoff when it is due, whatever --every says.
SOON_SECONDS = 1.0


@click.command()
@click.argument("name", metavar="[RUN]", required=False, shell_complete=complete_run_names)
@click.option("--watch", "keep_going", is_flag=True, help="Keep reconciling until interrupted.")
@click.option("--cluster", help="Only runs of this cluster profile (default: every profile).")
@click.option(
    "--every",
    "interval",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="With --watch: the time between two passes.",
)
def reconcile(name, keep_going, cluster, interval):
    """Start the retries that are due, end runs that can never start, and remove what a
    failed submit left; once, or with --watch until interrupted. RUN limits it to one run.

    \b
    Examples:
      launcher reconcile                      # one pass over every run
      launcher reconcile --watch --cluster gke
    """
    from launcher.backends.registry import open_backend
    from launcher.config import load_config

    if name is not None and cluster is None:
        from launcher.sdk.fanout import resolve_run

        backend, run = resolve_run(name)  # the profile that holds it
        backends, name = [backend], run.name
    else:
        config = load_config()
        backends = [open_backend(p) for p in ([config.profile(cluster)] if cluster else config.profiles())]
    seen: dict[tuple[str | None, str], tuple] = {}
    try:
        while True:
            due: list[datetime] = []
            for backend in backends:
                due += _one_pass(
                    backend,
                    name,
                    seen,
                    tolerant=keep_going or len(backends) > 1,
                    carry_seconds=0.0 if keep_going else CARRY_SECONDS,
                )
            if not keep_going:
                if not seen:
                    click.echo("No runs.")
                return
            # The next pass comes sooner when a retry's backoff ends before it.
            until_due = [(at - utcnow()).total_seconds() for at in due]
            time.sleep(max(0.0, min([interval, *until_due])))
    except KeyboardInterrupt:
        click.echo("", err=True)
        info("Stopped reconciling.")
    finally:
        for backend in backends:
            backend.close()


def _one_pass(backend, name: str | None, seen: dict, *, tolerant: bool, carry_seconds: float) -> list[datetime]:
    """Reconcile the backend's runs (or one) and print each run whose state changed since
    the last pass; returns when the retries that wait out their backoff are due.
    `tolerant`: a failure (a cluster away, a run not there) is a warning, so that the
    other profiles and the next pass go on."""
    from launcher.errors import LauncherError, NotFoundError

    try:
        runs = backend.reconcile(name, carry_seconds=carry_seconds)
    except NotFoundError:
        if not tolerant:
            raise
        return []
    except LauncherError as e:
        if not tolerant:
            raise
        warn(e.message)
        return []
    due: list[datetime] = []
    for run in runs:
        key = (run.cluster, run.name)
        state = (run.status, run.current_attempt, run.reason)
        if seen.get(key) != state:
            seen[key] = state
            reason = f"  ({run.reason})" if run.reason else ""
            click.echo(f"{run.status.value:<11} {run.name}  attempt {run.current_attempt}{reason}")
            if not run.status.is_terminal and run.retry_at is None:
                # Moving (a restart under way, its steps waiting on the cluster): look again soon.
                due.append(utcnow() + timedelta(seconds=SOON_SECONDS))
    return due + [run.retry_at for run in runs if run.retry_at is not None]
