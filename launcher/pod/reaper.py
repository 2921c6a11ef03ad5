"""Owning every process a rank starts, whatever it does to escape.

A program can leave its process group and session (setsid, a daemon's double
fork), so signalling a group is not enough. Two things hold regardless:
- a *child subreaper* (PR_SET_CHILD_SUBREAPER, Linux) inherits every orphan
  among its descendants instead of init, so the whole tree stays below it and
  can be found through /proc; PID 1 of a container gets orphans anyway, and
  must reap them, or zombies pile up;
- every process of a run inherits the environment variable contract.OWNER,
  which /proc/PID/environ shows even after its parent is gone, so the
  processes of a run are found even when their supervisor died.

Linux-only features degrade to doing nothing elsewhere.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make orphaned descendants of this process its children. True if it took."""
    if os.getpid() == 1:
        return True  # init of a PID namespace: orphans come here already
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state letter) of `pid`, or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_bytes().decode("utf-8", "replace")
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    return int(fields[1]), fields[0]


def _pids() -> list[int]:
    try:
        return [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return []


def descendants(root: int) -> list[int]:
    """Every live (non-zombie) process below `root`, parents before children."""
    children: dict[int, list[int]] = {}
    for pid in _pids():
        st = _stat(pid)
        if st and st[1] != "Z":
            children.setdefault(st[0], []).append(pid)
    out: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def owned_by(marker: str, name: str) -> list[int]:
    """Live processes whose environment has name=marker (any parent)."""
    needle = f"{name}={marker}".encode()
    me = os.getpid()
    out = []
    for pid in _pids():
        if pid == me:
            continue
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            st = _stat(pid)
            if st and st[1] != "Z":
                out.append(pid)
    return out


def reap_children() -> None:
    """Collect every child that has exited (orphans handed to a subreaper)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_all(find, *, reap: bool, timeout: float = 5.0) -> list[int]:
    """SIGKILL what `find()` returns until it returns nothing (a process may fork
    while we look) or `timeout` passes; returns the pids still alive then."""
    deadline = time.monotonic() + timeout
    while True:
        pids = find()
        if not pids or time.monotonic() >= deadline:
            return pids
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
        if reap:
            reap_children()
