"""Trackers: the MPT trainer's `loggers: {mlflow: ...}` block lands its metrics in an MLflow
file store (Composer's MLFlowLogger); `launcher metrics RUN --to mlflow|tensorboard DEST`
exports a finished run's records. (The HF recipe's report_to: tests/train/test_hf.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.metrics.logdata import loss, step_line
from tests.metrics.test_cli import _submit
from tests.train.conftest import losses, records, run_trainer, tiny_config, train_env

pytestmark = pytest.mark.train


def test_mpt_metrics_land_in_an_mlflow_file_store(tmp_path: Path, number_say, monkeypatch) -> None:
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # for this test's own reader
    from mlflow.tracking import MlflowClient

    store = (tmp_path / "mlruns").as_uri()
    cfg = tiny_config(tmp_path / "params.yaml", tokenizer=number_say.tokenizer, remote=str(number_say.mds),
                      max_duration="3ba", loggers={"mlflow": {"tracking_uri": store, "experiment_name": "tiny-mpt"}})
    proc = run_trainer(["-m", "launcher.train", str(cfg)], train_env(None, RUN_NAME="mlflow-mpt"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    ours = losses(records(proc.stdout))

    client = MlflowClient(tracking_uri=store)
    exp = client.get_experiment_by_name("tiny-mpt")
    (run,) = client.search_runs([exp.experiment_id])
    history = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "loss/train/total")}
    assert sorted(history) == sorted(s - 1 for s in ours) or sorted(history) == sorted(ours), history
    assert sorted(history.values()) == pytest.approx(sorted(ours.values()), rel=1e-4)


def test_metrics_export_to_mlflow_and_tensorboard(tmp_path: Path, capsys, monkeypatch) -> None:
    pytest.importorskip("mlflow")
    pytest.importorskip("tensorboardX")
    from mlflow.tracking import MlflowClient

    from launcher.cli.errors import run_cli
    from launcher.cli.main import cli

    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    (work / "log.txt").write_text("\n".join(step_line(s) for s in range(1, 7)) + "\n")
    run = _submit(home, work, "export", "cat log.txt")
    monkeypatch.setenv("LAUNCHER_HOME", str(home))

    store = (tmp_path / "mlruns").as_uri()
    assert run_cli(cli, ["metrics", run, "--to", "mlflow", store, "--experiment", "exported"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"✔ Exported 12 points of 2 metrics of {run} to {store} (experiment exported, run ")
    client = MlflowClient(tracking_uri=store)
    (mrun,) = client.search_runs([client.get_experiment_by_name("exported").experiment_id])
    assert mrun.info.run_name == run and mrun.info.status == "FINISHED"
    history = client.get_metric_history(mrun.info.run_id, "loss/train/total")
    assert [(m.step, m.value) for m in sorted(history, key=lambda m: m.step)] == [(s, loss(s, 1)) for s in range(1, 7)]

    assert run_cli(cli, ["metrics", run, "--to", "tensorboard", str(tmp_path / "tb")]) == 0
    events = sorted((tmp_path / "tb" / run).glob("events.out.tfevents.*"))
    assert len(events) == 1
    scalars = [(e.step, v.simple_value) for e in read_events(events[0]) for v in e.summary.value if v.tag == "loss/train/total"]
    assert scalars == [(s, pytest.approx(loss(s, 1))) for s in range(1, 7)]


def read_events(path: Path) -> list:
    """TensorBoard's record format (length, crc, Event proto, crc), read with tensorboardX's protos."""
    import struct

    from tensorboardX.proto.event_pb2 import Event

    out = []
    data = path.read_bytes()
    i = 0
    while i < len(data):
        (n,) = struct.unpack("<Q", data[i : i + 8])
        event = Event()
        event.ParseFromString(data[i + 12 : i + 12 + n])
        out.append(event)
        i += 12 + n + 4
    return out
