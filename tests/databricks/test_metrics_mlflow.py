"""`launcher metrics` of a Databricks run reads the workspace's MLflow, where the run's
trainer logged (Feature.TRACKER_METRICS), through the fake workspace program: the command
logs with the real mlflow client (tracking URI `databricks`, the workspace's credentials
from a `databricks` secret through the run's scope) and the launcher pages get-history."""

from __future__ import annotations

import json

from tests.conftest import needs
from tests.databricks.test_runs import submitted

needs("mlflow")

POINTS = 25_003  # more than one page of metrics/get-history (25000 at most)

LOGGER = f"""
import os, time, mlflow
from mlflow.entities import Metric
mlflow.set_tracking_uri("databricks")
mlflow.set_experiment(os.environ["MLFLOW_EXPERIMENT_NAME"])
with mlflow.start_run(run_name=os.environ["RUN_NAME"]) as run:
    now = int(time.time() * 1000)
    curve = [Metric("loss", 100.0 / (step + 1), now + step, step) for step in range({POINTS})]
    mlflow.tracking.MlflowClient().log_batch(run.info.run_id, metrics=curve)
print("logged", {POINTS}, "points")
"""
COMMAND = f"python - <<'PY'\n{LOGGER}PY\n"


def test_metrics_come_from_mlflow_in_pages(cli, workspace):
    r = cli("secret", "create", "databricks", "--host", workspace.host, input=workspace.token)
    assert r.returncode == 0, r.stderr
    spec = cli.spec(
        "curve",
        f"""
        name: curve
        compute: {{cluster: dbx}}
        secrets: [databricks]
        env_variables: {{MLFLOW_EXPERIMENT_NAME: {cli.workspace_dir}/curves}}
        command: {json.dumps(COMMAND)}
        """,
    )
    r = cli("run", "-f", str(spec), "--follow", timeout=300)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert f"logged {POINTS} points" in r.stdout
    name = submitted(r.stderr + r.stdout)
    table = cli("metrics", name)
    assert table.returncode == 0, table.stderr
    assert "from MLflow run " in table.stdout + table.stderr, table.stdout
    got = cli("metrics", name, "--metric", "loss", "-o", "json")
    assert got.returncode == 0, got.stderr
    points = json.loads(got.stdout)
    # every point, so get-history was asked for its second page
    assert len(points) == POINTS
    assert [(p["step"], p["value"]) for p in points[:2]] == [(0, 100.0), (1, 50.0)]
    assert (points[-1]["step"], points[-1]["value"]) == (POINTS - 1, 100.0 / POINTS)
