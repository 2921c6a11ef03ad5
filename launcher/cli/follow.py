"""Following a run: its status changes, then its logs (across retries), then its outcome."""

from __future__ import annotations

import sys

import click

from launcher.backends.base import Backend, Run, RunStatus
from launcher.cli.common import FAIL, OK, info

WAITING = {
    RunStatus.PENDING: "Waiting in run queue…",
    RunStatus.QUEUED: "Waiting for resources…",
    RunStatus.STARTING: "Starting…",
}


def _status_line(run: Run) -> str:
    text = f"{run.status.value:<11} {run.name}"
    if run.status in WAITING:
        text += f"  {WAITING[run.status]}"
    if run.reason and not run.status.is_terminal:
        text += f"  ({run.reason})"
    return text


def echo_line(text: str, rank: int, many_ranks: bool) -> None:
    click.echo(f"[rank {rank}] {text}" if many_ranks else text)


class LiveProgress:
    """On a terminal, a one-line training status kept beneath the streaming logs."""

    def __init__(self) -> None:
        self.tracker = None
        self.shown = False
        if sys.stderr.isatty() and sys.stdout.isatty():
            try:
                from launcher.metrics.progress import ProgressLine
            except ImportError:
                return
            self.tracker = ProgressLine()

    def print(self, text: str, rank: int, many_ranks: bool) -> None:
        if self.tracker is None:
            echo_line(text, rank, many_ranks)
            return
        if self.shown:
            sys.stderr.write("\r\033[K")
        echo_line(text, rank, many_ranks)
        self.tracker.feed(text)
        status = self.tracker.render()
        if status:
            sys.stderr.write(status[: _width()])
            sys.stderr.flush()
            self.shown = True

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\n")
            self.shown = False


def _width() -> int:
    import shutil

    return max(20, shutil.get_terminal_size().columns - 1)


def follow_run(backend: Backend, name: str) -> int:
    """Print statuses then logs until the run ends; return the CLI exit code for its outcome."""
    live = LiveProgress()
    try:
        return _follow(backend, name, live)
    except KeyboardInterrupt:
        live.close()
        click.echo("", err=True)
        info(f"Stopped following. Run {name} keeps running.")
        info(f"Follow it again with `launcher logs {name} -f`; stop it with `launcher stop {name}`.")
        return 130


def _follow(backend: Backend, name: str, live: LiveProgress) -> int:
    run = None
    for run in backend.watch(name):
        if run.status.is_terminal:
            break
        click.echo(_status_line(run), err=True)
        if run.status in (RunStatus.RUNNING, RunStatus.TERMINATING):
            break
    assert run is not None
    if run.started_at is not None:
        info(f"Run {name} started")
    attempt = run.current_attempt
    many = run.nodes > 1
    while True:
        # A backend's follow stream returns once the attempt is over.
        for line in backend.logs(name, attempt=attempt, follow=True):
            live.print(line.text, line.rank, many)
        run = backend.get(name)
        if not run.status.is_terminal and run.current_attempt == attempt:
            for run in backend.watch(name):
                if run.status.is_terminal or run.current_attempt > attempt:
                    break
        if run.current_attempt > attempt:
            live.close()
            previous = next((a for a in run.attempts if a.index == attempt), None)
            why = f": {previous.reason}" if previous and previous.reason else ""
            info(f"Attempt {attempt} ended{why}. Restarting the whole group: attempt {attempt + 1}.")
            attempt += 1
            continue
        break
    live.close()
    return report_outcome(run)


def report_outcome(run: Run) -> int:
    if run.status is RunStatus.COMPLETED:
        click.echo(f"{OK} Run {run.name} completed", err=True)
        return 0
    reason = f": {run.reason}" if run.reason else ""
    click.echo(f"{FAIL} Run {run.name} {run.status.value.lower()}{reason}", err=True)
    return 1
