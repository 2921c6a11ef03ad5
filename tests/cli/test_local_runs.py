"""The CLI end to end on the local backend, as a user drives it."""

from __future__ import annotations

import json
import os
import re
import signal
import time

import pytest

from tests.conftest import wait_until

SECRET = "pl4nted-s3cret-Value-7781"


def submitted_name(out: str) -> str:
    m = re.search(r"Run (\S+) submitted", out)
    assert m, out
    return m.group(1)


def test_follow_masks_secrets_and_exits_with_the_outcome(cli):
    r = cli("secret", "create", "env", "API_TOKEN", input=SECRET)
    assert r.returncode == 0, r.stderr
    spec = cli.spec(
        "fail",
        """\
        name: secret-then-fail
        image: python:3.11
        command: |
          echo "the token is $API_TOKEN"
          echo "line two"
          exit 3
        """,
    )
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 1, r.stderr
    assert "the token is ****" in r.stdout
    assert SECRET not in r.stdout + r.stderr
    assert "failed: rank 0 exited with code 3" in r.stderr
    assert "RUNNING" in r.stderr or "PENDING" in r.stderr  # the status changes were shown

    described = json.loads(cli("describe", "run", "-o", "json").stdout)  # latest run
    assert described["status"] == "FAILED"
    assert described["attempts"][0]["ranks"][0]["exit_code"] == 3
    text = cli("describe", "run").stdout
    assert re.search(r"^\s+0\s+localhost\s+FAILED\s+3\b", text, re.M), text

    tail = cli("logs", "--tail", "2")
    assert tail.returncode == 0
    assert tail.stdout.splitlines() == ["line two", tail.stdout.splitlines()[1]]
    assert re.search(r"exit(ed with)? code 3", tail.stdout.splitlines()[1])


def test_completed_run_exits_zero_and_shows_parameters(cli):
    spec = cli.spec(
        "ok",
        """\
        name: params
        command: cat "$PARAMETERS"; echo "run=$RUN_NAME"
        parameters: {lr: 0.5, _hidden: 1}
        """,
    )
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stderr
    assert "lr: 0.5" in r.stdout and "_hidden" not in r.stdout
    name = re.search(r"run=(\S+)", r.stdout).group(1)
    assert name.startswith("params-") and len(name) == len("params-") + 6


# The entrypoint is the command's parent: its memory map shows whether it loaded the spec
# models (pydantic_core's extension) or PyYAML's.
LOADED_BY_THE_ENTRYPOINT = (
    'for lib in pydantic_core _yaml; do if grep -q "$lib" /proc/$PPID/maps; then '
    'echo "entrypoint loaded $lib"; fi; done; echo checked'
)


@pytest.mark.parametrize("mounts", ["auto", "rewrite"])
def test_a_local_rank_runs_the_stdlib_entrypoint_from_the_plan(cli, mounts):
    """As a pod's does: the backend writes the plan, and the entrypoint reads it with the
    standard library alone (in rewrite mode, a copy with the paths rewritten)."""
    spec = cli.spec(
        "plan", f"name: planned\ncommand: {json.dumps(LOADED_BY_THE_ENTRYPOINT)}\nparameters: {{lr: 0.5}}\n"
    )
    cli.env["LAUNCHER_LOCAL_MOUNTS"] = mounts
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stderr
    assert "checked" in r.stdout and "entrypoint loaded" not in r.stdout
    plan = "plan.ranks.json" if "no private mount namespace here" in r.stdout else "plan.json"
    assert re.search(rf"\[launcher\] run planned-\w+: plan \S+/runs/planned-\w+/{plan},", r.stdout), r.stdout


def test_stop_ends_a_long_run_quickly_and_delete_removes_it(cli):
    spec = cli.spec("sleep", "name: sleeper\ncommand: sleep 600\n")
    r = cli("run", "-f", str(spec))
    assert r.returncode == 0, r.stderr
    name = submitted_name(r.stdout)
    cli.wait_status(name, {"RUNNING"})
    start = time.monotonic()
    r = cli("stop", name, "-y")
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - start < 10
    rec = json.loads(cli("describe", "run", name, "-o", "json").stdout)
    assert rec["status"] == "STOPPED"
    # The sleep is gone: no process still runs the command.
    assert not [p for p in os.popen("ps -eo args").read().splitlines() if p.startswith("sleep 600")]

    r = cli("delete", name, "-y")
    assert r.returncode == 0, r.stderr
    assert not (cli.home / "runs" / name).exists()
    r = cli("describe", "run", name)
    assert r.returncode == 2 and f"no run named '{name}'" in r.stderr


def test_two_concurrent_submissions_both_complete(cli):
    spec = cli.spec("pair", "name: pair\ncommand: sleep 1; echo done-$RUN_NAME\n")
    procs = [cli.popen("run", "-f", str(spec), "--follow") for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    names = {re.search(r"done-(\S+)", o[0]).group(1) for o in outs}
    assert len(names) == 2


def test_killing_the_cli_while_following_leaves_the_run_to_finish(cli):
    spec = cli.spec("survive", "name: survivor\ncommand: sleep 2; echo finished\n")
    p = cli.popen("run", "-f", str(spec), "--follow")
    runs = wait_until(
        lambda: json.loads(cli("get", "runs", "-o", "json").stdout),
        30,
        interval=0.1,
        message="the followed run to be submitted",
    )
    p.send_signal(signal.SIGKILL)
    p.wait()
    rec = cli.wait_status(runs[0]["name"], {"COMPLETED", "FAILED"})
    assert rec["status"] == "COMPLETED"
    assert "finished" in cli("logs", runs[0]["name"]).stdout


def test_ctrl_c_while_following_says_the_run_keeps_going(cli):
    spec = cli.spec("ctrlc", "name: ctrlc\ncommand: sleep 3; echo still-here\n")
    p = cli.popen("run", "-f", str(spec), "--follow")
    wait_until(
        lambda: [r for r in json.loads(cli("get", "runs", "-o", "json").stdout) if r["status"] == "RUNNING"],
        30,
        interval=0.1,
        message="the followed run to be RUNNING",
    )
    p.send_signal(signal.SIGINT)
    _out, err = p.communicate(timeout=30)
    assert "keeps running" in err
    name = json.loads(cli("get", "runs", "-o", "json").stdout)[0]["name"]
    assert cli.wait_status(name, {"COMPLETED", "FAILED"})["status"] == "COMPLETED"


def test_a_run_whose_supervisor_died_is_reconciled_to_failed(cli):
    import sqlite3

    spec = cli.spec("orphan", "name: orphan\ncommand: sleep 600\n")
    name = submitted_name(cli("run", "-f", str(spec)).stdout)
    cli.wait_status(name, {"RUNNING"})
    db = sqlite3.connect(cli.home / "state.db")
    pid = db.execute("SELECT supervisor_pid FROM runs WHERE name = ?", (name,)).fetchone()[0]
    db.close()
    os.kill(pid, signal.SIGKILL)
    rec = cli.wait_status(name, {"FAILED", "COMPLETED"}, timeout=10)
    assert rec["status"] == "FAILED"
    assert "supervisor process died" in rec["reason"]
    assert not [p for p in os.popen("ps -eo args").read().splitlines() if p.startswith("sleep 600")]


def test_retries_restart_the_group_and_attempts_are_visible(cli):
    spec = cli.spec(
        "retry",
        """\
        name: flaky
        command: |
          if [ ! -e marker ]; then touch marker; echo first; exit 7; fi
          echo second
        scheduling: {max_retries: 1, retry_backoff: {first: 0.1s}}
        """,
    )
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "first" in r.stdout and "second" in r.stdout
    assert "attempt 2" in r.stderr
    rec = json.loads(cli("describe", "run", "-o", "json").stdout)
    assert [a["status"] for a in rec["attempts"]] == ["FAILED", "COMPLETED"]
    assert rec["attempts"][0]["reason"] == "rank 0 exited with code 7"
    assert cli("logs", "--attempt", "1").stdout.count("first") == 1
    assert "second" not in cli("logs", "--attempt", "1").stdout


def test_retry_on_system_failure_leaves_a_user_failure_counted(cli):
    spec = cli.spec(
        "system",
        """\
        name: system-retries
        command: echo attempt $LAUNCHER_ATTEMPT; exit 3
        scheduling: {max_retries: 1, retry_on_system_failure: true, retry_backoff: {first: 0.1s}}
        """,
    )
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 1, r.stdout + r.stderr
    # Honoured (failures are classified: docs/resilience.md), so nothing is named as ignored;
    # a plain non-zero exit is the program's own failure and max_retries still holds.
    assert "retry_on_system_failure" not in r.stderr
    assert r.stdout.count("attempt 1") == 1 and r.stdout.count("attempt 2") == 1 and "attempt 3" not in r.stdout
    rec = json.loads(cli("describe", "run", "-o", "json").stdout)
    assert [a["status"] for a in rec["attempts"]] == ["FAILED", "FAILED"]
    assert [a["failure"]["class"] for a in rec["attempts"]] == ["user", "user"]


def test_two_nodes_get_the_rank_environment(cli):
    spec = cli.spec(
        "multi",
        """\
        name: two-nodes
        compute: {nodes: 2}
        command: |
          echo "rank=$NODE_RANK world=$WORLD_SIZE addr=$MASTER_ADDR nnodes=$PET_NNODES"
        """,
    )
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stderr
    assert "[rank 0] rank=0 world=2 addr=127.0.0.1 nnodes=2" in r.stdout
    assert "[rank 1] rank=1 world=2 addr=127.0.0.1 nnodes=2" in r.stdout
    assert cli("logs", "--rank", "1").stdout.count("rank=1 ") == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "-f", "missing.yaml"], "missing.yaml: no such file"),
        (["run", "-f", "bad.yaml"], "bad.yaml:2:17: compute.gpus: must be zero or more, got -4"),
        (["logs", "nope-123456"], "no run named 'nope-123456'"),
        (["get", "runs", "--status", "DONE"], "'DONE' is not a status"),
        (["run", "-f", "ok.yaml", "--set", "nonsense"], "--set takes path.to.field=VALUE"),
        (["run", "-f", "ok.yaml", "--cluster", "nowhere"], "no cluster profile named 'nowhere'"),
        (["run", "-f", "secretive.yaml"], "secrets: no secret named 'absent'"),
    ],
)
def test_bad_input_exits_2_without_traceback(cli, args, message):
    cli.spec("bad", "name: a\ncompute: {gpus: -4}\ncommand: x\n")
    cli.spec("ok", "name: a\ncommand: x\n")
    cli.spec("secretive", "name: a\ncommand: x\nsecrets: [absent]\n")
    r = cli(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr
    assert "Traceback" not in r.stderr


def test_leak_sweep_finds_the_secret_only_in_the_store(cli, tmp_path):
    outputs = []

    def run(*args, shows: str, **kw):
        """A command that must succeed and print `shows`: a command that failed early would
        show no secret and prove nothing."""
        r = cli(*args, **kw)
        assert r.returncode == 0, (args, r.stdout, r.stderr)
        assert shows in r.stdout, (args, r.stdout)
        outputs.append(r.stdout + r.stderr)
        return r

    keyfile = tmp_path / "key.pem"
    keyfile.write_text(f"-----BEGIN KEY-----\n{SECRET}-file\n-----END KEY-----\n")
    run("secret", "create", "env", "DB_PASSWORD", input=SECRET, shows="Created env secret db-password")
    run(
        "secret",
        "create",
        "file",
        "pem",
        "--from",
        str(keyfile),
        "--mount-path",
        "/etc/pem",
        shows="Created file secret pem",
    )
    spec = cli.spec(
        "leak",
        """\
        name: leaky
        command: |
          echo "$DB_PASSWORD"
          cat "$SECRET_PATH_PEM"
          env | grep DB_PASSWORD
          echo "$DB_PASSWORD" >&2
        """,
    )
    run("run", "-f", str(spec), "--follow", "--dry-run", shows="DB_PASSWORD: <from secret db-password>")
    run("run", "-f", str(spec), "--follow", shows="DB_PASSWORD=****")
    run("get", "runs", "-o", "yaml", shows="status: COMPLETED")
    run("describe", "run", shows='echo "$DB_PASSWORD" >&2')
    run("logs", shows="DB_PASSWORD=****")
    run("secret", "list", shows="SECRET_PATH_PEM, /etc/pem/")
    run("get", "secrets", "-o", "json", shows='"env_key": "DB_PASSWORD"')
    assert len(outputs) == 9
    for out in outputs:
        assert SECRET not in out
    hits = []
    for root, _dirs, files in os.walk(cli.home):
        for f in files:
            path = os.path.join(root, f)
            with open(path, "rb") as fh:
                if SECRET.encode() in fh.read():
                    hits.append(os.path.relpath(path, cli.home))
    assert hits == ["secrets/secrets.json"]
    assert oct(os.stat(cli.home / "secrets" / "secrets.json").st_mode & 0o777) == "0o600"


def test_runs_that_clone_code_each_get_a_fresh_working_directory(cli, tmp_path):
    import subprocess

    repo = tmp_path / "tinyrepo"
    repo.mkdir()
    (repo / "hello.txt").write_text("from the repo\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    spec = cli.spec(
        "clone",
        f"""\
        name: cloner
        integrations:
          - integration_type: git_repo
            git_repo: {repo}
        command: cat tinyrepo/hello.txt; pwd
        """,
    )
    outs = [cli("run", "-f", str(spec), "--follow") for _ in range(2)]
    assert [r.returncode for r in outs] == [0, 0], [r.stdout + r.stderr for r in outs]
    dirs = set()
    for r in outs:
        assert "from the repo" in r.stdout
        dirs.add(r.stdout.strip().splitlines()[-2])
    assert len(dirs) == 2 and all(str(cli.home) in d for d in dirs)
    assert not (cli.cwd / "tinyrepo").exists()


def test_follow_turns_metric_records_into_progress_lines(cli):
    spec = cli.spec(
        "progress",
        """\
        name: progress
        command: |
          echo '@@launcher.metrics {"step":0,"time":1.0,"rank":0,"event":"fit_start","max_duration":"3ba","max_batches":3}'
          for s in 1 2 3; do
            echo "@@launcher.metrics {\\"step\\":$s,\\"time\\":$s.5,\\"rank\\":0,\\"metrics\\":{\\"loss/train/total\\":$((4 - s)).5}}"
          done
          echo plain output
        """,
    )
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stderr
    assert "@@launcher.metrics" not in r.stdout
    assert "plain output" in r.stdout
    progress = [line for line in r.stdout.splitlines() if line.startswith("[progress] ")]
    assert progress[0].startswith("[progress] step 1/3 · loss 3.5")
    assert progress[-1].startswith("[progress] step 3/3 · loss 1.5")
    # The records stay in the run's log for `launcher metrics` (and `logs --raw`).
    assert cli("logs", "--raw").stdout.count("@@launcher.metrics") == 4


def test_get_runs_filters_by_status_name_and_time(cli):
    from datetime import datetime, timedelta

    ok = cli.spec("ok", "name: good\ncommand: 'true'\n")
    bad = cli.spec("bad", "name: bad\ncommand: exit 1\n")
    assert cli("run", "-f", str(ok), "--follow").returncode == 0
    # Times on the command line are whole seconds: take the first one after good was created.
    [good] = json.loads(cli("get", "runs", "-o", "json").stdout)
    created = datetime.fromisoformat(good["created_at"]).astimezone().replace(tzinfo=None)
    between = wait_until(
        lambda: (now := datetime.now().replace(microsecond=0)) > created and now,
        5,
        message=f"the first whole second after {created}",
    )
    assert cli("run", "-f", str(bad), "--follow").returncode == 1

    def names(*args):
        r = cli("get", "runs", "-o", "name", *args)
        assert r.returncode == 0, r.stderr
        return [n.rsplit("-", 1)[0] for n in r.stdout.split()]

    assert names() == ["bad", "good"]
    assert names("--status", "failed") == ["bad"]
    assert names("good-*") == ["good"]
    stamp = between.strftime("%Y-%m-%dT%H:%M:%S")
    assert names("--after", stamp) == ["bad"]
    assert names("--before", stamp) == ["good"]
    assert names("--before", (between - timedelta(days=1)).strftime("%Y-%m-%d")) == []


def test_kubernetes_dry_run_works_before_any_cluster_is_configured(cli):
    import yaml

    assert cli("secret", "create", "env", "WANDB_API_KEY", input=SECRET).returncode == 0
    spec = cli.spec(
        "gpu",
        "name: big\nimage: ghcr.io/x/trainer:1\ncompute: {gpus: 16, gpu_type: h100_80gb}\ncommand: composer train.py\n",
    )
    r = cli("run", "-f", str(spec), "--backend", "kubernetes", "--dry-run", "-o", "yaml")
    assert r.returncode == 0, r.stderr
    assert "no Kubernetes cluster profile yet" in r.stderr
    assert SECRET not in r.stdout
    items = yaml.safe_load(r.stdout)["items"]
    assert [m["kind"] for m in items] == ["ConfigMap", "JobSet"]  # the shipped defaults: JobSet, zipapp mode
    job = items[1]["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert job["completions"] == 2 and job["completionMode"] == "Indexed"
    assert "initContainers" not in job["template"]["spec"] and "entrypoint.pyz" in items[0]["binaryData"]
    env = {e["name"]: e for e in job["template"]["spec"]["containers"][0]["env"]}
    assert env["WANDB_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "wandb-api-key"
    runs = cli.home / "runs"
    assert not runs.exists() or not any(runs.iterdir())  # nothing was started
