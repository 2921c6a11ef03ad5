"""What the SDK tests share: run specs that finish in about a second on the local backend
(and on the fake cluster), built from tests/kubernetes/worker.py."""

from __future__ import annotations

import shlex
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WORKER = REPO / "tests" / "kubernetes" / "worker.py"


def worker(*args: str) -> str:
    return shlex.join([sys.executable, str(WORKER), *args])


def spec_file(directory: Path, name: str, command: str, **compute) -> Path:
    """A run YAML in `directory` whose command is `command`; `compute` fields (gpus: 0 by default)."""
    lines = "".join(f"  {k}: {v}\n" for k, v in {"gpus": 0, **compute}.items())
    path = directory / f"{name}.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        name: {name}
        image: ghcr.io/example/launcher:test
        command: {command!r}
        compute:
        """)
        + lines
        + f"env_variables:\n  PYTHONPATH: {REPO}\n"
    )
    return path


@pytest.fixture
def specs(launcher_home: Path, tmp_path: Path) -> Path:
    """A directory for run YAMLs, with LAUNCHER_HOME private to the test."""
    d = tmp_path / "specs"
    d.mkdir()
    return d
