"""Run the user's command: bash in its own process group, output masked line by line,
stop signals forwarded to the whole group, SIGKILL after a grace period."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from launcher.entrypoint import contract
from launcher.secrets.mask import Masker

GRACE_SECONDS = float(os.environ.get("LAUNCHER_GRACE_SECONDS", "30"))


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


def pump(stream, masker: Masker, out=None) -> None:
    """Copy lines from `stream` (bytes) to `out`, masking secret values."""
    out = out or sys.stdout
    for raw in iter(stream.readline, b""):
        text = raw.decode("utf-8", errors="replace")
        out.write(masker.mask(text))
        out.flush()


def run_command(command: str, *, cwd: Path, env: dict[str, str], masker: Masker, argv0: str = "bash") -> int:
    proc = subprocess.Popen(
        [argv0, "-c", command],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own group, so a stop reaches every process it starts
    )
    stopping = threading.Event()

    def forward(signum, _frame):
        if stopping.is_set():
            return
        stopping.set()
        try:
            os.killpg(proc.pid, signum)
        except ProcessLookupError:
            return

        def escalate():
            try:
                proc.wait(GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

        threading.Thread(target=escalate, daemon=True).start()

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        pump(proc.stdout, masker)
        code = proc.wait()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    return code if code >= 0 else 128 - code
