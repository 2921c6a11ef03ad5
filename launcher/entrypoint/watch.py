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
  a quiet program from a stuck one;
* stragglers, where the ranks are on different nodes: each tick asks the progress channel
  (`peers`, launcher.entrypoint.progress) for its verdict: on a straggler that rank 0 told
  it stayed one past its grace (contract.EXIT_STRAGGLER), or on rank 0 where it ends the
  attempt itself (contract.EXIT_STRAGGLER_PEER), the watch then ends the command as a hang
  does, without the stacks.

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
from collections import deque
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
t=$(date +%s.%N 2>/dev/null)
case "$t" in ''|*[!0-9.]*) t=null ;; esac
printf '@@launcher.heartbeat {"step": %s, "time": %s}\\n' "$step" "$t" >> "$LAUNCHER_HEARTBEAT_FILE"
"""


class Watch:
    def __init__(self, hang_timeout: float | None, run_dir: Path | None = None, progress_file: str | None = None):
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
        self.step_times: deque[float] = deque(maxlen=contract.STEP_WINDOW)
        """Seconds per step over the last STEP_WINDOW steps (from the times new steps were seen)."""
        self._step_seen: tuple[int, float] | None = None
        self._progress_file = progress_file
        self._progress_written: tuple | None = None
        self.peers = None
        """The progress channel among the node ranks (launcher.entrypoint.progress), where there is one."""
        self.straggler: tuple[str, int] | None = None
        """Why the watch ended the command for a straggler, and the exit code to end with (the
        channel's verdict, progress.Verdict), once it did."""

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

    def _progress_in(self, data: bytes, at: float | None = None) -> None:
        for prefix in (HEARTBEAT_PREFIX, METRIC_PREFIX):
            pos = data.rfind(prefix)
            if pos < 0:
                continue
            end = data.find(b"\n", pos)
            if end < 0 and prefix == METRIC_PREFIX:
                continue  # a record cut by the chunk: the next chunk has its end
            body = data[pos + len(prefix) : end if end >= 0 else len(data)]
            step, when = None, at
            try:
                record = json.loads(body.decode("utf-8", "replace"))
            except ValueError:
                record = None
            if isinstance(record, dict):
                if isinstance(record.get("step"), int):
                    step = record["step"]
                if isinstance(record.get("time"), (int, float)) and not isinstance(record.get("time"), bool):
                    # Unix seconds when it was written (metric records, launcher-heartbeat):
                    # what it reaches us late by is not counted.
                    when = time.monotonic() - min(max(0.0, time.time() - record["time"]), 60.0)
            self._progressed(step, when)

    def _progressed(self, step: int | None, at: float | None = None) -> None:
        now = time.monotonic() if at is None else at
        self.last_progress = now if self.last_progress is None else max(self.last_progress, now)
        if step is not None:
            seen = self._step_seen
            if seen is None or step < seen[0]:
                self._step_seen = (step, now)
            elif step > seen[0]:
                # Steps seen together (a chunk, a tick of the heartbeat file) share the time between.
                each = (now - seen[1]) / (step - seen[0])
                self.step_times.extend([each] * min(step - seen[0], contract.STEP_WINDOW))
                self._step_seen = (step, now)
            # The heartbeat file is read a tick late: a step already seen on stdout stands.
            self.step = step if self.step is None else max(self.step, step)

    def _read_heartbeats(self) -> None:
        if self.heartbeat_file is None:
            return
        try:
            with open(self.heartbeat_file, "rb") as f:
                f.seek(self._heartbeat_read)
                data = f.read()
        except OSError:
            return
        if data:
            self._heartbeat_read += len(data)
            self._progress_in(data)

    # ----------------------------------------------------------- watching the clock

    def start(self, child: subprocess.Popen) -> None:
        if self.peers is not None:
            self.peers.start(self)
        self._thread = threading.Thread(target=self._run, args=(child,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.evidence.close()
        if self._thread is not None:
            self._thread.join(timeout=DUMP_SECONDS + 15)
        if self.peers is not None:
            self.peers.stop()
        self._read_heartbeats()
        if self.heartbeat_file is not None:
            shutil.rmtree(self.heartbeat_file.parent, ignore_errors=True)

    def progress_age(self) -> float | None:
        return None if self.last_progress is None else time.monotonic() - self.last_progress

    def step_seconds(self) -> float | None:
        """The median of the last STEP_WINDOW step times; None before any."""
        times = sorted(self.step_times)
        return times[len(times) // 2] if times else None

    def progress(self) -> dict:
        """The rank's last step and step time, as the ranks compare them (launcher.pod.stragglers)."""
        return {"step": self.step, "step_seconds": self.step_seconds(), "steps_timed": len(self.step_times)}

    def _write_progress(self) -> None:
        """Where the backend compares the ranks' step times (contract.PROGRESS_FILE)."""
        if not self._progress_file:
            return
        progress = self.progress()
        now = tuple(progress.values())
        if now == self._progress_written:
            return
        tmp = f"{self._progress_file}.tmp"
        try:
            with open(tmp, "w") as f:
                json.dump(progress, f)
            os.replace(tmp, self._progress_file)
            self._progress_written = now
        except OSError:
            pass  # the backend then sees no step time for this rank

    def _run(self, child: subprocess.Popen) -> None:
        while not self._stop.wait(TICK_SECONDS):
            self._read_heartbeats()
            self._write_progress()
            verdict = self.peers.judge(self) if self.peers is not None else None
            if verdict:
                self.straggler = verdict
                out.log("straggler: ending the command's process group")
                _end_group(child.pid)
                return
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
