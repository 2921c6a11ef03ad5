"""Stragglers: a rank whose step time over its last contract.STEP_WINDOW steps is more than
resilience.straggler_factor times the median of the other ranks' (the others': with two
ranks the median of both would hide the slow one).

Each rank's entrypoint times its steps (launcher.entrypoint.watch) and hands its step time
to the backend, which compares the ranks with `stragglers` here: the local supervisor
reads each rank's progress file (contract.PROGRESS_FILE) while they run; a rank in a
container also leaves it as the last line of its termination message (`PROGRESS_PREFIX`
and JSON), which a pod's status carries back when it ends (`from_termination_message`).
Standard library only: the entrypoint runs it on any Python 3.8 (launcher.pod.zipapp).
"""

from __future__ import annotations

import json
import statistics
from typing import NamedTuple

from launcher.pod.contract import STEP_WINDOW

PROGRESS_PREFIX = "@@launcher.progress "
"""A termination message's line with the rank's progress: {"step", "step_seconds", "steps_timed"}."""


class Straggler(NamedTuple):
    rank: int
    seconds: float
    median: float
    """The median step time of the other ranks."""


def timed(progress: object) -> float | None:
    """The step time a rank's progress ({"step_seconds", "steps_timed"}) gives, where it timed a
    whole window of steps; None otherwise."""
    if not isinstance(progress, dict):
        return None
    seconds = progress.get("step_seconds")
    steps = progress.get("steps_timed")
    if isinstance(seconds, (int, float)) and seconds > 0 and isinstance(steps, int) and steps >= STEP_WINDOW:
        return float(seconds)
    return None


def stragglers(times: dict[int, float], factor: float) -> list[Straggler]:
    """The ranks of `times` (rank -> step time) slower than `factor` × the others' median."""
    out = []
    for rank, seconds in sorted(times.items()):
        others = [v for r, v in times.items() if r != rank]
        if not others:
            continue
        median = statistics.median(others)
        if seconds > factor * median:
            out.append(Straggler(rank, seconds, median))
    return out


def line(s: Straggler, node: str | None, factor: float) -> str:
    """How a straggler is named, in its log and under its attempt in describe."""
    return (
        f"straggler: rank {s.rank} on {node or 'an unknown node'}: {s.seconds:.3f} s a step against the other "
        f"ranks' median {s.median:.3f} s ({s.seconds / s.median:.1f}x, resilience.straggler_factor {factor:g}) "
        f"over its last {STEP_WINDOW} steps"
    )


def termination_line(progress: dict[str, object]) -> str:
    return PROGRESS_PREFIX + json.dumps(progress, separators=(",", ":"))


def from_termination_message(message: str | None) -> tuple[list[str], dict | None]:
    """A termination message's other lines, and the progress its entrypoint left in it (None: none)."""
    lines, progress = [], None
    for text in (message or "").splitlines():
        if text.startswith(PROGRESS_PREFIX):
            try:
                progress = json.loads(text[len(PROGRESS_PREFIX) :])
            except ValueError:
                pass
        else:
            lines.append(text)
    return lines, progress
