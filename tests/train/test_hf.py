"""The Hugging Face fine-tuning recipe (python -m launcher.train.hf): the local fine-tuning
spec, where a tiny BERT-style classifier learns the synthetic sentiment set with 2 processes
(gloo) and reports to an MLflow file store; a run killed after a checkpoint reached the
Volume resumes from it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import needs, wait_until
from tests.train.conftest import REPO, records, run_trainer, train_env

needs("transformers", reason="needs the train extra")
needs("accelerate", reason="needs the train extra")
pytestmark = [pytest.mark.train, pytest.mark.slow]

CKPT_VOLUME = "dbfs:/Volumes/main/default/ckpt"


@pytest.fixture(scope="session")
def sentiment(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Reviews with string labels, a WordPiece trained on them, prepared with `launcher data prepare`."""
    from launcher.data.prepare import prepare
    from launcher.data.synthetic import write_sentiment
    from launcher.data.tokenizer import train_wordpiece

    root = tmp_path_factory.mktemp("sentiment")
    write_sentiment(root / "reviews.jsonl", 800, seed=0)
    tok = train_wordpiece([str(root / "reviews.jsonl")], 200, root / "tokenizer")
    prepare([str(root / "reviews.jsonl")], str(root / "prepared"), str(tok), max_length=32, test_size=0.2)
    return {"tokenizer": tok, "prepared": root / "prepared"}


def hf_config(path: Path, sentiment: dict[str, Path], output_dir: str, **training: object) -> Path:
    cfg = {
        "task": "sequence_classification",
        "model": {
            "config": {
                "model_type": "bert",
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "intermediate_size": 128,
                "max_position_embeddings": 64,
            }
        },
        "tokenizer": str(sentiment["tokenizer"]),
        "data": {"path": str(sentiment["prepared"]), "max_length": 32},
        "output_dir": output_dir,
        "training": {
            "num_train_epochs": 3,
            "per_device_train_batch_size": 16,
            "learning_rate": 2.0e-3,
            "warmup_ratio": 0.1,
            "logging_steps": 5,
            "seed": 17,
            **training,
        },
    }
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def merged_eval(recs: list[dict]) -> list[dict]:
    return [r["metrics"] for r in recs if "metrics/eval/accuracy" in r.get("metrics", {})]


def test_the_local_finetune_spec_learns_with_two_processes_and_reports_to_mlflow(tmp_path: Path, sentiment) -> None:
    """runspecs/hf-finetune-local.yaml through `launcher run` on the local backend (torchrun, 2 gloo
    processes), as scripts/finetune-job.sh runs it, with an MLflow file store added by --set."""
    work = tmp_path / "work"
    (work / "out" / "sentiment").mkdir(parents=True)
    for name in ("tokenizer", "prepared"):
        (work / "out" / "sentiment" / name).symlink_to(sentiment[name])
    home = tmp_path / "home"
    mlruns = tmp_path / "mlruns"
    env = train_env(LAUNCHER_HOME=str(home), PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin")
    proc = run_trainer(
        [
            "-m",
            "launcher",
            "run",
            "-f",
            str(REPO / "runspecs" / "hf-finetune-local.yaml"),
            "--follow",
            "--set",
            f"parameters.loggers.mlflow.tracking_uri={mlruns.as_uri()}",
            "--set",
            "parameters.loggers.mlflow.experiment_name=finetune",
        ],
        env,
        timeout=600,
        cwd=work,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    (run_dir,) = [p for p in (home / "runs").iterdir() if p.name.startswith("hf-finetune-local-")]

    recs = [json.loads(line) for line in (run_dir / "artifacts" / "metrics.jsonl").read_text().splitlines()]
    start = recs[0]
    assert start["event"] == "fit_start" and start["world_size"] == 2 and start["global_batch_size"] == 32
    evals = merged_eval(recs)
    assert len(evals) == 3, "one evaluation per epoch"
    assert evals[-1]["metrics/eval/accuracy"] > 0.9 and evals[-1]["metrics/eval/f1"] > 0.9
    assert all("metrics/eval/loss" in e for e in evals)
    assert any("loss/train/total" in r.get("metrics", {}) for r in recs)
    assert any(r.get("metrics", {}).get("throughput/samples_per_sec", 0) > 0 for r in recs)

    shown = subprocess.run(
        [sys.executable, "-m", "launcher", "metrics", run_dir.name, "-m", "metrics/eval/accuracy", "-o", "json"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert str(round(evals[-1]["metrics/eval/accuracy"], 4))[:4] in shown.stdout

    best = json.loads((work / "out" / "sentiment" / "checkpoints" / run_dir.name / "best" / "config.json").read_text())
    assert best["id2label"] == {"0": "negative", "1": "positive"} and best["label2id"] == {"negative": 0, "positive": 1}

    from mlflow.tracking import MlflowClient

    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # for this test's own reader
    client = MlflowClient(tracking_uri=mlruns.as_uri())
    exp = client.get_experiment_by_name("finetune")
    (run,) = client.search_runs([exp.experiment_id])
    history = client.get_metric_history(run.info.run_id, "eval_accuracy")
    assert len(history) == 3 and history[-1].value == pytest.approx(evals[-1]["metrics/eval/accuracy"])


def test_a_killed_run_resumes_from_the_newest_checkpoint_on_the_volume(
    tmp_path: Path, sentiment, databricks_files
) -> None:
    databricks_files.create_volume("main", "default", "ckpt")
    cfg = hf_config(
        tmp_path / "params.yaml",
        sentiment,
        f"{CKPT_VOLUME}/{{run_name}}",
        max_steps=24,
        eval_strategy="steps",
        eval_steps=6,
        save_total_limit=2,
    )
    env = train_env(
        databricks_files,
        RUN_NAME="hf-resume",
        LAUNCHER_BACKEND="local",
        LAUNCHER_ON_HOST="1",
        LAUNCHER_ARTIFACTS_DIR=str(tmp_path / "attempt1" / "artifacts"),
    )
    marker = "/Volumes/main/default/ckpt/hf-resume/checkpoint-6/trainer_state.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "launcher.train.hf", str(cfg)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        wait_until(
            lambda: databricks_files.exists(marker) or proc.poll() is not None,
            400,
            interval=0.2,
            message="the first checkpoint on the volume",
        )
        assert databricks_files.exists(marker), (
            proc.stderr.read()[-3000:] if proc.poll() is not None else "no checkpoint"
        )
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()

    # The retry lands on another machine: its local staging is empty; the Volume has the checkpoint.
    env["LAUNCHER_ARTIFACTS_DIR"] = str(tmp_path / "attempt2" / "artifacts")
    second = run_trainer(["-m", "launcher.train.hf", str(cfg)], env, timeout=500)
    assert second.returncode == 0, second.stderr[-4000:]
    recs = records(second.stdout)
    start = recs[0]
    assert start["event"] == "fit_start" and start["start_batch"] >= 6 and start["max_batches"] == 24
    assert "resuming from" in second.stderr and "checkpoint-" in second.stderr
    assert min(r["step"] for r in recs if "metrics" in r) > start["start_batch"]
    files = databricks_files.paths("/Volumes/main/default/ckpt/hf-resume")
    assert any(p.endswith("/best/config.json") for p in files)
    assert any(p.endswith("checkpoint-24/trainer_state.json") for p in files)
    assert not any("/checkpoint-6/" in p for p in files), "rotated-out checkpoints leave the Volume too"
    assert databricks_files.token not in second.stdout + second.stderr
