"""`launcher logs [NAME]`."""

from __future__ import annotations

import click

from launcher.cli.common import complete_run_names, find_run, info


@click.command()
@click.argument("name", required=False, shell_complete=complete_run_names)
@click.option("-f", "--follow", is_flag=True, help="Keep streaming until the attempt ends.")
@click.option("--tail", type=click.IntRange(min=0), help="Only the last N lines of each rank.")
@click.option("--rank", "--node", "rank", type=click.IntRange(min=0), help="Only this node rank (default: all).")
@click.option("--attempt", "--resumption", "attempt", type=click.IntRange(min=1), help="This attempt (default: latest).")
@click.option("--previous", "--prev", "previous", is_flag=True, help="The attempt before the latest.")
@click.option("--failed", is_flag=True, help="The first failed rank.")
def logs(name, follow, tail, rank, attempt, previous, failed):
    """Print a run's logs; without NAME, the latest run's. NAME is a run name, a spec name
    (its latest run) or a glob.

    \b
    Examples:
      launcher logs hello --tail 20
      launcher logs hello --rank 0 --attempt 1
    """
    from launcher.backends.base import RunStatus
    from launcher.cli.follow import echo_line
    from launcher.errors import LauncherError

    backend, run = find_run(name)
    if previous and attempt is None:
        if run.current_attempt <= 1:
            raise LauncherError(f"run {run.name} has no previous attempt: it has run once (attempt 1)")
        attempt = run.current_attempt - 1
    chosen = next((a for a in run.attempts if a.index == (attempt or run.current_attempt)), None)
    if run.status in (RunStatus.PENDING, RunStatus.QUEUED) and not follow and (chosen is None or not chosen.started_at):
        # An attempt that ran keeps its logs while the run waits for the next (a retry due).
        which = f"attempt {chosen.index} of run {run.name}" if chosen and chosen.index > 1 else f"run {run.name}"
        info(f"{which} is {run.status.value}: it has not started, so it has no logs yet")
        return
    if failed or (rank is None and run.status is RunStatus.FAILED and chosen):
        bad = [r.rank for r in (chosen.ranks if chosen else []) if r.exit_code not in (None, 0)]
        if failed and not bad:
            which = f"attempt {chosen.index} of run {run.name}" if chosen else f"run {run.name}"
            raise LauncherError(f"{which} has no failed rank ({run.status.value})")
        if bad and (failed or run.nodes > 1):
            rank = bad[0]
            info(f"showing rank {rank}, the first failed rank; pass --rank to pick another")
    many = rank is None and run.nodes > 1
    if not follow and tail is None and hasattr(backend, "log_chunks"):
        # A whole log at once: copied in large chunks, not line by line.
        out = click.get_binary_stream("stdout")
        for chunk in backend.log_chunks(run.name, rank=rank, attempt=attempt, prefix_ranks=many):
            out.write(chunk)
        out.flush()
        return
    from launcher.errors import NotFoundError

    try:
        for line in backend.logs(run.name, rank=rank, attempt=attempt, tail=tail, follow=follow):
            echo_line(line.text, line.rank, many)
        if follow:
            info(_why_follow_ended(backend, run.name, attempt or run.current_attempt))
    except NotFoundError:
        if not follow:
            raise
        raise _deleted(run.name) from None


def _deleted(name: str) -> Exception:
    """A followed run deleted under the follow: its logs ended with nothing more to say, an error."""
    from launcher.errors import LauncherError

    return LauncherError(f"run {name} was deleted while following its logs")


def _why_follow_ended(backend, name: str, followed: int) -> str:
    """One line on why a followed stream ended: the attempt ended, or a retry superseded
    it (a run that went away raises NotFoundError)."""
    run = backend.get(name)
    chosen = next((a for a in run.attempts if a.index == followed), None)
    if run.current_attempt > followed:
        why = f" ({chosen.status.value}: {chosen.reason})" if chosen and chosen.reason else ""
        return (f"attempt {followed} of run {name} ended{why}; the run goes on as attempt {run.current_attempt}: "
                f"`launcher logs {name} -f` follows it")
    if run.status.is_terminal:
        return f"run {name} {run.status.value}" + (f": {run.reason}" if run.reason else "")
    status = chosen.status.value if chosen else run.status.value
    # A run that waits (on Kubernetes without JobSet, a retry due for a reconciler) says why.
    return (f"attempt {followed} of run {name} ended ({status}); the run is {run.status.value}"
            + (f": {run.reason}" if run.reason else ""))
