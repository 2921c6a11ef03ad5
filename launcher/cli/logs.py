"""`launcher logs [NAME]`."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Protocol, runtime_checkable

import click

from launcher.backends.base import RunStatus
from launcher.cli.common import complete_run_names, find_run, info
from launcher.cli.follow import echo_line
from launcher.errors import InputError, LauncherError, NotFoundError
from launcher.sdk import logview


@runtime_checkable
class ChunkedLogs(Protocol):
    """A backend that hands over a whole log in large chunks (the local one reads its files)."""

    def log_chunks(
        self,
        name: str,
        *,
        rank: int | None = None,
        attempt: int | None = None,
        previous: bool = False,
        prefix_ranks: bool = False,
    ) -> Iterator[bytes]: ...


@click.command()
@click.argument("name", required=False, shell_complete=complete_run_names)
@click.option(
    "-f",
    "--follow/--no-follow",
    default=False,
    help="Keep streaming until the attempt ends (--no-follow, the default: print what there is).",
)
@click.option("-t", "--tail", type=click.IntRange(min=0), help="Only the last N lines of each rank.")
@click.option(
    "--rank",
    "--node",
    "--node-rank",
    "rank",
    type=click.IntRange(min=0),
    help="Only this node rank's log (default: all).",
)
@click.option(
    "--gpu",
    "--local-gpu-rank",
    "gpu",
    type=click.IntRange(min=0),
    help="Only this GPU rank of the node (--node-rank, default 0). A run has one log per node rank: "
    "GPU rank 0 is that log; another GPU rank has no log of its own, and is an error that says so.",
)
@click.option(
    "--global-gpu-rank",
    type=click.IntRange(min=0),
    help="Only this GPU rank of the run, counted across nodes: its node's log, as --gpu.",
)
@click.option("--attempt", type=click.IntRange(min=1), help="This attempt, counted from 1 (default: the latest).")
@click.option(
    "--resumption",
    type=click.IntRange(min=0),
    help="This attempt as mcli counts it, from 0: --resumption 0 is --attempt 1.",
)
@click.option("--previous", "--prev", "previous", is_flag=True, help="The attempt before the latest.")
@click.option("--failed", is_flag=True, help="The first failed rank.")
@click.option(
    "--first-exception",
    "--error",
    "first_exception",
    is_flag=True,
    help="Only the first Python traceback of the attempt, from every rank: the earliest by the lines' "
    "times where the log has them (Kubernetes), else the lowest rank's first (a local run's "
    "log files have no times).",
)
@click.option(
    "-c",
    "--container",
    type=click.Choice(["MAIN", "MODEL"], case_sensitive=False),
    help="mcli's: the container whose log to read. A rank has one, MAIN (the default); MODEL is "
    "an inference deployment's, which runs here are not.",
)
@click.option(
    "--raw",
    is_flag=True,
    help="Also the trainer's @@launcher.metrics records, hidden by default (`launcher metrics` reads them).",
)
def logs(
    name,
    follow,
    tail,
    rank,
    gpu,
    global_gpu_rank,
    attempt,
    resumption,
    previous,
    failed,
    first_exception,
    container,
    raw,
):
    """Print a run's logs; without NAME, the latest run's. NAME is a run name, a spec name
    (its latest run), the start of a run name, or a glob. `--first-exception` prints the
    first Python traceback of the run's ranks instead (exit 1 when there is none).

    \b
    Examples:
      launcher logs hello --tail 20
      launcher logs hello --rank 0 --attempt 1
      launcher logs hello --resumption 0     # mcli's count: the first attempt
    """
    if container is not None and container.upper() != "MAIN":
        raise InputError(
            f"--container {container}: a run's rank has one container, MAIN; MODEL is an inference deployment's",
            hint="leave --container out (or give --container MAIN)",
        )
    if first_exception and (follow or tail is not None):
        raise InputError("--first-exception reads the whole attempt once: it takes neither --follow nor --tail")
    backend, run = find_run(name)
    attempt = logview.chosen_attempt(run, attempt=attempt, resumption=resumption, previous=previous)
    choice = logview.chosen_rank(run, node_rank=rank, gpu=gpu, global_gpu_rank=global_gpu_rank)
    rank = choice.rank
    if choice.note:
        info(choice.note)
    chosen = next((a for a in run.attempts if a.index == (attempt or run.current_attempt)), None)
    if run.status in (RunStatus.PENDING, RunStatus.QUEUED) and not follow and (chosen is None or not chosen.started_at):
        # An attempt that ran keeps its logs while the run waits for the next (a retry due).
        which = f"attempt {chosen.index} of run {run.name}" if chosen and chosen.index > 1 else f"run {run.name}"
        info(f"{which} is {run.status.value}: it has not started, so it has no logs yet")
        return
    if first_exception:
        _print_first_exception(backend, run, rank, attempt or run.current_attempt)
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
    if not follow and tail is None and isinstance(backend, ChunkedLogs):
        # A whole log at once: copied in large chunks, not line by line.
        out = sys.stdout.buffer  # click.get_binary_stream warns: deprecated, to go in Click 9.0
        chunks = backend.log_chunks(run.name, rank=rank, attempt=attempt, prefix_ranks=many)
        for chunk in chunks if raw else logview.without_record_chunks(chunks):
            out.write(chunk)
        out.flush()
        return

    try:
        if tail is not None:
            # The last lines worth reading: a tail of records alone would show nothing.
            lines, tail = logview.tail_lines(
                lambda n: backend.logs(run.name, rank=rank, attempt=attempt, tail=n), tail, raw=raw
            )
            if not follow:
                for line in lines:
                    echo_line(line.text, line.rank, many)
                return
        stream = backend.logs(run.name, rank=rank, attempt=attempt, tail=tail, follow=follow)
        for line in stream if raw else logview.without_records(stream):
            echo_line(line.text, line.rank, many)
        if follow:
            info(_why_follow_ended(backend, run.name, attempt or run.current_attempt))
    except NotFoundError:
        if not follow:
            raise
        raise _deleted(run.name) from None


def _print_first_exception(backend, run, rank: int | None, attempt: int) -> None:
    """The attempt's first traceback, with a line saying whose and how it was found."""
    found = logview.first_exception(backend.logs(run.name, rank=rank, attempt=attempt))
    tb = found.traceback
    where = f"attempt {attempt} of run {run.name}" + (f", rank {rank}" if rank is not None else "")
    if tb is None:
        raise LauncherError(f"{where} has no Python traceback in its logs")
    if rank is not None or run.nodes == 1:
        how = "its first"
    elif found.by_time:
        how = "the earliest by time"
    else:
        how = "the first in rank order: these log lines carry no times"
    info(f"rank {tb.rank}, attempt {attempt}: {tb.exception} ({how})")
    for line in tb.lines:
        click.echo(line.text)


def _deleted(name: str) -> Exception:
    """A followed run deleted under the follow: its logs ended with nothing more to say, an error."""
    return LauncherError(f"run {name} was deleted while following its logs")


def _why_follow_ended(backend, name: str, followed: int) -> str:
    """One line on why a followed stream ended: the attempt ended, or a retry superseded
    it (a run that went away raises NotFoundError)."""
    run = backend.get(name)
    chosen = next((a for a in run.attempts if a.index == followed), None)
    if run.current_attempt > followed:
        why = f" ({chosen.status.value}: {chosen.reason})" if chosen and chosen.reason else ""
        return (
            f"attempt {followed} of run {name} ended{why}; the run goes on as attempt {run.current_attempt}: "
            f"`launcher logs {name} -f` follows it"
        )
    if run.status.is_terminal:
        return f"run {name} {run.status.value}" + (f": {run.reason}" if run.reason else "")
    status = chosen.status.value if chosen else run.status.value
    # A run that waits (a retry's backoff on the local backend) says why.
    return f"attempt {followed} of run {name} ended ({status}); the run is {run.status.value}" + (
        f": {run.reason}" if run.reason else ""
    )
