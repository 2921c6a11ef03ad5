"""The local backend end to end: train the tiny MPT of runspecs/mpt-tiny-local.yaml (shortened),
then read its loss curve with `launcher metrics`, and its log with ProgressLine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.train.conftest import number_say  # noqa: F401 - the fixture, shared with the trainer tests

pytestmark = [pytest.mark.train, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
STEPS = 12


def _launcher(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "launcher", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def test_tiny_mpt_loss_curve(tmp_path: Path, number_say) -> None:
    pytest.importorskip("composer")
    env = {
        **os.environ,
        "LAUNCHER_HOME": str(tmp_path / "home"),
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
    }
    # The data as the README prepares it (`launcher data synthetic`, `tokenizer train`, `convert`,
    # each tested in tests/data): the trainer tests' number-say set, built once per session.
    data = tmp_path / "out" / "number-say"
    data.mkdir(parents=True)
    (data / "mds").symlink_to(number_say.mds)
    (data / "tokenizer").symlink_to(number_say.tokenizer)

    spec = yaml.safe_load((REPO / "runspecs" / "mpt-tiny-local.yaml").read_text())
    spec["parameters"].update(max_duration=f"{STEPS}ba", eval_interval=f"{STEPS // 2}ba", save_interval=f"{STEPS}ba")
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    _launcher("run", "-f", "spec.yaml", "--follow", cwd=tmp_path, env=env)

    points = json.loads(_launcher("metrics", "-o", "json", cwd=tmp_path, env=env).stdout)
    assert [p["step"] for p in points] == list(range(1, STEPS + 1))
    assert {p["metric"] for p in points} == {"loss/train/total"} and {p["attempt"] for p in points} == {1}
    losses = [p["value"] for p in points]
    assert all(0 < v < 20 for v in losses) and min(losses[-3:]) < losses[0]

    listed = json.loads(_launcher("metrics", "--list", "-o", "json", cwd=tmp_path, env=env).stdout)
    names = {r["metric"]: r["points"] for r in listed}
    assert names["loss/train/total"] == STEPS and names["metrics/eval/LanguageCrossEntropy"] == 2

    # The same records reach `launcher run --follow`'s status line.
    from launcher.metrics.progress import ProgressLine

    progress = ProgressLine()
    log = next((tmp_path / "home" / "runs").glob("*/attempt-1/rank-0.log"))
    for line in log.read_text().splitlines():
        progress.feed(line)
    status = progress.render()
    assert status is not None
    assert status.startswith(f"step {STEPS}/{STEPS} · loss {losses[-1]:.4g} · ") and "tok/s · ETA 0:00:00" in status
