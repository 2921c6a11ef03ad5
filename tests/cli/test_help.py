"""`launcher --help` stays light: it lists every command and imports nothing heavy."""

from __future__ import annotations

import subprocess
import sys

from launcher.cli.main import COMMANDS

HEAVY = ("torch", "kubernetes", "databricks", "composer", "streaming", "transformers", "matplotlib", "pydantic")


def test_help_lists_commands_without_heavy_imports():
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "launcher", "--help"], capture_output=True, text=True)
    assert r.returncode == 0
    for name in COMMANDS:
        assert name in r.stdout
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in r.stderr.splitlines() if "|" in line}
    assert not imported & set(HEAVY), imported & set(HEAVY)


def test_every_command_in_the_table_loads():
    for name in ("run", "validate", "get", "describe", "logs", "stop", "delete", "secret"):
        r = subprocess.run([sys.executable, "-m", "launcher", name, "--help"], capture_output=True, text=True)
        assert r.returncode == 0, (name, r.stderr)
        assert "Usage: launcher" in r.stdout
