"""The entrypoint's watch over the running command (the spec's `resilience` section):

* evidence: the first line of each failure class (launcher.pod.failures) in the command's
  output, kept as it streams past, for the exit file;
* progress: a metric record (contract.METRIC_PREFIX, what the trainers print each step), a
  heartbeat line `@@launcher.heartbeat {"step": N}`, or the `launcher-heartbeat STEP`
  command this module puts on the command's PATH (it appends such a line to a file the
  watch reads, so a command whose stdout goes elsewhere still beats);
* hangs: once the rank has shown progress, none for resilience.hang_timeout ends the
  command as a hang (contract.EXIT_HANG), after dumping the Python stacks of its processes
  into the log: with py-spy where it is on PATH, else through faulthandler (the command's
  Python processes start with PYTHONFAULTHANDLER=1, which dumps every thread's stack on
  SIGABRT). A rank that never shows progress is never called hung: the watch cannot tell
  a quiet program from a stuck one.

Watching a chunk costs one substring test and one regex search in C over bytes already in
memory (bench/bench_watch.py measures it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from launcher.entrypoint import log as out
from launcher.pod import contract, reaper
from launcher.pod.failures import Evidence

HEARTBEAT_PREFIX = b"@@launcher.heartbeat "
MARKER = b"@@launcher."
METRIC_PREFIX = contract.METRIC_PREFIX.encode()
HEARTBEAT_FILE = "LAUNCHER_HEARTBEAT_FILE"
HEARTBEAT_COMMAND = "launcher-heartbeat"
# How often the watch looks at the heartbeat file and the clock: a hang is called at most
# this long after hang_timeout.
TICK_SECONDS = 0.5
# After the stacks are asked for, how long their output has to reach the log before the
# command's group is ended.
DUMP_SECONDS = 3.0

_HEARTBEAT_SCRIPT = """#!/bin/sh
# launcher-heartbeat [STEP]: tell the launcher this rank made progress (docs/resilience.md).
step="${1:-null}"
case "$step" in ''|*[!0-9]*) step=null ;; esac
printf '@@launcher.heartbeat {"step": %s}\\n' "$step" >> "$LAUNCHER_HEARTBEAT_FILE"
"""


class Watch:
    def __init__(self, hang_timeout: float | None, run_dir: Path | None = None):
        self.hang_timeout = hang_timeout
        self.evidence = Evidence()
        self.step: int | None = None
        self.last_progress: float | None = None
        """When progress was last seen (time.monotonic()); None before any."""
        self.hung: str | None = None
        """Why the watch ended the command as a hang, once it did."""
        self.heartbeat_file: Path | None = None
        self._heartbeat_read = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._run_dir = run_dir

    # ----------------------------------------------------------- the command's environment

    def prepare(self, env: dict[str, str]) -> None:
        """Put `launcher-heartbeat` on the command's PATH, and have its Python processes dump
        their stacks on SIGABRT (faulthandler) where a hang may have to ask for them."""
        base = self._run_dir or Path(os.environ.get("TMPDIR") or "/tmp")
        try:
            bindir = Path(tempfile.mkdtemp(prefix="launcher-watch-", dir=str(base) if base.is_dir() else None))
            script = bindir / HEARTBEAT_COMMAND
            script.write_text(_HEARTBEAT_SCRIPT)
            script.chmod(0o755)
            self.heartbeat_file = bindir / "heartbeats"
            self.heartbeat_file.touch()
        except OSError as e:
            out.log(f"note: cannot put {HEARTBEAT_COMMAND} on PATH: {e.strerror or e}; heartbeat lines still count")
            return
        env[HEARTBEAT_FILE] = str(self.heartbeat_file)
        env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH') or os.defpath}"
        if self.hang_timeout is not None:
            env.setdefault("PYTHONFAULTHANDLER", "1")

    # ----------------------------------------------------------- what the command prints

    def feed(self, chunk: bytes) -> None:
        """One chunk of the command's (masked) output."""
        self.evidence.feed(chunk)
        if MARKER in chunk:
            self._progress_in(chunk)

    def _progress_in(self, data: bytes) -> None:
        for prefix in (HEARTBEAT_PREFIX, METRIC_PREFIX):
            at = data.rfind(prefix)
            if at < 0:
                continue
            end = data.find(b"\n", at)
            if end < 0 and prefix == METRIC_PREFIX:
                continue  # a record cut by the chunk: the next chunk has its end
            body = data[at + len(prefix) : end if end >= 0 else len(data)]
            step = None
            try:
                record = json.loads(body.decode("utf-8", "replace"))
                if isinstance(record, dict) and isinstance(record.get("step"), int):
                    step = record["step"]
            except ValueError:
                pass
            self._progressed(step)

    def _progressed(self, step: int | None) -> None:
        self.last_progress = time.monotonic()
        if step is not None:
            # The heartbeat file is read a tick late: a step already seen on stdout stands.
            self.step = step if self.step is None else max(self.step, step)

    def _read_heartbeats(self) -> None:
        if self.heartbeat_file is None:
            return
        try:
            with open(self.heartbeat_file, "rb") as f:
                f.seek(self._heartbeat_read)
                data = f.read()
                written = os.fstat(f.fileno()).st_mtime
        except OSError:
            return
        if data:
            before = self.last_progress
            self._heartbeat_read += len(data)
            self._progress_in(data)
            self.last_progress = before
            # Read up to a tick late: the beat came when the file was written.
            beat = time.monotonic() - max(0.0, time.time() - written)
            self.last_progress = beat if self.last_progress is None else max(self.last_progress, beat)

    # ----------------------------------------------------------- watching the clock

    def start(self, child: subprocess.Popen) -> None:
        self._thread = threading.Thread(target=self._run, args=(child,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.evidence.close()
        if self._thread is not None:
            self._thread.join(timeout=DUMP_SECONDS + 15)
        self._read_heartbeats()
        if self.heartbeat_file is not None:
            shutil.rmtree(self.heartbeat_file.parent, ignore_errors=True)

    def progress_age(self) -> float | None:
        return None if self.last_progress is None else time.monotonic() - self.last_progress

    def _run(self, child: subprocess.Popen) -> None:
        while not self._stop.wait(TICK_SECONDS):
            self._read_heartbeats()
            age = self.progress_age()
            if self.hang_timeout is None or age is None or age < self.hang_timeout:
                continue
            step = f" (last at step {self.step})" if self.step is not None else ""
            self.hung = f"no progress for {age:.0f} s{step}; resilience.hang_timeout is {self.hang_timeout:g} s"
            out.log(f"hang: {self.hung}")
            dump_stacks(child.pid)
            if self._stop.wait(DUMP_SECONDS):
                return
            out.log("hang: ending the command's process group")
            _end_group(child.pid)
            return


def _python_pids(root: int) -> list[int]:
    """The command's processes that run a Python interpreter (by their executable's name)."""
    found = []
    for pid in [root, *reaper.descendants(os.getpid())]:
        try:
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        except OSError:
            continue
        if exe.startswith("python") and pid != os.getpid():
            found.append(pid)
    return sorted(set(found))


def dump_stacks(root: int) -> None:
    """Every Python stack of the command's processes, into the log: py-spy's dump where
    py-spy is on PATH and may read them, else faulthandler's (SIGABRT), which ends them."""
    pids = _python_pids(root)
    if not pids:
        out.log("hang: no Python process to dump the stacks of")
        return
    py_spy = shutil.which("py-spy")
    left = list(pids)
    if py_spy:
        out.log(f"hang: dumping the Python stacks of {len(pids)} process(es) with py-spy ({py_spy})")
        left = []
        for pid in pids:
            try:
                done = subprocess.run(
                    [py_spy, "dump", "--pid", str(pid)], capture_output=True, timeout=20, stdin=subprocess.DEVNULL
                )
            except (OSError, subprocess.TimeoutExpired) as e:
                out.log(f"hang: py-spy could not dump process {pid}: {e}")
                left.append(pid)
                continue
            if done.returncode != 0:
                why = (done.stderr or done.stdout).decode("utf-8", "replace").strip().splitlines()
                out.log(f"hang: py-spy could not dump process {pid}: {why[-1] if why else done.returncode}")
                left.append(pid)
                continue
            out.write(done.stdout.decode("utf-8", "replace"))
    if left:
        out.log(
            f"hang: dumping the Python stacks of process(es) {', '.join(map(str, left))} with faulthandler "
            "(SIGABRT; they print them as they end)"
        )
        for pid in left:
            try:
                os.kill(pid, signal.SIGABRT)
            except OSError:
                pass


def _end_group(pgid: int) -> None:
    for signum, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(pgid, signum)
        except OSError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except OSError:
                return
            time.sleep(0.1)
