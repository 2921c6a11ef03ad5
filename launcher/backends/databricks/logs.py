"""A run's log: what cluster log delivery wrote to the profile's Volume
(<log_volume>/<run>/<cluster_id>/driver/stdout, and stderr once the run ended), else
runs/get-output's logs (its last 5 MB, only once the run ended). Lines of a run of several
processes carry the driver's `[rank N] ` prefix (driver_script.py): they are split by rank
here again; every other line is the driver's own, rank 0's. The entrypoint has masked every
secret value before a line reaches the driver's stdout."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from launcher.backends.base import LogLine
from launcher.backends.databricks.errors import calls
from launcher.backends.databricks.render import log_destination
from launcher.backends.databricks.status import cluster_id_of, status_of, task_run_id_of

if TYPE_CHECKING:
    from launcher.backends.databricks.backend import DatabricksBackend

RANK_LINE = re.compile(r"^\[rank (\d+)\] ")
POLL_SECONDS = 1.0


def split_ranks(text: str, attempt: int) -> list[LogLine]:
    out = []
    for line in text.splitlines():
        m = RANK_LINE.match(line)
        out.append(LogLine(int(m.group(1)), line[m.end() :], attempt) if m else LogLine(0, line, attempt))
    return out


def _download(backend: DatabricksBackend, path: str) -> str | None:
    from databricks.sdk import errors

    with calls(backend.profile.where, f"reading {path}"):
        try:
            answer = backend.client.files.download(path)
        except errors.NotFound:
            return None  # not delivered yet
        assert answer.contents is not None
        with answer.contents as f:
            return f.read().decode("utf-8", "replace")


def fetch(backend: DatabricksBackend, name: str, job_run: Any, ended: bool) -> str:
    """The attempt's log text as far as it can be read now."""
    destination = log_destination(backend.profile, name)
    cluster_id = cluster_id_of(job_run) if job_run is not None else None
    if destination and cluster_id:
        base = f"{destination}/{cluster_id}/driver"
        stdout = _download(backend, f"{base}/stdout")
        if stdout is not None:
            stderr = _download(backend, f"{base}/stderr") if ended else None
            return stdout + (stderr or "")
    task_run_id = task_run_id_of(job_run) if job_run is not None else None
    if ended and task_run_id is not None:
        with calls(backend.profile.where, f"reading the output of run {name}"):
            output = backend.client.jobs.get_run_output(task_run_id)
        return output.logs or ""
    return ""


def read_logs(
    backend: DatabricksBackend,
    name: str,
    attempt: int,
    run_id: int,
    *,
    rank: int | None,
    tail: int | None,
    follow: bool,
    cancel: threading.Event | None,
) -> Iterator[LogLine]:
    def wanted(lines: list[LogLine]) -> list[LogLine]:
        return [ln for ln in lines if rank is None or ln.rank == rank]

    job_run = backend._job_run(run_id)
    ended = job_run is None or status_of(job_run)[0].is_terminal
    lines = wanted(split_ranks(fetch(backend, name, job_run, ended), attempt))
    seen = len(lines)
    if tail is not None:
        lines = lines[-tail:] if tail > 0 else []
    yield from lines
    if not follow or ended:
        return
    while not ended:
        if cancel is not None:
            if cancel.wait(POLL_SECONDS):
                return
        else:
            time.sleep(POLL_SECONDS)
        job_run = backend._job_run(run_id)
        ended = job_run is None or status_of(job_run)[0].is_terminal
        now = wanted(split_ranks(fetch(backend, name, job_run, False), attempt))
        yield from now[seen:]
        seen = max(seen, len(now))
    if job_run is not None:  # what the run wrote to stderr at its end (a driver's error)
        final = wanted(split_ranks(fetch(backend, name, job_run, True), attempt))
        yield from final[seen:]
