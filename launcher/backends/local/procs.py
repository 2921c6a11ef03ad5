"""Process helpers: identity that survives pid reuse, and group signalling."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path


def start_time(pid: int) -> str | None:
    """The kernel's start time of `pid` (clock ticks since boot), or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None if not _exists(pid) else "?"
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = stat[stat.rfind(")") + 2 :].split()
    if fields and fields[0] == "Z":  # a zombie has finished
        return None
    return fields[19] if len(fields) > 19 else "?"


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def alive(pid: int | None, started: str | None) -> bool:
    if not pid:
        return False
    now = start_time(pid)
    if now is None:
        return False
    return started in (None, "?") or now in ("?", started)


def signal_group(pid: int, sig: int) -> bool:
    try:
        os.killpg(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def terminate_groups(pids: list[int], grace: float) -> None:
    """SIGTERM each process group, then SIGKILL whatever is left after `grace` seconds."""
    live = [p for p in pids if signal_group(p, signal.SIGTERM)]
    deadline = time.monotonic() + grace
    while live and time.monotonic() < deadline:
        live = [p for p in live if _group_exists(p)]
        time.sleep(0.05)
    for p in live:
        signal_group(p, signal.SIGKILL)


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
