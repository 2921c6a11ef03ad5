"""`launcher train`: where it runs (in this process, or the composer launcher) and its errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from launcher.cli.train import plan_launch
from tests.train.conftest import REPO, VOLUME, tiny_config, train_env

PY = "/usr/bin/python3"
COMPOSER = [PY, "-m", "composer.cli.launcher"]
TRAIN = ["-m", "launcher.train", "p.yaml"]


def test_cpu_node_trains_in_this_process() -> None:
    assert plan_launch("p.yaml", (), gpus=0, env={}, python=PY) is None
    assert plan_launch("p.yaml", (), gpus=1, env={}, python=PY) is None


def test_several_gpus_exec_the_composer_launcher() -> None:
    assert plan_launch("p.yaml", ("max_duration=5ba",), gpus=8, env={}, python=PY) == [
        *COMPOSER,
        *TRAIN,
        "max_duration=5ba",
    ]


def test_nproc_on_cpu_uses_the_composer_launcher() -> None:
    assert plan_launch("p.yaml", (), gpus=0, env={}, nproc=2, python=PY) == [*COMPOSER, "-n", "2", *TRAIN]
    assert plan_launch("p.yaml", (), gpus=8, env={}, nproc=1, python=PY) is None


def test_multi_node_rank_environment_uses_the_composer_launcher() -> None:
    env = {
        "WORLD_SIZE": "2",
        "LOCAL_WORLD_SIZE": "1",
        "NODE_RANK": "1",
        "MASTER_ADDR": "r-0.svc",
        "MASTER_PORT": "29500",
    }
    assert plan_launch("p.yaml", (), gpus=1, env=env, python=PY) == [*COMPOSER, *TRAIN]


def test_inside_a_launched_rank_it_trains_in_process() -> None:
    env = {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "8"}
    assert plan_launch("p.yaml", (), gpus=8, env=env, python=PY) is None


def launcher(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "launcher", "train", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_missing_parameters_file(tmp_path: Path) -> None:
    r = launcher(str(tmp_path / "nope.yaml"), env=train_env())
    assert r.returncode == 2
    assert r.stderr.strip() == f"✗ {tmp_path / 'nope.yaml'}: no such file (the training config, usually $PARAMETERS)"


def test_bad_override_is_a_usage_error(tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text("x: 1\n")
    r = launcher(str(p), "max_duration", env=train_env())
    assert r.returncode == 2 and "overrides are path.to.key=VALUE" in r.stderr


@pytest.mark.train
def test_launcher_train_reports_preflight_errors(tmp_path: Path, number_say) -> None:
    cfg = tiny_config(tmp_path / "p.yaml", tokenizer=number_say.tokenizer, remote=VOLUME)
    r = launcher(str(cfg), env=train_env())
    assert r.returncode == 2
    assert r.stderr.strip() == (
        f"✗ {VOLUME} needs Databricks credentials, but DATABRICKS_HOST and DATABRICKS_TOKEN are not set: "
        "add a databricks secret to the run (it provides DATABRICKS_HOST and DATABRICKS_TOKEN)"
    )
