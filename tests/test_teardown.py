"""The launcher_home fixture's teardown: a run that a test left running is killed with its
home, so that a failing test leaves no process behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import kill_processes_of_home, wait_until


def test_a_process_left_under_a_home_is_killed(launcher_home, monkeypatch):
    left = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    other_home = launcher_home.parent / "other-home"
    monkeypatch.setenv("LAUNCHER_HOME", str(other_home))
    elsewhere = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        for p, home in ((left, launcher_home), (elsewhere, other_home)):  # both have exec'd, with their homes
            wait_until(
                lambda: f"LAUNCHER_HOME={home}".encode() in Path(f"/proc/{p.pid}/environ").read_bytes(),
                timeout=10,
                message="the process to start",
            )
        assert kill_processes_of_home(launcher_home) == [left.pid]
        wait_until(lambda: left.poll() is not None, timeout=10, message="the process left under the home to end")
        assert elsewhere.poll() is None, "a process of another home was killed"
    finally:
        for p in (left, elsewhere):
            p.kill()
            p.wait()
