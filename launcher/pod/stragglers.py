"""Stragglers: a rank whose step time over its last contract.STEP_WINDOW steps is more than
resilience.straggler_factor times the median of the other ranks' (the others': with two
ranks the median of both would hide the slow one).

Each rank's entrypoint times its steps (launcher.entrypoint.watch), and the ranks are
compared with `stragglers` here while they run: by the local supervisor, which reads each
rank's progress file (contract.PROGRESS_FILE), or, where the ranks are on different nodes,
by rank 0's entrypoint, to which the others send their step times
(launcher.entrypoint.progress), and which leaves the lines naming them in its termination
message. A rank in a container also leaves its own step time as the last line of its
termination message (`PROGRESS_PREFIX` and JSON), which a pod's status carries back when
it ends (`from_termination_message`), so the host compares the ranks once more.
Standard library only: the entrypoint runs it on any Python 3.8 (launcher.pod.zipapp).
"""

from __future__ import annotations

import bisect
import json
import re
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
    """The ranks of `times` (rank -> step time) slower than `factor` × the others' median.
    O(n log n): rank 0's entrypoint judges every rank of a large run twice a second
    (launcher.entrypoint.progress), so each rank's `others` is the sorted times less one
    (any one of its value: equal values leave the same list), not a list of its own."""
    ordered = sorted(times.values())
    m = len(ordered) - 1  # how many others each rank has
    if m < 1:
        return []

    def other(i: int, j: int) -> float:  # the j-th of the sorted times without the i-th
        return ordered[j] if j < i else ordered[j + 1]

    out = []
    for rank, seconds in sorted(times.items()):
        i = bisect.bisect_left(ordered, seconds)
        median = other(i, m // 2) if m % 2 else (other(i, m // 2 - 1) + other(i, m // 2)) / 2
        if seconds > factor * median:
            out.append(Straggler(rank, seconds, median))
    return out


PREFIX = "straggler: "
UNKNOWN_NODE = "an unknown node"
_NAMED = re.compile(r"straggler: rank (\d+) on ([^\s:]+|" + UNKNOWN_NODE + r"): ")


def line(s: Straggler, node: str | None, factor: float) -> str:
    """How a straggler is named, in its log and under its attempt in describe."""
    return (
        f"{PREFIX}rank {s.rank} on {node or UNKNOWN_NODE}: {s.seconds:.3f} s a step against the other "
        f"ranks' median {s.median:.3f} s ({s.seconds / s.median:.1f}x, resilience.straggler_factor {factor:g}) "
        f"over its last {STEP_WINDOW} steps"
    )


def named_in(text: str | None) -> tuple[int, str | None] | None:
    """The rank and node (None: unknown) of the straggler a text names (a `line`, or
    evidence that holds one), if it names one."""
    m = _NAMED.search(text or "")
    if m is None:
        return None
    return int(m.group(1)), None if m.group(2) == UNKNOWN_NODE else m.group(2)


def termination_line(progress: dict[str, object]) -> str:
    return PROGRESS_PREFIX + json.dumps(progress, separators=(",", ":"))


def from_termination_message(message: str | None) -> tuple[list[str], dict | None, list[str]]:
    """A termination message's other lines, the progress its entrypoint left in it (None:
    none), and the lines naming stragglers (rank 0's, where it compared the ranks live)."""
    lines, progress, named = [], None, []
    for text in (message or "").splitlines():
        if text.startswith(PROGRESS_PREFIX):
            try:
                progress = json.loads(text[len(PROGRESS_PREFIX) :])
            except ValueError:
                pass
        elif text.startswith(PREFIX):
            named.append(text)
        else:
            lines.append(text)
    return lines, progress, named
