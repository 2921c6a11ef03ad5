"""The tiny MPT trains from dbfs:/Volumes/... through the fake Files API and reports to the
workspace's MLflow: one training (the module's fixture) that several tests read. Two ranks
(gloo): tests/train/test_two_ranks.py; a run killed mid-way then resumed:
tests/train/test_resume.py (their own files, so that pytest-xdist's --dist loadfile can give
them to the other worker)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from statistics import mean

import pytest

from launcher.train.trackers import mlflow_tracking_uri
from tests.fakes.databricks_files import FakeDatabricksFiles
from tests.train.conftest import VOLUME, Dataset, losses, records, run_trainer, tiny_config, train_env, upload_tree

pytestmark = pytest.mark.train

EXPERIMENT = "/Users/me@example.com/launcher-test"
MLFLOW = {"experiment_name": EXPERIMENT}  # no tracking_uri


@dataclass
class Trained:
    proc: subprocess.CompletedProcess[str]
    recs: list[dict]
    fake: FakeDatabricksFiles
    work: Path  # the trainer's working directory
    env: dict[str, str]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, number_say: Dataset) -> Iterator[Trained]:
    """One 40-batch training with evaluation, its data streamed from the fake Volume and its
    metrics logged to the fake workspace's MLflow: each trainer start pays Composer's import
    (about 20 s on a busy 2-core machine), so the tests below share it."""
    fake = FakeDatabricksFiles().start()
    fake.create_volume("main", "default", "data")
    try:
        upload_tree(fake, number_say.mds, VOLUME)
        work = tmp_path_factory.mktemp("learns")
        # dataset.remote is empty: the run spec's data.remote arrives as DATA_REMOTE.
        cfg = tiny_config(
            work / "params.yaml",
            tokenizer=number_say.tokenizer,
            remote=None,
            local=work / "cache",
            eval_loader=True,
            eval_interval="20ba",
            loggers={"mlflow": MLFLOW},
        )
        env = train_env(
            fake, RUN_NAME="mlflow-databricks", DATA_REMOTE=VOLUME, LAUNCHER_ARTIFACTS_DIR=str(work / "artifacts")
        )
        proc = run_trainer(["-m", "launcher.train", str(cfg)], env, cwd=work)
        assert proc.returncode == 0, proc.stderr[-4000:]
        yield Trained(proc, records(proc.stdout), fake, work, env)
    finally:
        fake.stop()


def merged(recs: list[dict], step: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for r in recs:
        if r.get("step") == step and "metrics" in r:
            out.update(r["metrics"])
    return out


def test_tiny_mpt_learns_from_a_uc_volume(trained: Trained) -> None:
    recs = trained.recs
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
    requests = trained.fake.requests
    assert ("GET", "/Volumes/main/default/data/number-say/mds/train/index.json") in requests
    assert any(m == "GET" and p.endswith(".mds.zstd") for m, p in requests)
    saved = [json.loads(line) for line in (trained.work / "artifacts" / "metrics.jsonl").read_text().splitlines()]
    assert saved == recs
    assert trained.fake.token not in trained.proc.stdout + trained.proc.stderr


def test_mpt_metrics_land_in_the_workspace_mlflow(trained: Trained) -> None:
    """Credentials and no tracking_uri: the run's experiment, run, params, tags and per-step
    loss are on the workspace that also served its dbfs:/Volumes data."""
    pytest.importorskip("mlflow")
    workspace, proc = trained.fake.mlflow, trained.proc
    ours = losses(trained.recs)

    assert trained.fake.unknown == [], trained.fake.unknown
    exp = workspace.experiment(EXPERIMENT)
    assert exp is not None, workspace.endpoints()
    (run,) = workspace.runs_of(exp)
    assert run.user_id == "me@example.com" and run.status == "FINISHED" and run.end_time is not None
    history = workspace.history(run, "loss/train/total")
    steps = [s for _, s, _ in history]
    # One value per step; Composer counts steps from 0 where the trainer's records count from 1.
    assert steps == [s - 1 for s in sorted(ours)], history
    assert [v for v, _, _ in history] == pytest.approx([ours[s] for s in sorted(ours)], rel=1e-4)
    # What Composer logs besides metrics: its run name (for autoresume) and the MLflow ids.
    assert run.tags["run_name"] == "mlflow-databricks" and run.tags["mlflow.runName"] == "mlflow-databricks"
    assert run.params["mlflow_experiment_id"] == exp.experiment_id and run.params["mlflow_run_id"] == run.run_id
    assert run.params["rank_zero_seed"] == "17" and run.params["num_nodes"] == "1" and "composer_version" in run.params
    # Nothing went to a local store, nothing was logged as an error, the token was never printed.
    assert not (trained.work / "mlruns").exists()
    assert "Error running MLFlowLogger" not in proc.stderr, proc.stderr[-3000:]
    assert trained.fake.token not in proc.stdout + proc.stderr
    # Composer's MLFlowLogger falls back to "databricks" on DATABRICKS_TOKEN alone, so the run by
    # itself cannot tell our rule (which passes tracking_uri="databricks") from Composer's.
    assert mlflow_tracking_uri(MLFLOW, trained.env) == "databricks"
