"""`run -r`, `run --clone` and `update run` on the Kubernetes backend, through the CLI, against
the fake API server and its JobSet controller: a stopped or failed run restarted as its next
attempt (a new JobSet, rendered from the record's spec), a copy with overrides, max_duration
changed on a running run, and what is refused (a completed run, priority, max_retries),
saying why."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime, timedelta
from pathlib import Path

import yaml

from launcher.cli.error_report import run_cli
from launcher.cli.main import cli
from tests.conftest import wait_until
from tests.kubernetes.test_backend import worker

# Attempt 1 runs until it is stopped (or its deadline); any later attempt finishes at once.
FIRST_ATTEMPT_WAITS = 'if [ "$LAUNCHER_ATTEMPT" = 1 ]; then sleep 300; fi; echo "attempt $LAUNCHER_ATTEMPT done"'


def launcher(*args: str) -> int:
    try:
        return run_cli(cli, list(args))
    except SystemExit as e:  # `run --follow` exits with the run's outcome
        return int(e.code or 0)


def spec_file(tmp_path: Path, command: str, **fields) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(
        yaml.safe_dump({"name": "again", "image": "ghcr.io/example/trainer:2.0", "command": command, **fields})
    )
    return path


def submit(tmp_path: Path, capsys, command: str, **fields) -> str:
    assert launcher("run", "-f", str(spec_file(tmp_path, command, **fields)), "--cluster", "fake", "--no-follow") == 0
    return re.search(r"Run (again-[a-z0-9]{6}) submitted", capsys.readouterr().out).group(1)


def record(capsys, name: str) -> dict:
    capsys.readouterr()
    assert launcher("describe", "run", name, "-o", "json") == 0
    return json.loads(capsys.readouterr().out)


def wait_status(capsys, name: str, *statuses: str, timeout: float = 60) -> dict:
    return wait_until(
        lambda: (r := record(capsys, name))["status"] in statuses and r,
        timeout,
        interval=0.2,
        message=f"{name} to be {' or '.join(statuses)}",
    )


def test_restart_a_stopped_run_as_its_next_attempt(fake_kube, tmp_path, capsys):
    name = submit(tmp_path, capsys, FIRST_ATTEMPT_WAITS, compute={"nodes": 2})
    wait_status(capsys, name, "RUNNING")
    assert launcher("stop", name, "-y") == 0
    wait_until(
        lambda: not fake_kube.list("JobSet", "default", f"launcher.dev/run={name}")[0],
        30,
        message="the stopped run's JobSet to go",
    )
    capsys.readouterr()

    assert launcher("run", "-r", name, "--follow") == 0
    out, err = capsys.readouterr()
    assert f"Run {name} restarted: attempt 2." in out
    assert "[rank 0] attempt 2 done" in out and "[rank 1] attempt 2 done" in out
    jobset = fake_kube.get("JobSet", "default", name)
    assert jobset["metadata"]["labels"]["launcher.dev/attempt"] == "2"
    rec = record(capsys, name)
    assert rec["status"] == "COMPLETED"
    assert [(a["attempt"], a["status"]) for a in rec["attempts"]] == [(1, "STOPPED"), (2, "COMPLETED")]

    # A completed run is not restarted: it says why, and what to do instead.
    assert launcher("run", "-r", name) == 2
    err = capsys.readouterr().err
    assert f"run {name} completed: only a stopped or failed run can be restarted" in err
    assert f"launcher run --clone {name}" in err and "Traceback" not in err


def test_a_restarted_run_s_duration_counts_its_attempts_not_the_time_it_sat_stopped(fake_kube, tmp_path, capsys):
    """As on the local backend (tests/cli/test_mcli_run_flags.py): the attempts' running
    time, from the same records layer (launcher.sdk.records.running_time)."""
    name = submit(tmp_path, capsys, FIRST_ATTEMPT_WAITS)
    wait_status(capsys, name, "RUNNING")
    assert launcher("stop", name, "-y") == 0
    wait_status(capsys, name, "STOPPED")
    time.sleep(4)  # stopped, before `run -r`
    assert launcher("run", "-r", name, "--follow") == 0
    rec = record(capsys, name)

    at = datetime.fromisoformat
    first, second = rec["attempts"]
    assert at(second["started_at"]) - at(first["ended_at"]) >= timedelta(seconds=3)
    ran = sum((at(a["ended_at"]) - at(a["started_at"]) for a in (first, second)), timedelta())
    minutes, seconds = divmod(int(ran.total_seconds()), 60)
    assert launcher("describe", "run", name) == 0
    assert f"Duration:   {minutes}:{seconds:02d}\n" in capsys.readouterr().out


def test_restart_a_failed_run_whose_retries_ran_out(fake_kube, tmp_path, capsys):
    spec = spec_file(tmp_path, worker("--lines", "2", "--fail-rank", "0", "--fail-code", "3", "--fail-attempt", "1"))
    assert launcher("run", "-f", str(spec), "--cluster", "fake", "--follow") == 1
    name = re.search(r"Run (again-[a-z0-9]{6}) failed", capsys.readouterr().err).group(1)

    assert launcher("run", "-r", name, "--follow") == 0
    out, _ = capsys.readouterr()
    assert "rank 0 attempt 2 starting" in out
    rec = record(capsys, name)
    assert [(a["attempt"], a["status"]) for a in rec["attempts"]] == [(1, "FAILED"), (2, "COMPLETED")]
    assert rec["attempts"][0]["reason"] == "rank 0 exited with code 3"
    # The restart deleted the failed JobSet and its pods; attempt 1's log was kept first.
    assert launcher("logs", name, "--attempt", "1") == 0
    out = capsys.readouterr().out
    assert "rank 0 fails with code 3" in out and "[launcher] exit code 3" in out, out


def test_restart_refuses_a_running_run(fake_kube, tmp_path, capsys):
    name = submit(tmp_path, capsys, FIRST_ATTEMPT_WAITS)
    wait_status(capsys, name, "RUNNING")
    capsys.readouterr()
    assert launcher("run", "-r", name) == 2
    err = capsys.readouterr().err
    assert f"run {name} is RUNNING: only a stopped or failed run can be restarted" in err
    assert launcher("stop", name, "-y") == 0


def test_clone_submits_a_copy_with_overrides_to_the_same_cluster(fake_kube, tmp_path, capsys):
    spec = spec_file(tmp_path, "echo clone says $GREETING", env_variables={"GREETING": "hello"}, parameters={"lr": 0.1})
    assert launcher("run", "-f", str(spec), "--cluster", "fake", "--follow") == 0
    name = re.search(r"Run (again-[a-z0-9]{6}) completed", capsys.readouterr().err).group(1)

    assert launcher("run", "--clone", name, "--env", "GREETING=again", "--follow") == 0
    out, err = capsys.readouterr()
    copy = re.search(r"Run (again-[a-z0-9]{6}) completed", err).group(1)
    assert copy != name and "clone says again" in out
    rec = record(capsys, copy)
    assert rec["cluster"] == "fake" and rec["spec"]["parameters"] == {"lr": 0.1}
    assert rec["spec"]["env_variables"]["GREETING"] == "again"


def test_update_a_running_run(fake_kube, tmp_path, capsys):
    name = submit(tmp_path, capsys, FIRST_ATTEMPT_WAITS)
    wait_status(capsys, name, "RUNNING")
    capsys.readouterr()

    # JobSet's failurePolicy cannot change: refused, saying why, and nothing changes.
    assert launcher("update", "run", name, "--max-retries", "2") == 2
    err = capsys.readouterr().err
    assert (
        f"cannot change scheduling.max_retries of run {name}: JobSet's failurePolicy (maxRestarts) is immutable" in err
    )
    # Priority cannot change on a pod that exists.
    assert launcher("update", "run", name, "--priority", "high") == 2
    err = capsys.readouterr().err
    assert f"cannot change scheduling.priority of run {name}: a pod's priority is fixed when it is created" in err
    assert record(capsys, name)["spec"]["scheduling"]["max_retries"] == 0  # as submitted

    # The live attempt's deadline moves while it runs: past it the attempt fails, and is not retried.
    assert launcher("update", name, "--max-duration", "0.0005") == 0
    out, err = capsys.readouterr()
    assert f"Run {name} updated: max_duration 0.0005" in out
    assert "an attempt the JobSet controller starts after a failure has the submitted one" in err
    rec = wait_status(capsys, name, "FAILED", timeout=30)
    assert "max_duration" in rec["reason"] and len(rec["attempts"]) == 1
    assert rec["spec"]["scheduling"]["max_duration"] == 0.0005

    # An ended run has nothing to update.
    assert launcher("update", name, "--max-duration", "1") == 2
    assert f"run {name} has ended (FAILED): there is nothing to update" in capsys.readouterr().err


def test_a_restart_counts_its_retries_afresh(fake_kube, tmp_path, capsys):
    spec = spec_file(
        tmp_path,
        'if [ "$LAUNCHER_ATTEMPT" -lt 4 ]; then exit 3; fi; echo "attempt $LAUNCHER_ATTEMPT done"',
        scheduling={"max_retries": 1, "retry_backoff": {"first": "0.1s"}},
    )
    assert launcher("run", "-f", str(spec), "--cluster", "fake", "--follow") == 1  # attempts 1 and 2 fail
    name = re.search(r"Run (again-[a-z0-9]{6}) failed", capsys.readouterr().err).group(1)

    assert launcher("run", "-r", name, "--follow") == 0  # attempt 3 fails, and its retry is attempt 4
    assert "attempt 4 done" in capsys.readouterr().out
    rec = record(capsys, name)
    assert [a["status"] for a in rec["attempts"]] == ["FAILED", "FAILED", "FAILED", "COMPLETED"]
