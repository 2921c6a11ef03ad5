"""Trackers: the fake workspace's MLflow (tests/fakes/databricks_files.py and
databricks_mlflow.py) answers the real client; `launcher metrics RUN --to
mlflow|tensorboard DEST` exports a finished run's records. The MPT trainer's `loggers:
{mlflow: ...}` block landing its metrics in the workspace's tracking server (credentials and
no tracking_uri): tests/train/test_train.py, whose one training serves it. A run's metrics in an MLflow
`file:` store, through the same tracking-URI rule: the HF recipe's test (report_to,
tests/train/test_hf.py), which trains anyway; training the MPT once more for it cost 20 s."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.train.trackers import mlflow_tracking_uri
from tests.metrics.logdata import loss, step_line
from tests.metrics.test_cli import _submit

pytestmark = pytest.mark.train


EXPERIMENT = "/Users/me@example.com/launcher-test"


def test_fake_workspace_mlflow_speaks_to_the_real_client(databricks_files, monkeypatch) -> None:
    pytest.importorskip("mlflow")
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.exceptions import MlflowException, RestException
    from mlflow.tracking import MlflowClient

    for k, v in databricks_files.env().items():
        monkeypatch.setenv(k, v)
    uri = mlflow_tracking_uri({}, databricks_files.env())
    assert uri == "databricks"
    client = MlflowClient(tracking_uri=uri)
    assert client.get_experiment_by_name(EXPERIMENT) is None  # 404 RESOURCE_DOES_NOT_EXIST, read as "none"
    exp_id = client.create_experiment(EXPERIMENT)
    assert client.get_experiment(exp_id).name == EXPERIMENT
    run = client.create_run(exp_id, run_name="direct")
    client.log_batch(
        run.info.run_id,
        metrics=[Metric("loss", 2.5, 1000, 1), Metric("loss", 2.0, 1001, 2)],
        params=[Param("lr", "0.003")],
        tags=[RunTag("team", "llm")],
    )
    client.log_metric(run.info.run_id, "loss", 1.5, timestamp=1002, step=3)
    client.set_tag(run.info.run_id, "stage", "pretrain")
    client.set_terminated(run.info.run_id)

    (found,) = client.search_runs([client.get_experiment_by_name(EXPERIMENT).experiment_id])
    assert found.info.run_name == "direct" and found.info.status == "FINISHED"
    assert found.data.metrics == {"loss": 1.5} and found.data.params == {"lr": "0.003"}  # the latest value
    assert found.data.tags["team"] == "llm" and found.data.tags["stage"] == "pretrain"
    history = client.get_metric_history(run.info.run_id, "loss")
    assert [(m.step, m.value, m.timestamp) for m in history] == [(1, 2.5, 1000), (2, 2.0, 1001), (3, 1.5, 1002)]
    (fake_run,) = databricks_files.mlflow.runs_of(exp_id)
    assert fake_run.metrics == [("loss", 2.5, 1, 1000), ("loss", 2.0, 2, 1001), ("loss", 1.5, 3, 1002)]
    with pytest.raises(MlflowException, match="Changing param values is not allowed") as e:
        client.log_param(run.info.run_id, "lr", "0.1")
    assert e.value.error_code == "INVALID_PARAMETER_VALUE"
    with pytest.raises(RestException) as e:  # an endpoint the fake does not speak
        client.delete_run(run.info.run_id)
    assert e.value.error_code == "ENDPOINT_NOT_FOUND"
    assert databricks_files.unknown == [("POST", "/api/2.0/mlflow/runs/delete")]

    monkeypatch.setenv("DATABRICKS_TOKEN", "dapi-wrong-token-000")
    with pytest.raises(RestException, match="Invalid access token") as e:
        MlflowClient(tracking_uri=uri).get_experiment_by_name(EXPERIMENT)
    assert e.value.error_code == "UNAUTHENTICATED"
    # The single-item endpoints were really called (the client could have sent log-batch instead).
    assert {
        ("POST", "/runs/log-metric"),
        ("POST", "/runs/set-tag"),
        ("POST", "/runs/log-parameter"),
        ("GET", "/experiments/get"),
        ("GET", "/metrics/get-history"),
    } <= set(databricks_files.mlflow.endpoints())


def test_metrics_export_to_mlflow_and_tensorboard(tmp_path: Path, capsys, monkeypatch) -> None:
    pytest.importorskip("mlflow")
    pytest.importorskip("tensorboardX")
    from mlflow.tracking import MlflowClient

    from launcher.cli.error_report import run_cli
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
    scalars = [
        (e.step, v.simple_value) for e in read_events(events[0]) for v in e.summary.value if v.tag == "loss/train/total"
    ]
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
