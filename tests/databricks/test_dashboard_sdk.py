"""A Databricks run as the dashboard and the SDK see it, as they see a run on the others: the
dashboard's runs list, run page data and per-rank log; mcli's SDK from a fresh Python."""

from __future__ import annotations

import json
import subprocess
import sys

from starlette.testclient import TestClient

from launcher.ui.app import create_app
from launcher.ui.runs import RunsSource
from tests.databricks.test_runs import submitted
from tests.ui.conftest import read_log

SDK_SCRIPT = """
import json, sys
from launcher.mcli import get_run, get_run_logs, get_runs

run = get_run(sys.argv[1])
listed = [r.name for r in get_runs(cluster_names=["dbx"])]
logs = "".join(get_run_logs(run))  # mcli yields the log in chunks
print(json.dumps({"status": run.status.value, "cluster": run.cluster, "listed": listed, "logs": logs}))
"""


def test_the_dashboard_and_the_sdk_show_a_databricks_run(cli, monkeypatch):
    spec = cli.spec(
        "shown",
        """
        name: shown
        compute: {cluster: dbx}
        command: echo "shown from $RUN_NAME rank $NODE_RANK"
        """,
    )
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stderr
    name = submitted(r.stderr + r.stdout)

    # The dashboard, in this process, with the same credentials as the CLI's.
    monkeypatch.setenv("DATABRICKS_TOKEN", cli.env["DATABRICKS_TOKEN"])
    with TestClient(create_app(RunsSource())) as c:
        (row,) = [row for row in c.get("/api/runs").json()["runs"] if row["name"] == name]
        assert (row["cluster"], row["status"]) == ("dbx", "COMPLETED")
        detail = c.get(f"/api/runs/{name}").json()
        assert [a["attempt"] for a in detail["attempts"]] == [1]
        lines, _ = read_log(c, f"/api/runs/{name}/logs?follow=0&rank=0")
        assert any(f"shown from {name} rank 0" in line for line in lines), lines

    # mcli's SDK, one import changed, from a fresh interpreter.
    done = subprocess.run(
        [sys.executable, "-c", SDK_SCRIPT, name], env=cli.env, cwd=cli.cwd, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert (seen["status"], seen["cluster"]) == ("COMPLETED", "dbx")
    assert name in seen["listed"]
    assert f"shown from {name} rank 0" in seen["logs"]
