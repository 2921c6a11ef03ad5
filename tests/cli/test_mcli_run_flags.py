"""mcli 0.8.3's `run` flags and its `run -r`, `run --clone` and `update run`, on the local
backend through the real CLI: each spelling sets its field, a restart is the same run's next
attempt, a clone a new run with overrides, and an update reaches the running supervisor.
What cannot be done is refused with exit 2, saying why. (The Kubernetes side is
tests/kubernetes/test_restart_update.py.)"""

from __future__ import annotations

import json
import re
import time
from datetime import datetime, timedelta

import pytest

HELLO = "name: hello\ncommand: echo hello from $RUN_NAME\n"
# Attempt 1 waits for the file `go` (in the working directory), then fails; later attempts succeed.
FAIL_FIRST_WHEN_TOLD = """\
name: told
command: |
  if [ "$LAUNCHER_ATTEMPT" = 1 ]; then
    while [ ! -e go ]; do sleep 0.1; done
    echo "attempt 1 fails"; exit 3
  fi
  echo "attempt $LAUNCHER_ATTEMPT done"
scheduling:
  retry_backoff: {first: 0.1s}
"""
SLEEPER = "name: sleeper\ncommand: sleep 600\n"


def submitted_name(out: str) -> str:
    m = re.search(r"Run (\S+) submitted", out)
    assert m, out
    return m.group(1)


def dry_run_spec(cli, *flags: str) -> dict:
    spec = cli.spec("hello", HELLO)
    r = cli("run", "-f", str(spec), "--dry-run", "-o", "json", *flags)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["run"]


@pytest.mark.parametrize(
    ("flags", "path", "value"),
    [
        (["--run-name", "mine"], ("name",), re.compile(r"mine-[a-z0-9]{6}")),
        (["--gpu-num", "8"], ("compute", "gpus"), 8),
        (["--max_retries", "3"], ("scheduling", "max_retries"), 3),
        (["--max-duration", "1.5"], ("scheduling", "max_duration"), 1.5),
        (["--preemptible"], ("scheduling", "preemptible"), True),
        (["--no-preemptible"], ("scheduling", "preemptible"), False),
        (["--instance", "oci.bm.gpu.b4.8"], ("compute", "instance"), "oci.bm.gpu.b4.8"),
        (["--nodes", "2", "--node-names", "node-a,node-b"], ("compute", "node_names"), ["node-a", "node-b"]),
        (
            ["--nodes", "2", "--node-names", "node-a", "--node-names", "node-b"],
            ("compute", "node_names"),
            ["node-a", "node-b"],
        ),
    ],
)
def test_each_mcli_run_flag_sets_its_field(cli, flags, path, value):
    spec = dry_run_spec(cli, *flags)
    for key in path:
        spec = spec[key]
    assert value.fullmatch(spec) if isinstance(value, re.Pattern) else spec == value


def test_our_own_spellings_keep_working(cli):
    spec = dry_run_spec(cli, "--name", "ours", "--gpus", "4", "--max-retries", "2")
    assert spec["name"].startswith("ours-") and spec["compute"]["gpus"] == 4
    assert spec["scheduling"]["max_retries"] == 2


def test_a_bad_max_duration_names_the_flag(cli):
    spec = cli.spec("hello", HELLO)
    r = cli("run", "-f", str(spec), "--max-duration", "-1")
    assert r.returncode == 2
    assert "--max-duration -1" in r.stderr and "scheduling.max_duration" in r.stderr
    assert "Traceback" not in r.stderr


def test_no_follow_returns_once_submitted(cli):
    spec = cli.spec("hello", HELLO)
    r = cli("run", "-f", str(spec), "--no-follow")
    assert r.returncode == 0, r.stderr
    name = submitted_name(r.stdout)
    assert "hello from" not in r.stdout  # the logs were not followed
    assert cli.wait_status(name, {"COMPLETED"})["status"] == "COMPLETED"


def test_restart_a_stopped_run_as_its_next_attempt(cli):
    spec = cli.spec("told", FAIL_FIRST_WHEN_TOLD)
    name = submitted_name(cli("run", "-f", str(spec)).stdout)
    cli.wait_status(name, {"RUNNING"})
    assert cli("stop", name, "-y").returncode == 0

    r = cli("run", "-r", name, "--follow")
    assert r.returncode == 0, r.stderr
    assert f"Run {name} restarted: attempt 2." in r.stdout and "attempt 2 done" in r.stdout
    rec = cli.describe(name)
    assert rec["status"] == "COMPLETED"
    assert [(a["attempt"], a["status"]) for a in rec["attempts"]] == [(1, "STOPPED"), (2, "COMPLETED")]
    assert "attempt 2 done" in cli("logs", name).stdout

    r = cli("run", "-r", name)
    assert r.returncode == 2
    assert f"run {name} completed: only a stopped or failed run can be restarted" in r.stderr
    assert f"launcher run --clone {name}" in r.stderr and "Traceback" not in r.stderr


STOPPED_FOR = 4  # seconds a run sits stopped before `run -r`


def test_a_restarted_run_s_duration_counts_its_attempts_not_the_time_it_sat_stopped(cli):
    name = submitted_name(cli("run", "-f", str(cli.spec("sleeper", SLEEPER))).stdout)
    cli.wait_status(name, {"RUNNING"})
    assert cli("stop", name, "-y").returncode == 0
    cli.wait_status(name, {"STOPPED"})
    time.sleep(STOPPED_FOR)
    assert cli("run", "-r", name).returncode == 0
    cli.wait_status(name, {"RUNNING"})
    assert cli("stop", name, "-y").returncode == 0
    rec = cli.wait_status(name, {"STOPPED"})

    at = datetime.fromisoformat
    first, second = rec["attempts"]
    assert at(second["started_at"]) - at(first["ended_at"]) >= timedelta(seconds=STOPPED_FOR)
    ran = sum((at(a["ended_at"]) - at(a["started_at"]) for a in (first, second)), timedelta())
    minutes, seconds = divmod(int(ran.total_seconds()), 60)
    shown = f"{minutes}:{seconds:02d}"
    assert f"Duration:   {shown}\n" in cli("describe", "run", name).stdout
    row = next(line for line in cli("get", "runs").stdout.splitlines() if line.startswith(name))
    assert re.split(r"\s{2,}", row)[5] == shown, row  # NAME CLUSTER INSTANCE STATUS CREATED DURATION


def test_restart_a_failed_run_and_refuse_a_running_one(cli):
    spec = cli.spec("told", FAIL_FIRST_WHEN_TOLD)
    name = submitted_name(cli("run", "-f", str(spec)).stdout)
    cli.wait_status(name, {"RUNNING"})
    r = cli("run", "-r", name)
    assert r.returncode == 2
    assert f"run {name} is RUNNING: only a stopped or failed run can be restarted" in r.stderr
    (cli.cwd / "go").touch()
    assert cli.wait_status(name, {"FAILED", "COMPLETED"})["status"] == "FAILED"

    r = cli("run", "-r", name)
    assert r.returncode == 0, r.stderr
    rec = cli.wait_status(name, {"COMPLETED", "FAILED"})
    assert [(a["attempt"], a["status"]) for a in rec["attempts"]] == [(1, "FAILED"), (2, "COMPLETED")]


def test_restart_takes_no_overrides(cli):
    r = cli("run", "-r", "hello", "--gpus", "2")
    assert r.returncode == 2 and "-r restarts a run as it was submitted" in r.stderr and "--gpus" in r.stderr


def test_clone_submits_a_copy_with_overrides(cli):
    spec = cli.spec(
        "hello", "name: hello\ncommand: echo lr is $LR\nenv_variables: {LR: '0.1'}\nparameters: {layers: 2}\n"
    )
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stderr
    original = cli.describe()["name"]

    r = cli("run", "--clone", "hello", "--env", "LR=0.5", "--max-duration", "2", "--follow")
    assert r.returncode == 0, r.stderr
    assert "lr is 0.5" in r.stdout
    copy = cli.describe()
    assert copy["name"] != original and copy["name"].startswith("hello-")
    assert copy["spec"]["parameters"] == {"layers": 2} and copy["spec"]["scheduling"]["max_duration"] == 2
    assert cli.describe(original)["spec"]["env_variables"] == {"LR": "0.1"}  # the original is unchanged

    r = cli("run", "--clone", "nosuch")
    assert r.returncode == 2 and "no run named 'nosuch'" in r.stderr


def test_update_reaches_the_running_supervisor(cli):
    spec = cli.spec("told", FAIL_FIRST_WHEN_TOLD)
    name = submitted_name(cli("run", "-f", str(spec)).stdout)
    cli.wait_status(name, {"RUNNING"})

    # max_retries 0 as submitted: raised while attempt 1 runs, its failure is retried.
    r = cli("update", "run", name, "--max-retries", "1")
    assert r.returncode == 0, r.stderr
    assert f"Run {name} updated: max_retries 1." in r.stdout
    assert "Retries:    up to 1" in cli("describe", "run", name).stdout
    (cli.cwd / "go").touch()  # attempt 1 fails now
    rec = cli.wait_status(name, {"COMPLETED", "FAILED"})
    assert [(a["attempt"], a["status"]) for a in rec["attempts"]] == [(1, "FAILED"), (2, "COMPLETED")]

    r = cli("update", name, "--max-retries", "2")
    assert r.returncode == 2 and f"run {name} has ended (COMPLETED): there is nothing to update" in r.stderr


def test_update_max_duration_ends_a_running_run_and_priority_is_refused(cli):
    spec = cli.spec("sleeper", SLEEPER)
    name = submitted_name(cli("run", "-f", str(spec)).stdout)
    try:
        cli.wait_status(name, {"RUNNING"})
        r = cli("update", "run", name, "--priority", "high")
        assert r.returncode == 2
        assert f"cannot change scheduling.priority of run {name}: there are no priorities on this machine" in r.stderr
        assert "priority" not in cli.describe(name)["spec"].get("scheduling", {})

        r = cli("update", "run", name)
        assert r.returncode == 2 and "nothing to update" in r.stderr

        r = cli("update", "run", name, "--max-duration", "0.0003")  # about a second from the start
        assert r.returncode == 0, r.stderr
        rec = cli.wait_status(name, {"FAILED", "COMPLETED", "STOPPED"}, timeout=30)
        assert rec["status"] == "FAILED" and rec["reason"] == "exceeded max_duration of 0.0003h"
    finally:
        cli("stop", name, "-y")


def test_a_restart_counts_its_retries_afresh(cli):
    spec = cli.spec(
        "thrice",
        """\
        name: thrice
        command: if [ "$LAUNCHER_ATTEMPT" -lt 4 ]; then exit 3; fi; echo "attempt $LAUNCHER_ATTEMPT done"
        scheduling: {max_retries: 1, retry_backoff: {first: 0.1s}}
        """,
    )
    assert cli("run", "-f", str(spec), "--follow").returncode == 1  # attempts 1 and 2 fail
    r = cli("run", "-r", "thrice", "--follow")  # attempt 3 fails, and its retry is attempt 4
    assert r.returncode == 0, r.stderr
    assert "attempt 4 done" in r.stdout
    assert [a["status"] for a in cli.describe()["attempts"]] == ["FAILED", "FAILED", "FAILED", "COMPLETED"]
