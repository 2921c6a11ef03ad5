"""The tiny MPT on two ranks (gloo) on CPU: the composer launcher starts them, each takes
half of every global batch, and together they see no sample twice. Its own file (three
processes that each import Composer), so that pytest-xdist's --dist loadfile can give it to
the other worker than tests/train/test_train.py."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import mean

import pytest

from tests.train.conftest import losses, records, run_trainer, tiny_config, train_env

pytestmark = pytest.mark.train


def test_two_ranks_on_cpu_split_the_data(tmp_path: Path, databricks_files, uc_data: str, number_say) -> None:
    cfg = tiny_config(
        tmp_path / "params.yaml",
        tokenizer=number_say.tokenizer,
        remote=uc_data,
        local=tmp_path / "cache",
        max_duration="20ba",
        batch=16,
    )
    audit = tmp_path / "audit"
    env = train_env(databricks_files, LAUNCHER_TRAIN_SAMPLE_LOG=str(audit))
    proc = run_trainer(["-m", "composer.cli.launcher", "-n", "2", "-m", "launcher.train", str(cfg)], env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]

    recs = records(proc.stdout)
    assert recs[0]["event"] == "fit_start" and recs[0]["world_size"] == 2
    loss = losses(recs)
    assert sorted(loss) == list(range(1, 21))
    assert mean(loss[s] for s in range(16, 21)) < mean(loss[s] for s in range(1, 6)) - 1.0

    seen = {}
    for rank in (0, 1):
        lines = [json.loads(x) for x in (audit / f"samples-rank{rank}.jsonl").read_text().splitlines()]
        assert [x["batch"] for x in lines] == list(range(1, 21)), f"rank {rank} trained every batch"
        assert all(len(x["samples"]) == 8 for x in lines), "each rank takes half of the global batch of 16"
        ids = [i for x in lines for i in x["samples"]]
        assert len(set(ids)) == len(ids) == 160, f"rank {rank} saw a sample twice"
        seen[rank] = set(ids)
    assert not seen[0] & seen[1], "the ranks' data overlap"
