"""The launcher's SQLite state files (state.db, index.db) when two commands start at once
on a fresh LAUNCHER_HOME: both must open them. The first connection switches a new file to
WAL, which SQLite refuses at once to a second process switching at the same moment, with
"database is locked" (4 of 40 cold starts of two processes failed so); `launcher run -f A &
launcher run -f B` then lost one of them with exit 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

OPEN_BOTH = """
import sys
from pathlib import Path
from launcher.backends.local.state import State
from launcher.sdk.index import RunIndex
home = Path(sys.argv[1])
State(home)
RunIndex(home).names()
"""
ROUNDS = 20


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_two_processes_open_a_fresh_home_at_once(tmp_path, round_):
    procs = [
        subprocess.Popen([sys.executable, "-c", OPEN_BOTH, str(tmp_path)], stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = [(p.wait(timeout=60), p.stderr.read()) for p in procs]
    for p in procs:
        p.stderr.close()
    assert [code for code, _ in results] == [0, 0], [err[-500:] for _, err in results]
