"""The fake workspace started as a program, and the CLI with a Databricks profile on it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cli.conftest import CLI
from tests.fakes.databricks_workspace import WorkspaceProgram, running

LOG_VOLUME = "/Volumes/main/default/logs"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkspaceProgram]:
    with running(tmp_path_factory.mktemp("workspace"), "main/default/logs") as program:
        yield program


@pytest.fixture
def cli(launcher_home, tmp_path, workspace) -> CLI:
    """The launcher with profile `dbx` on the fake (its own workspace folder per test), signed
    in with the SDK's DATABRICKS_TOKEN."""
    cli = CLI(launcher_home, tmp_path)
    for k in [k for k in cli.env if k.startswith("DATABRICKS_")]:
        del cli.env[k]
    cli.env["DATABRICKS_TOKEN"] = workspace.token
    cli.workspace_dir = f"/Shared/{tmp_path.name}"  # type: ignore[attr-defined]
    r = cli(
        "cluster", "add", "dbx", "--backend", "databricks", "--host", workspace.host,
        "--log-volume", LOG_VOLUME, "--workspace-dir", cli.workspace_dir,  # type: ignore[attr-defined]
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return cli
