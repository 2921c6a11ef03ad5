"""Trackers: the MPT trainer's `loggers: {mlflow: ...}` block lands its metrics in the
Databricks workspace's tracking server when the run has Databricks credentials and no
tracking_uri (Composer's MLFlowLogger; the workspace is the fake in
tests/fakes/databricks_files.py and databricks_mlflow.py); `launcher metrics RUN --to
mlflow|tensorboard DEST` exports a finished run's records. A run's metrics in an MLflow
`file:` store, through the same tracking-URI rule: the HF recipe's test (report_to,
tests/train/test_hf.py), which trains anyway; training the MPT once more for it cost 20 s."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.train.trackers import mlflow_tracking_uri
from tests.metrics.logdata import loss, step_line
from tests.metrics.test_cli import _submit
from tests.train.conftest import losses, records, run_trainer, tiny_config, train_env

pytestmark = pytest.mark.train


EXPERIMENT = "/Users/me@example.com/launcher-test"


def test_mpt_metrics_land_in_the_workspace_mlflow(tmp_path: Path, databricks_files, uc_data: str, number_say) -> None:
    """Credentials and no tracking_uri: the run's experiment, run, params, tags and per-step
    loss are on the workspace that also served its dbfs:/Volumes data."""
    pytest.importorskip("mlflow")
    workspace = databricks_files.mlflow
    cfg_mlflow = {"experiment_name": EXPERIMENT}  # no tracking_uri
    cfg = tiny_config(
        tmp_path / "params.yaml",
        tokenizer=number_say.tokenizer,
        remote=uc_data,
        max_duration="3ba",
        loggers={"mlflow": cfg_mlflow},
    )
    env = train_env(databricks_files, RUN_NAME="mlflow-databricks")
    proc = run_trainer(["-m", "launcher.train", str(cfg)], env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ours = losses(records(proc.stdout))
    assert sorted(ours) == [1, 2, 3]

    assert databricks_files.unknown == [], databricks_files.unknown
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
    assert not (tmp_path / "mlruns").exists()
    assert "Error running MLFlowLogger" not in proc.stderr, proc.stderr[-3000:]
    assert databricks_files.token not in proc.stdout + proc.stderr
    # Composer's MLFlowLogger falls back to "databricks" on DATABRICKS_TOKEN alone, so the run by
    # itself cannot tell our rule (which passes tracking_uri="databricks") from Composer's.
    assert mlflow_tracking_uri(cfg_mlflow, env) == "databricks"


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
