"""`launcher --help` lists every command, and every command's own help loads."""

from __future__ import annotations

import subprocess
import sys

from launcher.cli.main import COMMANDS


def test_help_lists_every_command():
    r = subprocess.run([sys.executable, "-m", "launcher", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("Usage: launcher [OPTIONS] COMMAND")
    for name, (_, _, line) in COMMANDS.items():
        assert name in r.stdout and line.split()[0] in r.stdout


def test_every_command_in_the_table_loads():
    for name in ("run", "validate", "get", "describe", "logs", "stop", "delete", "secret"):
        r = subprocess.run([sys.executable, "-m", "launcher", name, "--help"], capture_output=True, text=True)
        assert r.returncode == 0, (name, r.stderr)
        assert "Usage: launcher" in r.stdout
