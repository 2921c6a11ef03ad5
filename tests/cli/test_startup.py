"""`launcher --help` and `launcher validate` answer without importing the heavy libraries a
run, a cluster or a chart needs (each costs from a tenth of a second to seconds)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HEAVY = {"torch", "kubernetes", "databricks", "pyspark", "transformers", "composer", "streaming", "matplotlib"}
PROBE = (
    "import sys; from launcher.cli.main import main; sys.argv = ['launcher', *sys.argv[1:]]\n"
    "try:\n    main()\nfinally:\n    print('heavy:', sorted({m.split('.')[0] for m in sys.modules} & set(HEAVY)))"
)


@pytest.mark.parametrize(
    "args, says",
    [(["--help"], "Usage: launcher"), (["validate", "-f", "runspecs/mpt-tiny-local.yaml"], "is a valid run spec")],
)
def test_command_imports_no_heavy_library(cli, args, says):
    r = subprocess.run(
        [sys.executable, "-c", f"HEAVY = {sorted(HEAVY)!r}\n{PROBE}", *args],
        cwd=REPO,
        env=cli.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert says in r.stdout and "heavy: []" in r.stdout, r.stdout[-2000:]
