"""The fault suite's tools: the real CLI in a subprocess, the processes of a run found
through /proc by a token the test puts in the run's environment, and a small real
tmpfs (needs root and mount; the tests that need one skip without it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.cli.conftest import CLI
from tests.conftest import pids_with_env


@pytest.fixture
def cli(launcher_home: Path, tmp_path: Path) -> CLI:
    work = tmp_path / "work"
    work.mkdir()
    return CLI(launcher_home, work)


@pytest.fixture
def token() -> str:
    """A value only this test's runs carry: FAULT_TOKEN=<token> in their env_variables."""
    return uuid.uuid4().hex


def refused(r, *texts: str) -> str:
    """A clean refusal: exit 2, one message naming the cause, no traceback."""
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    for t in texts:
        assert t in r.stderr, r.stderr
    return r.stderr


def processes(token: str) -> dict[int, str]:
    """pid -> command line of every live process whose environment holds FAULT_TOKEN=token."""
    found = {}
    for pid in pids_with_env(f"FAULT_TOKEN={token}"):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            if stat[stat.rfind(")") + 2] == "Z":
                continue
            found[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue
    return found


def ps_of(token: str) -> str:
    """What `ps` says about those processes, for failure messages."""
    pids = list(processes(token))
    if not pids:
        return "(none)"
    return subprocess.run(
        ["ps", "-o", "pid,ppid,pgid,sid,stat,args", "-p", ",".join(map(str, pids))], capture_output=True, text=True
    ).stdout


def describe(cli: CLI, name: str | None = None) -> dict:
    r = cli("describe", "run", *([name] if name else []), "-o", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture
def kill_leftovers(token):
    """Whatever the test leaves running (a failing test may) is killed at the end."""
    yield
    for pid in processes(token):
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass


@pytest.fixture
def small_tmpfs(tmp_path: Path):
    """mount(size) -> a fresh tmpfs of `size` at a new directory; unmounted at the end."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    mounted: list[Path] = []

    def mount(where: Path, size: str) -> Path:
        where.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
            capture_output=True,
            text=True,
        )
        if done.returncode:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(where)
        return where

    yield mount
    for where in reversed(mounted):
        subprocess.run(["umount", "-l", str(where)], capture_output=True)
