"""The tiny MPT trains from dbfs:/Volumes/... through the fake Files API: one process, and
two ranks (gloo). A run killed mid-way then resumed: tests/train/test_resume.py (its own
file, so that pytest-xdist's --dist loadfile can give it to the other worker)."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import mean

import pytest

from tests.train.conftest import losses, records, run_trainer, tiny_config, train_env

pytestmark = pytest.mark.train


def merged(recs: list[dict], step: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for r in recs:
        if r.get("step") == step and "metrics" in r:
            out.update(r["metrics"])
    return out


def test_tiny_mpt_learns_from_a_uc_volume(tmp_path: Path, databricks_files, uc_data: str, number_say) -> None:
    # dataset.remote is empty: the run spec's data.remote arrives as DATA_REMOTE.
    cfg = tiny_config(
        tmp_path / "params.yaml",
        tokenizer=number_say.tokenizer,
        remote=None,
        local=tmp_path / "cache",
        eval_loader=True,
        eval_interval="20ba",
    )
    artifacts = tmp_path / "artifacts"
    env = train_env(databricks_files, DATA_REMOTE=uc_data, LAUNCHER_ARTIFACTS_DIR=str(artifacts))
    proc = run_trainer(["-m", "launcher.train", str(cfg)], env)
    assert proc.returncode == 0, proc.stderr[-4000:]

    recs = records(proc.stdout)
    start = recs[0]
    assert start["event"] == "fit_start" and start["max_duration"] == "40ba" and start["max_batches"] == 40
    assert start["start_batch"] == 0 and start["world_size"] == 1
    loss = losses(recs)
    assert sorted(loss) == list(range(1, 41)), "one loss per step, steps 1..40"
    first, last = mean(loss[s] for s in range(1, 6)), mean(loss[s] for s in range(36, 41))
    assert first > 5.0  # about ln(512): an untrained model
    assert last < first - 2.5, f"loss did not fall enough: first 5 {first:.2f}, last 5 {last:.2f}"

    # Every step's line carries the LR; throughput once SpeedMonitor's window is full; eval at 20 and 40.
    assert all("lr-DecoupledAdamW/group0" in merged(recs, s) for s in range(1, 41))
    assert merged(recs, 11)["throughput/tokens_per_sec"] > 0
    for step in (20, 40):
        m = merged(recs, step)
        assert 0 < m["metrics/eval/LanguageCrossEntropy"] < first
        assert m["metrics/eval/LanguagePerplexity"] > 1
    assert all(r["rank"] == 0 and isinstance(r["time"], float) for r in recs)

    # The data really came through the Files API, and metrics.jsonl holds the same records.
    assert ("GET", "/Volumes/main/default/data/number-say/mds/train/index.json") in databricks_files.requests
    assert any(m == "GET" and p.endswith(".mds.zstd") for m, p in databricks_files.requests)
    saved = [json.loads(line) for line in (artifacts / "metrics.jsonl").read_text().splitlines()]
    assert saved == recs
    assert databricks_files.token not in proc.stdout + proc.stderr


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
