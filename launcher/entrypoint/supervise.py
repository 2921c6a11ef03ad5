"""Run the entrypoint's child processes: integration steps and the user's command.

Each child runs in its own session with stdin closed and stdout+stderr merged
into one pipe, read in large chunks and written out masked (a value split across
reads or lines is still caught). SIGTERM and SIGINT received by the entrypoint
go to the whole process group of the child running at the time, so a stop
reaches every process the command started (torchrun's workers, a pip build);
after a grace period (LAUNCHER_GRACE_SECONDS, default 30 s) the group gets
SIGKILL. A second signal sends SIGKILL at once. Before the command starts (between
steps, while waiting for rank 0) a stop signal raises `Stopped` in the main
thread; once the command has exited, a signal changes nothing: its exit code
stands.

The entrypoint is a child subreaper (see launcher/pod/reaper.py): processes that leave the
command's group or session still end up below it. When the child exits, every
process left below the entrypoint is killed and reaped (a container ends the
same way when its main process exits, and a local run must not leave orphans),
and while a child runs, orphans handed to the entrypoint are reaped as they exit.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import threading
import time
from collections import deque
from pathlib import Path
from typing import TypeVar

from launcher.entrypoint import log as out
from launcher.pod import contract, reaper
from launcher.secrets.kinds import PUBLIC_ENV
from launcher.secrets.mask import Masker, MaskingStream, mask_candidates

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
READ_SIZE = 1 << 20
F_SETPIPE_SZ = 1031


class Stopped(BaseException):
    """A stop signal arrived before the command started. A BaseException, so that no
    `except Exception` on the way (reading a spec, cloning) mistakes it for a failure."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.exit_code = 128 + signum


SETUP, STARTING, RUNNING, DONE = "setup", "starting", "running", "done"


class _State:
    child: subprocess.Popen | None = None
    phase = SETUP
    signum: int | None = None
    late_signal: int | None = None  # a signal that came after the command exited
    chunks = 0  # chunks the reader has read, to tell a slow stdout from a pipe held elsewhere
    reading = False  # the reader waits for the pipe (not for stdout)
    exited = threading.Event()
    forwarded_at: float | None = None  # when a stop signal was passed to the running child's group


_state = _State()


def masker_from_env(env: dict[str, str]) -> Masker:
    values: list[str] = []
    for name in filter(None, env.get(contract.MASK_ENV, "").split(",")):
        if env.get(name) and name not in PUBLIC_ENV:
            values.extend(mask_candidates(env[name]))
    for path in filter(None, env.get(contract.MASK_FILES, "").split(os.pathsep)):
        try:
            # Bytes, then text: read_text would turn a '\r' into '\n' (universal newlines),
            # and the value's forms (JSON-escaped, its lines) would no longer be what the run prints.
            text = Path(path).read_bytes().decode("utf-8", errors="replace")
        except OSError:
            continue
        values.extend(mask_candidates(text))
    return Masker(values)


def grace_seconds(env: dict[str, str] | None = None) -> float:
    raw = (env if env is not None else os.environ).get(contract.GRACE_SECONDS, "")
    try:
        return max(0.0, float(raw)) if raw else contract.DEFAULT_GRACE_SECONDS
    except ValueError:
        return contract.DEFAULT_GRACE_SECONDS


def install_signal_handlers() -> None:
    for s in STOP_SIGNALS:
        signal.signal(s, _on_signal)


def stop_signal() -> int | None:
    """The first stop signal received before the command exited, if any."""
    return _state.signum


def late_signal() -> int | None:
    """A stop signal that came after the command had exited (it changed nothing)."""
    return _state.late_signal


def finish() -> None:
    """The entrypoint is ending (the command ran, or will not): from now on a signal
    changes nothing, and nothing raises while the last lines are written."""
    _state.phase = DONE


def _killpg(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _on_signal(signum: int, _frame) -> None:
    if _state.phase == DONE:
        _state.late_signal = _state.late_signal or signum
        return
    first = _state.signum is None
    if first:
        _state.signum = signum
    child = _state.child
    if _state.phase == STARTING or (_state.phase == RUNNING and child is None):
        return  # run() forwards it as soon as the child exists
    if child is None:
        if first:
            raise Stopped(signum)
        return  # already stopping
    if first:
        _forward(child, signum)
    else:
        _killpg(child.pid, signal.SIGKILL)


def _forward(child: subprocess.Popen, signum: int) -> None:
    _state.forwarded_at = time.monotonic()
    _killpg(child.pid, signum)
    # Logging and waiting happen in a thread: a signal handler must not block or
    # re-enter the stdout writer.
    threading.Thread(target=_escalate, args=(child, signum), daemon=True).start()


def _escalate(child: subprocess.Popen, signum: int) -> None:
    grace = grace_seconds()
    out.log(
        f"received {signal.Signals(signum).name}: passed it on to the running process group; "
        f"SIGKILL in {grace:g}s if it has not exited"
    )
    if not _state.exited.wait(grace):
        out.log(f"the process group did not exit within {grace:g}s: sending SIGKILL")
        _killpg(child.pid, signal.SIGKILL)


def _let_the_rest_exit(deadline: float) -> None:
    """After a stop the command's leader may exit before the rest of its group: a shell
    dies of SIGTERM at once while its children (torchrun's workers) still run their
    handlers. What is left below us gets the rest of the grace period to exit on the signal
    it was sent, as the group would have had, before the SIGKILL that follows."""
    me = os.getpid()
    while time.monotonic() < deadline and reaper.descendants(me):
        reaper.reap_children()
        time.sleep(0.05)


_Line = TypeVar("_Line", bytes, str)


def _last(lines: list[_Line], tail: deque[str]) -> list[_Line]:
    """The lines `tail` keeps: all of them when it is unbounded."""
    return lines[-tail.maxlen :] if tail.maxlen else lines


def _pump(fd: int, tail: deque[str] | None, watch=None) -> None:
    stream = MaskingStream(out.masker())
    partial = b""
    while True:
        _state.reading = True
        try:
            chunk = os.read(fd, READ_SIZE)
        except InterruptedError:
            continue
        except OSError:
            break
        finally:
            _state.reading = False
        _state.chunks += 1
        if not chunk:
            break
        data = stream.feed(chunk)
        out.write_chunk(data)
        if watch is not None:
            watch.feed(data)
        if tail is not None and data:
            lines = (partial + data).split(b"\n")
            partial = lines.pop()
            tail.extend(x.decode("utf-8", "replace").rstrip("\r") for x in _last(lines, tail))
    rest = stream.flush()
    if rest:
        out.write_chunk(rest)
        if watch is not None:
            watch.feed(rest)
    if tail is not None and (partial + rest):
        tail.extend(_last((partial + rest).decode("utf-8", "replace").split("\n"), tail))


def exit_code(status: int) -> int:
    """os.waitstatus_to_exitcode, which Python 3.8 lacks: -N for a signal N."""
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _wait(proc: subprocess.Popen) -> int:
    """Wait for `proc`, reaping any orphan handed to us meanwhile."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return proc.wait()
        if pid == proc.pid:
            proc.returncode = exit_code(status)
            return proc.returncode


def run(
    argv: list[str],
    *,
    cwd: Path | str,
    env: dict[str, str],
    tail: deque | None = None,
    final: bool = False,
    watch=None,
) -> int:
    """Run `argv` (never through a shell unless argv says so) and return its exit
    code, or 128+N when a signal N ended it. Its output goes to stdout, masked; the
    last lines also to `tail` when given, and every chunk to `watch` (launcher.entrypoint.watch),
    which also watches the child's progress while it runs. `final`: this is the command,
    so signals after it exits change nothing. Raises Stopped if a stop signal came before."""
    if _state.signum is not None:
        raise Stopped(_state.signum)
    reaper.become_subreaper()
    read_fd, write_fd = os.pipe()
    with contextlib.suppress(OSError):
        fcntl.fcntl(read_fd, F_SETPIPE_SZ, READ_SIZE)  # fewer, larger reads
    _state.phase = STARTING
    _state.exited.clear()
    _state.forwarded_at = None
    try:
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=write_fd,
                stderr=write_fd,
                start_new_session=True,
            )
        finally:
            os.close(write_fd)
        _state.child = proc
    except BaseException:
        os.close(read_fd)
        _state.phase = SETUP
        raise
    _state.phase = RUNNING
    if _state.signum is not None:
        _forward(proc, _state.signum)
    reader = threading.Thread(target=_pump, args=(read_fd, tail, watch), daemon=True)
    reader.start()
    if watch is not None:
        watch.start(proc)
    try:
        code = _wait(proc)
    finally:
        if final:
            _state.phase = DONE
        _state.exited.set()
        _state.child = None
        if _state.forwarded_at is not None:
            _let_the_rest_exit(_state.forwarded_at + grace_seconds())
        _killpg(proc.pid, signal.SIGKILL)  # leftover background processes of the group
        me = os.getpid()
        reaper.kill_all(lambda: reaper.descendants(me), reap=True)
        # Everything that held the pipe is gone, so the reader ends once it has written
        # out what is buffered (however slowly stdout takes it). Only a pipe still held
        # elsewhere with nothing coming through (passed to a process outside our tree)
        # is given up on.
        while True:
            seen = _state.chunks
            reader.join(timeout=5)
            if not reader.is_alive() or (_state.chunks == seen and _state.reading):
                break
        if not reader.is_alive():
            os.close(read_fd)
        if watch is not None:
            watch.stop()
        if not final:
            _state.phase = SETUP
    return code if code >= 0 else 128 - code
