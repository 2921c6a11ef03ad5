from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.forked_cli import launcher_command


class CLI:
    """Runs the real `launcher` command in a subprocess, as a user would: a child of the fork
    server (tests/forked_cli.py) for `cli(...)`, `python -m launcher` for `cli.popen(...)`."""

    def __init__(self, home: Path, cwd: Path):
        self.home = home
        self.cwd = cwd
        self.env = {**os.environ, "LAUNCHER_HOME": str(home), "LAUNCHER_GRACE_SECONDS": "3"}
        self.env.pop("LAUNCHER_DEBUG", None)

    def __call__(self, *args: str, input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*launcher_command(self.env), *args],
            cwd=self.cwd,
            env=self.env,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "launcher", *args],
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def spec(self, name: str, body: str) -> Path:
        path = self.cwd / f"{name}.yaml"
        path.write_text(textwrap.dedent(body))
        return path

    def describe(self, name: str | None = None) -> dict:
        """The run's record from `describe run NAME -o json`; without NAME, the latest run's."""
        r = self("describe", "run", *([name] if name else []), "-o", "json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def wait_status(self, name: str | None, statuses: set[str], timeout: float = 60) -> dict:
        """The run's record once its status is one of `statuses` (name None: the latest run)."""
        return wait_until(
            lambda: (rec := self.describe(name))["status"] in statuses and rec,
            timeout,
            interval=0.2,
            message=lambda: (
                f"{name or 'the latest run'} to be {' or '.join(sorted(statuses))} "
                f"(it is {self.describe(name)['status']})"
            ),
        )


@pytest.fixture
def cli(launcher_home: Path, tmp_path: Path) -> CLI:
    work = tmp_path / "work"
    work.mkdir()
    return CLI(launcher_home, work)
