"""A spec on the Databricks backend, through the CLI, against the fake workspace program:
the same YAML as on the other backends, its statuses, logs, stop, secrets and refusals."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import wait_until
from tests.databricks.conftest import LOG_VOLUME

SECRET = "s3cr3t-value-0123456789"


def submitted(out: str) -> str:
    m = re.search(r"Run (\S+) (?:submitted|started|completed|failed)", out)
    assert m, out
    return m.group(1)


def test_cluster_add_asks_the_workspace_who_the_token_is(cli, workspace):
    r = cli("cluster", "add", "other", "--backend", "databricks", "--host", workspace.host, "--log-volume", LOG_VOLUME)
    assert r.returncode == 0, r.stderr
    assert "Jobs API 2.2 served (asked the cluster)" in r.stdout + r.stderr
    cli.env["DATABRICKS_TOKEN"] = "dapi-wrong"
    r = cli("cluster", "add", "third", "--backend", "databricks", "--host", workspace.host)
    assert r.returncode == 0, r.stderr
    assert "cluster third: could not ask what it serves" in r.stderr
    assert "dapi-wrong" not in r.stdout + r.stderr


def test_a_run_follows_to_completion_with_its_logs_and_reads(cli):
    spec = cli.spec(
        "hello",
        """
        name: hello
        compute: {cluster: dbx}
        command: |
          echo "hello from $RUN_NAME rank $NODE_RANK of $WORLD_SIZE"
          cat "$PARAMETERS"
        parameters: {steps: 3}
        """,
    )
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stderr
    name = submitted(r.stderr + r.stdout)
    assert f"hello from {name} rank 0 of 1" in r.stdout
    assert "steps: 3" in r.stdout
    got = cli("get", "runs", "-o", "json")
    assert got.returncode == 0, got.stderr
    assert [(x["name"], x["status"]) for x in json.loads(got.stdout)] == [(name, "COMPLETED")]
    record = cli.describe(name)
    assert record["status"] == "COMPLETED" and record["cluster"] == "dbx"
    logs = cli("logs", name)
    assert logs.returncode == 0, logs.stderr
    assert f"hello from {name} rank 0 of 1" in logs.stdout


def test_a_failing_command_fails_the_run_and_follow_exits_1(cli):
    spec = cli.spec("bad", "name: bad\ncompute: {cluster: dbx}\ncommand: 'echo before; exit 3'\n")
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 1, (r.stdout, r.stderr)
    name = submitted(r.stderr + r.stdout)
    assert "before" in r.stdout
    record = cli.describe(name)
    assert record["status"] == "FAILED"


def test_stop_cancels_the_run_and_it_ends_stopped(cli):
    spec = cli.spec("sleeper", "name: sleeper\ncompute: {cluster: dbx}\ncommand: 'echo up; sleep 600'\n")
    r = cli("run", "-f", str(spec))
    assert r.returncode == 0, r.stderr
    name = submitted(r.stderr + r.stdout)
    cli.wait_status(name, {"RUNNING"})
    r = cli("stop", name, "-y")
    assert r.returncode == 0, r.stderr
    record = cli.wait_status(name, {"STOPPED"})
    assert record["status"] == "STOPPED"


def test_secrets_go_through_a_scope_and_never_into_the_payload_or_output(cli, workspace):
    assert cli("secret", "create", "env", "API_TOKEN", input=SECRET).returncode == 0
    spec = cli.spec(
        "sec",
        """
        name: sec
        compute: {cluster: dbx}
        command: 'echo "token is $API_TOKEN"; test "$API_TOKEN" = "s3cr3t-value-0123456789"'
        """,
    )
    dry = cli("run", "-f", str(spec), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert SECRET not in dry.stdout + dry.stderr
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, (r.stdout, r.stderr)
    name = submitted(r.stderr + r.stdout)
    assert "token is" in r.stdout and SECRET not in r.stdout + r.stderr
    payload = json.dumps([s for s in workspace.submits() if s["run_name"] == name])
    assert SECRET not in payload
    assert f'"API_TOKEN": "{{{{secrets/launcher-{name}/API_TOKEN}}}}"' in payload
    assert SECRET not in cli("logs", name).stdout
    assert cli("delete", "run", name, "-y").returncode == 0
    assert f"launcher-{name}" not in [s.name for s in workspace.client().secrets.list_scopes()]


def test_validate_names_what_databricks_ignores_and_refuses_offline(cli, workspace):
    spec = cli.spec(
        "warned",
        """
        name: warned
        image: python:3.11-slim
        compute: {cluster: dbx, gpus: 8, gpu_type: a100, node_names: [n1]}
        scheduling: {priority: high, preemptible: true}
        command: 'true'
        """,
    )
    r = cli("validate", "-f", str(spec))
    assert r.returncode == 0, r.stderr
    for field in ("image", "scheduling.priority", "scheduling.preemptible", "compute.node_names"):
        assert f"{field}: ignored on Databricks (profile dbx)" in r.stderr, r.stderr
    r = cli(
        "cluster", "add", "gpu", "--backend", "databricks", "--host", workspace.host, "--compute-mode", "serverless"
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    bad = cli.spec("bad", "name: bad\ncompute: {cluster: gpu, gpus: 2, gpu_type: a100}\ncommand: 'true'\n")
    for command in (["validate"], ["run", "--dry-run"], ["run"]):
        r = cli(*command, "-f", str(bad))
        assert r.returncode == 2, (command, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr
        assert "serverless GPU compute offers GPU_1xA10" in r.stderr and "GPU_8xB300" in r.stderr
    ok = cli.spec("ok", "name: ok\ncompute: {cluster: gpu, gpus: 8, gpu_type: h100}\ncommand: 'true'\n")
    dry = cli("run", "-f", str(ok), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "GPU_8xH100" in dry.stdout and "accelerator_count: 8" in dry.stdout


def test_a_503_and_a_429_are_retried(cli, workspace):
    workspace.fail("POST", "/api/2.2/jobs/runs/submit", 503, "TEMPORARILY_UNAVAILABLE")
    workspace.fail("GET", "/api/2.2/jobs/runs/get", 429, "TOO_MANY_REQUESTS")
    spec = cli.spec("retried", "name: retried\ncompute: {cluster: dbx}\ncommand: 'echo fine'\n")
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stderr
    assert "fine" in r.stdout


def test_metrics_come_from_the_records_in_the_delivered_log(cli):
    spec = cli.spec(
        "curve",
        """\
        name: curve
        compute: {cluster: dbx}
        command: |
          for s in 1 2 3; do
            echo "@@launcher.metrics {\\"step\\":$s,\\"time\\":$s.5,\\"rank\\":0,\\"metrics\\":{\\"loss/train/total\\":$((4 - s)).5}}"
          done
        """,
    )
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stderr
    name = submitted(r.stderr + r.stdout)
    m = cli("metrics", name, "-m", "loss/train/total", "-o", "csv")
    assert m.returncode == 0, m.stderr
    assert [line.split(",")[3] for line in m.stdout.strip().splitlines()[1:]] == ["3.5", "2.5", "1.5"], m.stdout


def test_a_failed_run_restarts_as_attempt_2_and_delete_forgets_it(cli, workspace):
    spec = cli.spec(
        "flaky", "name: flaky\ncompute: {cluster: dbx}\ncommand: 'echo attempt $LAUNCHER_ATTEMPT; exit 1'\n"
    )
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 1, r.stderr
    name = submitted(r.stderr + r.stdout)
    r = cli("run", "-r", name, "--follow")
    assert r.returncode == 1, r.stderr
    assert "attempt 2" in r.stdout
    record = cli.describe(name)
    assert [a["status"] for a in record["attempts"]] == ["FAILED", "FAILED"], record["attempts"]
    assert "attempt 1" in cli("logs", name, "--attempt", "1").stdout
    assert cli("delete", "run", name, "-y").returncode == 0
    assert cli("describe", "run", name).returncode == 2
    assert name not in [o.path.rsplit("/", 1)[-1] for o in workspace.client().workspace.list(cli.workspace_dir)]


def test_a_run_the_workspace_lost_is_unknown_and_a_workspace_away_is_named(cli, workspace):
    spec = cli.spec("gone", "name: gone\ncompute: {cluster: dbx}\ncommand: 'sleep 600'\n")
    r = cli("run", "-f", str(spec))
    assert r.returncode == 0, r.stderr
    name = submitted(r.stderr + r.stdout)
    runs = {r.run_name: r.run_id for r in workspace.client().jobs.list_runs()}
    workspace.control("lose", {"run_id": runs[name]})
    record = cli.wait_status(name, {"UNKNOWN"})
    assert f"the workspace no longer has run {runs[name]}" in json.dumps(record)
    r = cli("cluster", "add", "away", "--backend", "databricks", "--host", "http://127.0.0.1:9")
    assert r.returncode == 0, r.stderr
    r = cli("get", "runs", "--cluster", "away")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "cluster away: cannot reach the workspace: connection refused" in r.stderr


def test_the_dry_run_prints_the_payload_offline(cli):
    spec = cli.spec(
        "big",
        """
        name: big
        compute: {cluster: dbx, gpus: 16, gpu_type: h100}
        scheduling: {max_duration: 0.5}
        command: 'true'
        """,
    )
    r = cli("run", "-f", str(spec), "--dry-run")
    assert r.returncode == 0, r.stderr
    for line in (
        "node_type_id: p5.48xlarge",
        "num_workers: 2",
        "spark.task.resource.gpu.amount: '1'",
        "timeout_seconds: 1800",
        f"destination: {LOG_VOLUME}/big-",
        "source: WORKSPACE",
    ):
        assert line in r.stdout, r.stdout
    assert re.search(r"^idempotency_token: [0-9a-f]{64}$", r.stdout, re.M), r.stdout
    assert "driver: 16 process(es) under TorchDistributor (local_mode false, use_gpu true)" in r.stderr


# A command that fails its first attempt, with a line that tells how, and succeeds after: the
# marker file is on this machine, where the fake workspace runs every driver.
FAILS_ONCE = """\
if [ ! -e {marker} ]; then touch {marker}; echo "{line}"; exit 1; fi
echo "attempt $LAUNCHER_ATTEMPT fine"
"""


def flaky_spec(cli, name: str, scheduling: str, line: str):
    command = FAILS_ONCE.format(marker=cli.cwd / f"{name}.marker", line=line)
    body = f"name: {name}\ncompute: {{cluster: dbx}}\nscheduling: {scheduling}\ncommand: |\n" + "".join(
        f"  {ln}\n" for ln in command.splitlines()
    )
    return cli.spec(name, body)


def test_a_system_failure_is_resubmitted_by_the_launcher_and_describe_shows_both(cli, workspace):
    spec = flaky_spec(
        cli,
        "sysretry",
        "{retry_on_system_failure: true, retry_backoff: {first: 2}}",
        "NCCL communicator was aborted on rank 0",
    )
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, (r.stdout, r.stderr)
    # said once, by the submit, not again with the outcome
    assert r.stderr.count("a one-time run is not retried by the workspace: the launcher submits") == 1, r.stderr
    name = submitted(r.stderr + r.stdout)
    assert "attempt 2 fine" in r.stdout
    record = cli.describe(name)
    assert record["status"] == "COMPLETED"
    assert [a["status"] for a in record["attempts"]] == ["FAILED", "COMPLETED"], record["attempts"]
    failure = record["attempts"][0]["failure"]
    assert failure["class"] == "collective" and failure["retried_as"] == "system", failure
    assert "NCCL communicator was aborted" in failure["evidence"]
    assert len([s for s in workspace.submits() if s["run_name"] == name]) == 2
    # Where its time went: the 2 s backoff is attempt 2's restart, not work; the parts add up.
    goodput = record["goodput"]
    parts = ("queued", "starting", "productive", "lost", "restarting")
    assert sum(goodput[p] for p in parts) == pytest.approx(goodput["wall"], abs=0.01), goodput
    assert goodput["restarting"] >= 2 and goodput["productive"] < goodput["wall"] - 2, goodput


def test_a_user_failure_is_not_retried_without_max_retries(cli, workspace):
    spec = flaky_spec(
        cli, "userfail", "{retry_on_system_failure: true, retry_backoff: {first: 0}}", "the program's own error"
    )
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 1, (r.stdout, r.stderr)
    name = submitted(r.stderr + r.stdout)
    record = cli.describe(name)
    assert record["status"] == "FAILED"
    assert [(a["status"], a["failure"]["class"]) for a in record["attempts"]] == [("FAILED", "user")]
    assert len([s for s in workspace.submits() if s["run_name"] == name]) == 1


def test_two_launchers_that_notice_a_failure_at_once_submit_one_attempt_2(cli, workspace):
    spec = flaky_spec(cli, "twice", "{max_retries: 1, retry_backoff: {first: 0}}", "first attempt fails")
    r = cli("run", "-f", str(spec))
    assert r.returncode == 0, r.stderr
    name = submitted(r.stderr + r.stdout)
    w = workspace.client()
    # Wait on the workspace itself: a launcher's read would notice the failure and retry it.
    wait_until(
        lambda: any(j.run_name == name and j.state.life_cycle_state.value == "TERMINATED" for j in w.jobs.list_runs()),
        60,
    )
    # Each submit is answered 2 s late, so both launchers read the record before either writes it.
    workspace.slow("POST", "/api/2.2/jobs/runs/submit", 2.0, times=2)
    observers = [cli.popen("describe", "run", name, "-o", "json") for _ in range(2)]
    for p in observers:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert len([s for s in workspace.submits() if s["run_name"] == name]) == 2  # attempt 1 and one attempt 2
    record = cli.wait_status(name, {"COMPLETED"})
    assert [a["status"] for a in record["attempts"]] == ["FAILED", "COMPLETED"], record["attempts"]


def test_a_retry_waits_out_its_backoff_and_a_stop_meanwhile_ends_the_run(cli, workspace):
    spec = flaky_spec(cli, "waits", "{max_retries: 1, retry_backoff: {first: 300}}", "first attempt fails")
    r = cli("run", "-f", str(spec))
    assert r.returncode == 0, r.stderr
    name = submitted(r.stderr + r.stdout)
    record = wait_until(lambda: (rec := cli.describe(name))["retry_at"] and rec, 60, interval=0.5)
    assert record["status"] == "PENDING" and "attempt 1 failed" in record["reason"], record["reason"]
    assert "a retry is due at" in record["reason"]
    r = cli("stop", name, "-y")
    assert r.returncode == 0, r.stderr
    record = cli.describe(name)
    assert (record["status"], record["reason"]) == ("STOPPED", "stopped by the user before attempt 2")
    assert len([s for s in workspace.submits() if s["run_name"] == name]) == 1


def test_update_max_retries_of_a_running_run_makes_its_failure_retried(cli, workspace):
    go = cli.cwd / "go"
    spec = cli.spec(
        "later",
        f"""
        name: later
        compute: {{cluster: dbx}}
        scheduling: {{retry_backoff: {{first: 0}}}}
        command: |
          if [ ! -e {cli.cwd}/later.marker ]; then
            touch {cli.cwd}/later.marker
            while [ ! -e {go} ]; do sleep 0.1; done
            exit 1
          fi
          echo "attempt $LAUNCHER_ATTEMPT fine"
        """,
    )
    r = cli("run", "-f", str(spec))
    assert r.returncode == 0, r.stderr
    name = submitted(r.stderr + r.stdout)
    cli.wait_status(name, {"RUNNING"})
    r = cli("update", "run", name, "--max-retries", "1")
    assert r.returncode == 0, r.stderr
    go.touch()
    record = cli.wait_status(name, {"COMPLETED", "FAILED"})
    assert [a["status"] for a in record["attempts"]] == ["FAILED", "COMPLETED"], record["attempts"]
    assert record["spec"]["scheduling"]["max_retries"] == 1


def test_auto_places_a_run_on_a_databricks_profile_whose_compute_maps_it(cli, workspace):
    r = cli(
        "cluster", "add", "gpu", "--backend", "databricks", "--host", workspace.host, "--compute-mode", "serverless"
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    spec = cli.spec("placed", "name: placed\ncompute: {cluster: auto}\ncommand: 'echo placed here'\n")
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert (
        "placement: dbx makes a new job cluster of 1 m5d.xlarge for it, gpu could not be asked "
        "(compute.gpus: serverless GPU compute runs GPU work only; ask for GPUs): placed on dbx"
    ) in r.stderr, r.stderr
    assert "placed here" in r.stdout


def test_a_serverless_run_follows_to_completion(cli, workspace):
    r = cli(
        "cluster", "add", "sls", "--backend", "databricks", "--host", workspace.host,
        "--compute-mode", "serverless", "--workspace-dir", cli.workspace_dir,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    spec = cli.spec(
        "sls",
        "name: sls\ncompute: {cluster: sls, gpus: 1, gpu_type: a10}\ncommand: 'echo serverless rank $NODE_RANK'\n",
    )
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, (r.stdout, r.stderr)
    name = submitted(r.stderr + r.stdout)
    assert "serverless rank 0" in r.stdout
    [payload] = [s for s in workspace.submits() if s["run_name"] == name]
    assert payload["tasks"][0]["ai_runtime_task"]["deployments"][0]["compute"] == {
        "accelerator_type": "GPU_1xA10",
        "accelerator_count": 1,
    }
    assert cli.describe(name)["status"] == "COMPLETED"
