"""Following a run: its status changes, then its logs (across retries), then its outcome."""

from __future__ import annotations

import shutil
import sys
import time

import click

from launcher.backends.base import Backend, LogLine, Run, RunStatus
from launcher.cli.common import FAIL, OK, info, warn
from launcher.metrics.progress import ProgressLine
from launcher.metrics.records import METRIC_PREFIX
from launcher.sdk.logs import follow_run as events
from launcher.sdk.records import until

PLAIN_EVERY = 10.0

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


# The entrypoint's last line (launcher.entrypoint.main).
EXIT_LINE = "[launcher] exit code"


def echo_line(text: str, rank: int, many_ranks: bool) -> None:
    click.echo(f"[rank {rank}] {text}" if many_ranks else text)


class LiveProgress:
    """Training progress while following: the trainer's metric records become a one-line
    status kept beneath the logs on a terminal, and compact plain lines otherwise. The
    records themselves stay in the run's logs (`launcher logs`, `launcher metrics`)."""

    def __init__(self) -> None:
        self.tracker = ProgressLine()
        self.live = sys.stderr.isatty() and sys.stdout.isatty()
        self.shown = False
        self.printed_at: float | None = None  # when a plain progress line was last printed
        self.pending: str | None = None

    def print(self, text: str, rank: int, many_ranks: bool) -> None:
        if METRIC_PREFIX in text:
            self.tracker.feed(text)
            status = self.tracker.render()
            if status and self.live:
                self._clear()
                sys.stderr.write(status[: _width()])
                sys.stderr.flush()
                self.shown = True
            elif status:
                self._plain(status)
            return
        self._clear()
        if self.pending and text.startswith(EXIT_LINE):
            self._plain(self.pending, force=True)  # the last progress belongs before the exit line
        echo_line(text, rank, many_ranks)
        if self.shown and (status := self.tracker.render()):  # shown: a step is rendered, and stays so
            sys.stderr.write(status[: _width()])
            sys.stderr.flush()

    def _clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()

    def _plain(self, status: str, *, force: bool = False) -> None:
        """Plain progress lines, at most one every PLAIN_EVERY seconds, so a long run's
        piped output stays readable."""
        now = time.monotonic()
        if force or self.printed_at is None or now - self.printed_at >= PLAIN_EVERY:
            click.echo(f"[progress] {status}")
            self.printed_at, self.pending = now, None
        else:
            self.pending = status

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\n")
            self.shown = False
        if self.pending:
            self._plain(self.pending, force=True)


def _width() -> int:
    return max(20, shutil.get_terminal_size().columns - 1)


def follow_run(backend: Backend, name: str, *, from_attempt: int = 1) -> int:
    """Print statuses then logs until the run ends; return the CLI exit code for its outcome.
    `from_attempt`: the first attempt whose logs are shown (a restarted run's new one)."""
    live = LiveProgress()
    try:
        return _follow(backend, name, live, from_attempt)
    except KeyboardInterrupt:
        live.close()
        click.echo("", err=True)
        info(f"Stopped following. Run {name} keeps running.")
        info(f"Follow it again with `launcher logs {name} -f`; stop it with `launcher stop {name}`.")
        return 130


def _follow(backend: Backend, name: str, live: LiveProgress, from_attempt: int = 1) -> int:
    """Print what the SDK's follow_run yields: statuses to stderr, log lines with the live
    progress, a line for each retry, and the outcome."""
    many = False
    for event in events(name, backend=backend, from_attempt=from_attempt):
        if isinstance(event, LogLine):
            live.print(event.text, event.rank, many)
            continue
        run = event.run
        many = run.nodes > 1
        if event.kind == "status":
            click.echo(_status_line(run), err=True)
        elif event.kind == "moved":
            info(event.note or f"Run {name} moved to cluster {run.cluster}")
        elif event.kind == "started":
            info(f"Run {name} started")
        elif event.kind == "retry_due":
            live.close()
            assert run.retry_at is not None  # events() says retry_due only while one is set
            info(f"Run {name} is {run.status.value}: {run.reason} ({until(run.retry_at)})")
        elif event.kind == "lost":
            live.close()
            warn(f"Run {name}: {event.note}")
        elif event.kind == "restarted":
            live.close()
            previous = next((a for a in run.attempts if a.index == event.attempt), None)
            why = f": {previous.reason}" if previous and previous.reason else ""
            info(f"Attempt {event.attempt} ended{why}. Restarting the whole group: attempt {event.attempt + 1}.")
        elif event.kind == "ended":
            live.close()
            return report_outcome(run)
    raise AssertionError("a followed run ends with an 'ended' event")


def report_outcome(run: Run) -> int:
    for warning in run.warnings:  # an outcome the state could not record (a full disk)
        click.echo(f"! {warning}", err=True)
    if run.status is RunStatus.COMPLETED:
        click.echo(f"{OK} Run {run.name} completed", err=True)
        return 0
    reason = f": {run.reason}" if run.reason else ""
    click.echo(f"{FAIL} Run {run.name} {run.status.value.lower()}{reason}", err=True)
    return 1
