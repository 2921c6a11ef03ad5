"""The entrypoint's own log lines, distinguishable from the command's output."""

from __future__ import annotations

import sys

PREFIX = "[launcher]"


def log(message: str) -> None:
    sys.stdout.write(f"{PREFIX} {message}\n")
    sys.stdout.flush()
