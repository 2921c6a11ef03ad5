"""`launcher --help` stays light: it lists every command and imports nothing heavy; the
top-level help comes from the cache without click, and is click's text to the byte."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.cli.main import COMMANDS

HEAVY = ("torch", "kubernetes", "databricks", "composer", "streaming", "transformers", "matplotlib", "pydantic")
CLICKS_OWN = ("import sys; from launcher.cli.error_report import run_cli; from launcher.cli.group import cli; "
              "sys.exit(run_cli(cli, sys.argv[1:]))")


def imported_by(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, set[str]]:
    r = subprocess.run([sys.executable, "-X", "importtime", *args], capture_output=True, text=True, env=env)
    return r, {line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines() if "|" in line}


@pytest.fixture
def cache_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "COLUMNS": "80"}


def test_help_lists_commands_without_heavy_imports(cache_env):
    r, imported = imported_by(["-m", "launcher", "--help"], cache_env)
    assert r.returncode == 0
    for name in COMMANDS:
        assert name in r.stdout
    assert not {m.split(".")[0] for m in imported} & set(HEAVY)


def test_cached_help_is_clicks_text_and_imports_no_click(cache_env, tmp_path):
    clicks = subprocess.run([sys.executable, "-c", CLICKS_OWN, "--help"], capture_output=True, text=True,
                            env=cache_env)
    assert clicks.returncode == 0 and clicks.stdout.startswith("Usage: launcher [OPTIONS] COMMAND")
    first, imported_first = imported_by(["-m", "launcher", "--help"], cache_env)
    second, imported_second = imported_by(["-m", "launcher", "-h"], cache_env)
    assert first.returncode == second.returncode == 0
    assert first.stdout == second.stdout == clicks.stdout
    assert "click" in imported_first  # rendered by click once
    assert not any(m.startswith(("click", "launcher.cli.group", "launcher.errors")) for m in imported_second)

    # A cache from another version of the sources is rendered again, not printed.
    cache = tmp_path / "cache" / "launcher" / "help.txt"
    cache.write_text("some other key\nUsage: stale\n")
    again, imported_again = imported_by(["-m", "launcher", "--help"], cache_env)
    assert again.stdout == clicks.stdout and "click" in imported_again

    # Another width is another text, as click wraps it.
    narrow = {**cache_env, "COLUMNS": "56"}
    clicks_narrow = subprocess.run([sys.executable, "-c", CLICKS_OWN, "--help"], capture_output=True, text=True,
                                   env=narrow)
    for _ in range(2):
        r = subprocess.run([sys.executable, "-m", "launcher", "--help"], capture_output=True, text=True, env=narrow)
        assert r.stdout == clicks_narrow.stdout != clicks.stdout


def test_help_without_a_writable_cache(cache_env, tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("")
    env = {**cache_env, "XDG_CACHE_HOME": str(blocked)}  # a file: no directory can be made under it
    r = subprocess.run([sys.executable, "-m", "launcher", "--help"], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "Usage: launcher" in r.stdout and not r.stderr


def test_completion_imports_no_pydantic(cache_env, launcher_home):
    env = {**cache_env, "LAUNCHER_HOME": str(launcher_home), "_LAUNCHER_COMPLETE": "bash_complete",
           "COMP_WORDS": "launcher lo", "COMP_CWORD": "1"}
    r, imported = imported_by(["-m", "launcher"], env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "plain,logs" in r.stdout
    assert not {m.split(".")[0] for m in imported} & set(HEAVY + ("yaml",))


def test_every_command_in_the_table_loads():
    for name in ("run", "validate", "get", "describe", "logs", "stop", "delete", "secret"):
        r = subprocess.run([sys.executable, "-m", "launcher", name, "--help"], capture_output=True, text=True)
        assert r.returncode == 0, (name, r.stderr)
        assert "Usage: launcher" in r.stdout
