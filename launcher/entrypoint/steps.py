"""One integration step: a program run from an argv list (never a shell string),
its output streamed to the log and its last lines kept for the failure message."""

from __future__ import annotations

import shlex
from collections import deque
from pathlib import Path

from launcher.entrypoint import log as out
from launcher.entrypoint import supervise

TAIL_LINES = 20


class StepFailed(Exception):
    """An integration step failed; `step` names the integration, `tail` holds the
    last lines the failed program printed."""

    def __init__(self, message: str, tail: list[str] | None = None, step: str = ""):
        super().__init__(message)
        self.message = message
        self.tail = list(tail or [])
        self.step = step


def run_step(argv: list[str], *, cwd: Path, env: dict[str, str], what: str = "", check: bool = True) -> int:
    """Run one program; with `check`, raise StepFailed (naming it `what`, e.g.
    "git clone") unless it exits 0. Raises supervise.Stopped if a stop signal ended it."""
    out.log(f"$ {shlex.join(argv)}")
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    try:
        code = supervise.run(argv, cwd=cwd, env=env, tail=tail)
    except OSError as e:  # the program is missing, or cwd is
        raise StepFailed(f"cannot start {argv[0]} in {cwd}: {e.strerror or e}") from None
    signum = supervise.stop_signal()
    if code and signum is not None:
        raise supervise.Stopped(signum)
    if code and check:
        what = what or " ".join([Path(argv[0]).name, *argv[1:2]])
        raise StepFailed(f"{what} failed with exit code {code}", list(tail))
    return code
