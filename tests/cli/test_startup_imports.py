"""What the commands a user waits on import, each in a fresh process (`python -X importtime`):
`--help` from its cache, shell completion on every Tab, and `validate`. Each imports only
what it uses (issue 25); bench/bench_startup.py times them and bench/README.md lists the costs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Libraries none of these commands uses: a run's, a cluster's, a table's or a chart's.
HEAVY = {"torch", "kubernetes", "databricks", "composer", "streaming", "transformers", "matplotlib", "numpy",
         "fsspec", "rich", "urllib3", "plotext", "starlette", "uvicorn"}
# The launcher's parts that only a submit, a run's logs or a cluster use; a placement across
# clusters; the local runs' state and the run index (SQLite), which a check never reads.
NOT_FOR_VALIDATE = ("launcher.backends.kubernetes", "launcher.backends.local.mounts", "launcher.backends.local.supervisor",
                    "launcher.backends.local.logs", "launcher.sdk.code_selection", "launcher.spec.plan", "launcher.ui",
                    "launcher.train", "launcher.metrics", "launcher.data", "launcher.entrypoint", "launcher.sdk.placement",
                    "launcher.sdk.failover", "launcher.backends.local.state", "launcher.statedb")
LAUNCH = "import sys; from launcher.cli.main import main; sys.argv[0] = 'launcher'; main()"


def imports(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, set[str]]:
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", LAUNCH, *args], capture_output=True, text=True,
                       env=env, cwd=REPO, timeout=120)
    names = {line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    return r, names


def top(names: set[str]) -> set[str]:
    return {n.split(".")[0] for n in names}


@pytest.fixture
def env(tmp_path: Path, launcher_home: Path) -> dict[str, str]:
    return {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "COLUMNS": "80",
            "LAUNCHER_HOME": str(launcher_home)}


def test_cached_help_imports_only_the_entry_point(env):
    imports(["--help"], env)  # renders and keeps the cache
    r, names = imports(["--help"], env)
    assert r.returncode == 0 and r.stdout.startswith("Usage: launcher")
    assert {n for n in names if n.startswith("launcher")} == {
        "launcher", "launcher.cli", "launcher.cli.main", "launcher.cli.commands", "launcher.cli.helpcache"}
    assert not top(names) & (HEAVY | {"click", "pydantic", "pydantic_core", "yaml"})


@pytest.mark.parametrize("words, cword, expect", [
    ("launcher lo", "1", "plain,logs"),
    ("launcher ", "1", "plain,validate"),  # every command's module is loaded for its help line
    ("launcher run --gp", "2", "plain,--gpus"),
    ("launcher get ", "2", "plain,runs"),
])
def test_completion_imports_no_pydantic(env, words, cword, expect):
    r, names = imports([], {**env, "_LAUNCHER_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": cword})
    assert r.returncode == 0, r.stderr[-2000:]
    assert expect in r.stdout.splitlines()
    assert not top(names) & (HEAVY | {"pydantic", "pydantic_core", "yaml"})


def test_validate_imports_neither_a_cluster_client_nor_a_submit(env):
    r, names = imports(["validate", "-f", "runspecs/mpt-tiny-local.yaml"], env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "is a valid run spec" in r.stdout
    assert {"pydantic", "yaml", "click"} <= top(names)
    assert not top(names) & HEAVY
    assert not {n for n in names if n.startswith(NOT_FOR_VALIDATE)}
    assert "logging" not in names  # the --debug counters import it only to show a line
    assert not names & {"sqlite3", "subprocess"}  # no state DB or index is opened, nothing is started


def test_validate_errors_are_unchanged_by_the_lazy_imports(env, tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: x\ncommand: echo\ncompute:\n  gpus: 1\n  nodez: 2\n")
    r, _ = imports(["validate", "-f", str(spec)], env)
    assert r.returncode == 2
    assert f"{spec}:5:3" in r.stderr and "compute.nodez" in r.stderr and "did you mean 'nodes'" in r.stderr
    assert "Traceback" not in r.stderr
