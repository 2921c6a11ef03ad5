"""Run the entrypoint's child processes: integration steps and the user's command.

Each child runs in its own process group with stdin closed and stdout+stderr
merged, read line by line and written out masked. SIGTERM and SIGINT received by
the entrypoint go to the whole group of the child running at the time, so a stop
reaches every process the command started (torchrun's workers, a pip build);
after a grace period (LAUNCHER_GRACE_SECONDS, default 30 s) the group gets SIGKILL.
A second signal sends SIGKILL at once. When no child is running (between steps,
while waiting for rank 0) a stop signal raises `Stopped` in the main thread.

When the child exits, what is left of its group (background jobs it started) is
killed: a container ends the same way when its main process exits, and a local
run must not leave orphans behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from launcher.entrypoint import contract
from launcher.entrypoint import log as out
from launcher.secrets.mask import Masker

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stopped(Exception):
    """A stop signal arrived while no child was running."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.exit_code = 128 + signum


class _State:
    child: subprocess.Popen | None = None
    starting = False
    signum: int | None = None


_state = _State()


def masker_from_env(env: dict[str, str]) -> Masker:
    values: list[str] = []
    for name in filter(None, env.get(contract.MASK_ENV, "").split(",")):
        if env.get(name):
            values.append(env[name])
    for path in filter(None, env.get(contract.MASK_FILES, "").split(os.pathsep)):
        try:
            text = Path(path).read_text(errors="replace")
        except OSError:
            continue
        values.append(text)
        values.append(text.strip())
        values.extend(line.strip() for line in text.splitlines() if len(line.strip()) >= 8)
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
    """The first stop signal received, if any."""
    return _state.signum


def _killpg(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _on_signal(signum: int, _frame) -> None:
    first = _state.signum is None
    if first:
        _state.signum = signum
    child = _state.child
    if child is None:
        if _state.starting:
            return  # run() forwards it as soon as the child exists
        raise Stopped(signum)
    if first:
        _forward(child, signum)
    else:
        _killpg(child.pid, signal.SIGKILL)


def _forward(child: subprocess.Popen, signum: int) -> None:
    _killpg(child.pid, signum)
    # Logging and waiting happen in a thread: a signal handler must not block or
    # re-enter the stdout writer.
    threading.Thread(target=_escalate, args=(child, signum), daemon=True).start()


def _escalate(child: subprocess.Popen, signum: int) -> None:
    grace = grace_seconds()
    out.log(f"received {signal.Signals(signum).name}: passed it on to the running process group; "
            f"SIGKILL in {grace:g}s if it has not exited")
    try:
        child.wait(grace)
    except subprocess.TimeoutExpired:
        out.log(f"the process group did not exit within {grace:g}s: sending SIGKILL")
        _killpg(child.pid, signal.SIGKILL)


def _pump(stream, on_line: Callable[[str], None]) -> None:
    for raw in iter(stream.readline, b""):
        text = raw.decode("utf-8", errors="replace")
        on_line(text if text.endswith("\n") else text + "\n")  # a last line without newline


def run(argv: list[str], *, cwd: Path | str, env: dict[str, str],
        on_line: Callable[[str], None] = out.write) -> int:
    """Run `argv` (never through a shell unless argv says so) and return its exit
    code, or 128+N when a signal N ended it. Each output line, newline-terminated,
    goes to `on_line` (default: stdout, masked). Raises Stopped if a stop signal
    came before."""
    if _state.signum is not None:
        raise Stopped(_state.signum)
    _state.starting = True
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True,
        )
        _state.child = proc
    finally:
        _state.starting = False
    if _state.signum is not None:
        _forward(proc, _state.signum)
    reader = threading.Thread(target=_pump, args=(proc.stdout, on_line), daemon=True)
    reader.start()
    try:
        code = proc.wait()
    finally:
        _state.child = None
        _killpg(proc.pid, signal.SIGKILL)  # leftover background processes of the group
        # A process that left the group (setsid) may still hold the pipe: do not wait on it forever.
        reader.join(timeout=5)
    return code if code >= 0 else 128 - code
