"""The dashboard shows a run's failure class with its evidence, and its goodput: the run
page and /api/runs/NAME over a real local run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from launcher.ui.app import create_app
from launcher.ui.runs import RunsSource

XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus."


@pytest.fixture
def client(launcher_home) -> Iterator[TestClient]:
    with TestClient(create_app(RunsSource())) as c:
        yield c


def test_the_run_page_and_its_json_show_the_failure_class_and_goodput(cli, client):
    spec = cli.spec(
        "dash",
        f"""\
        name: dash
        command: |
          if [ "$LAUNCHER_ATTEMPT" = 1 ]; then echo '{XID}'; exit 1; fi
        scheduling: {{retry_on_system_failure: true, retry_backoff: {{first: 0.1s}}}}
        """,
    )
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stdout + r.stderr
    name = cli.describe("dash")["name"]
    rec = client.get(f"/api/runs/{name}").json()
    assert rec["failure"]["class"] == "hardware" and rec["attempts"][0]["failure"]["evidence"] == f"rank 0: {XID}"
    assert set(rec["goodput"]) >= {"wall", "queued", "starting", "productive", "lost", "restarting", "gpu_hours"}
    page = client.get(f"/runs/{name}").text
    assert f"Failure: hardware: rank 0: {XID}" in page
    assert f"hardware in attempt 1: rank 0: {XID}" in page
    assert 'id="goodput"' in page and "productive:" in page and "GPU-hours" in page
