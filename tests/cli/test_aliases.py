"""mcli's command shapes without a noun module of their own (launcher/cli/aliases.py):
`create secret <kind>`, `version` and `completion`, as a user types them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.cli.conftest import CLI


def created_secret(home: Path, cwd: Path, *command: str) -> tuple[str, list[dict]]:
    """What `command` prints when it creates env secret API_TOKEN in a fresh home, and the
    secret listing afterwards (without the creation time, which differs)."""
    home.mkdir()
    cli = CLI(home, cwd)
    r = cli(*command, "env", "API_TOKEN", input="tok3n-value-for-aliases")
    assert r.returncode == 0, r.stderr
    listed = json.loads(cli("get", "secrets", "-o", "json").stdout)
    return r.stdout.replace(str(home), "HOME"), [{k: v for k, v in s.items() if k != "created_at"} for s in listed]


def test_create_secret_is_secret_create(tmp_path, cli):
    spellings = [("secret", "create"), ("create", "secret"), ("create", "secrets")]
    results = [created_secret(tmp_path / f"home-{i}", cli.cwd, *words) for i, words in enumerate(spellings)]
    printed, listed = results[0]
    assert "Created env secret api-token" in printed
    assert listed == [{"name": "api-token", "kind": "env", "exposed_as": ["API_TOKEN"], "env_key": "API_TOKEN"}]
    assert results[1] == results[0] and results[2] == results[0]


def test_create_lists_secret_and_its_kinds_are_those_of_secret_create(cli):
    r = cli("create", "--help")
    assert r.returncode == 0 and "secret" in r.stdout.split("Commands:")[1]

    def kinds(*words: str) -> str:
        r = cli(*words, "--help")
        assert r.returncode == 0, r.stderr
        return r.stdout.split("Commands:")[1]

    assert kinds("create", "secret") == kinds("secret", "create")
    assert "docker-registry" in kinds("create", "secret")


def test_create_of_something_else_exits_2(cli):
    r = cli("create", "cluster")
    assert r.returncode == 2
    assert "No such command 'cluster'" in r.stderr and "Traceback" not in r.stderr


def test_version_is_the_installed_one(cli):
    expected = version("launcher")
    assert cli("version").stdout == f"launcher {expected}\n"
    assert cli("--version").stdout == f"launcher, version {expected}\n"


def test_bash_completion_completes_commands_and_kinds(cli):
    script = cli("completion", "bash")
    assert script.returncode == 0, script.stderr
    (cli.cwd / "completion.bash").write_text(script.stdout)
    # Bash calls the function with the command's name; `launcher` must be on PATH.
    env = {**cli.env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}

    def complete(*words: str) -> list[str]:
        line = " ".join(words)
        done = subprocess.run(
            [
                "bash",
                "-c",
                f"source completion.bash; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; "
                '_launcher_completion launcher; printf "%s\\n" "${COMPREPLY[@]}"',
            ],
            cwd=cli.cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert complete("launcher", "compl") == ["completion"]
    assert "docker-registry" in complete("launcher", "create", "secret", "d")


@pytest.mark.parametrize(
    "shell, marker", [("zsh", "#compdef launcher"), ("fish", "complete --no-files --command launcher")]
)
def test_zsh_and_fish_scripts(cli, shell, marker):
    r = cli("completion", shell)
    assert r.returncode == 0 and marker in r.stdout and "_LAUNCHER_COMPLETE" in r.stdout


def test_completion_for_an_unknown_shell_exits_2(cli):
    r = cli("completion", "tcsh")
    assert r.returncode == 2
    assert "'tcsh' is not one of 'bash', 'zsh', 'fish'" in r.stderr and "Traceback" not in r.stderr
