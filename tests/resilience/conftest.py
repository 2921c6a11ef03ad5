from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import CLI


@pytest.fixture
def cli(launcher_home: Path, tmp_path: Path) -> CLI:
    work = tmp_path / "work"
    work.mkdir()
    return CLI(launcher_home, work)
