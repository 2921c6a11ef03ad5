"""The project's habits, checked with the README's one test command: ruff's lint and
format over the package and the tests, as pyproject.toml configures them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUFF = Path(sys.executable).with_name("ruff")

pytestmark = pytest.mark.skipif(not RUFF.exists(), reason="ruff comes with the dev extra: pip install -e '.[dev]'")


def ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(RUFF), *args, "--no-cache", "launcher", "tests"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_ruff_finds_nothing_to_fix() -> None:
    done = ruff("check")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_code_is_formatted_as_ruff_formats_it() -> None:
    done = ruff("format", "--check")
    assert done.returncode == 0, done.stdout + done.stderr
