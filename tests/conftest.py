"""Shared fixtures. Each fake server lives in tests/fakes/ and registers its fixtures here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins: list[str] = [
    # "tests.fakes.<module>" lines are added as fakes land.
    "tests.fakes.databricks_files",
    "tests.fakes.kube_api",
    "tests.fakes.moto_s3",
]


@pytest.fixture
def launcher_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private LAUNCHER_HOME, so tests never touch ~/.launcher."""
    home = tmp_path / "launcher-home"
    home.mkdir()
    monkeypatch.setenv("LAUNCHER_HOME", str(home))
    return home


@pytest.fixture(autouse=True)
def _no_user_launcher_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    if "LAUNCHER_HOME" not in os.environ:
        monkeypatch.setenv("LAUNCHER_HOME", str(tmp_path_factory.mktemp("default-home")))
