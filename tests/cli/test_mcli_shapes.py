"""mcli's command shapes and name forms, and the flags that used to say one thing and
do another. Local runs are few and short: each costs seconds."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.forked_cli import launcher_command

from .test_local_runs import submitted_name

REPO = Path(__file__).resolve().parents[2]


def _run(cli, name: str, command: str, *extra: str) -> str:
    spec = cli.spec(name, f"name: {name}\nimage: python:3.11\ncommand: {json.dumps(command)}\n")
    r = cli("run", "-f", str(spec), *extra)
    assert r.returncode in (0, 1), r.stderr
    return (
        submitted_name(r.stdout + r.stderr)
        if "submitted" in r.stdout + r.stderr
        else re.search(r"Run (\S+) started", r.stderr).group(1)
    )


def test_aliases_and_name_forms(cli):
    first = _run(cli, "Alias_Demo", "echo first", "--follow")
    # `run -o json` without --dry-run prints the submitted run's record.
    spec = cli.spec("again", "name: Alias_Demo\nimage: python:3.11\ncommand: echo second\n")
    r = cli("run", "-f", str(spec), "-o", "json")
    assert r.returncode == 0, r.stderr
    record = json.loads(r.stdout)
    second = record["name"]
    assert set(record) >= {"name", "status", "spec", "attempts", "created_at"}
    assert re.fullmatch(r"alias-demo-[a-z0-9]{6}", second) and second != first
    cli.wait_status(second, {"COMPLETED"})

    # Name forms: full name, spec name (the latest run of it), glob.
    assert json.loads(cli("describe", "run", first, "-o", "json").stdout)["name"] == first
    assert json.loads(cli("describe", "run", "Alias_Demo", "-o", "json").stdout)["name"] == second
    assert json.loads(cli("describe", "alias-demo", "-o", "json").stdout)["name"] == second  # short form
    assert (
        cli("logs", "alias-demo").stdout.splitlines()[-2:-1] == ["second"]
        or "second" in cli("logs", "alias-demo").stdout
    )
    assert "first" in cli("logs", first).stdout
    assert "second" in cli("logs", "alias-demo-*").stdout  # a glob: the latest match
    assert cli("get", "runs", "alias-demo", "-o", "name").stdout.split() == [second, first]
    assert cli("get", "runs", "alias-demo-*", "-o", "name").stdout.split() == [second, first]

    # An unknown name: did-you-mean from the recent runs, exit 2, no traceback.
    r = cli("logs", "alias-dmeo")
    assert r.returncode == 2 and "did you mean 'alias-demo'?" in r.stderr and "Traceback" not in r.stderr

    # Honest flags on a completed one-attempt run.
    r = cli("logs", second, "--failed")
    assert r.returncode == 1 and "has no failed rank (COMPLETED)" in r.stderr and "second" not in r.stdout
    r = cli("logs", second, "--previous")
    assert r.returncode == 1 and "has no previous attempt" in r.stderr and "second" not in r.stdout

    # stop confirms like delete: without a terminal it refuses unless -y.
    sleeper = _run(cli, "sleeper", "sleep 60")
    r = cli("stop", "run", sleeper)
    assert r.returncode == 2 and "pass -y" in r.stderr
    assert json.loads(cli("describe", "run", sleeper, "-o", "json").stdout)["status"] != "STOPPED"
    r = cli("stop", "run", "sleeper", "-y")
    assert r.returncode == 0 and f"Run {sleeper} stopped" in r.stdout
    r = cli("stop", first, "-y")  # the short form
    assert r.returncode == 0 and "Nothing to stop" in r.stdout

    # Shell completion of run names, from the index.
    for words in ("launcher logs alias", "launcher stop alias"):
        env = {**cli.env, "_LAUNCHER_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": "2"}
        done = subprocess.run([sys.executable, "-m", "launcher"], env=env, capture_output=True, text=True, cwd=cli.cwd)
        completed = {line.split(",", 1)[1] for line in done.stdout.splitlines()}
        assert {first, second, "alias-demo"} <= completed, (words, done.stdout + done.stderr)

    r = cli("delete", "run", "alias-demo", "-y")  # the latest of the spec
    assert r.returncode == 0 and f"Deleted run {second}" in r.stdout
    r = cli("delete", "alias-demo-*", "sleeper", "-y")
    assert r.returncode == 0 and f"Deleted run {first}" in r.stdout and f"Deleted run {sleeper}" in r.stdout
    assert cli("get", "runs", "-o", "json").stdout.strip() == "[]"


def test_secret_aliases_listing_and_collisions(cli, tmp_path):
    r = cli("create", "secret", "env", "API_KEY=abc123456")
    assert r.returncode == 0, r.stderr
    r = cli("create", "secret", "databricks", "--host", "https://a.example.com", input="dapi-token-one")
    assert r.returncode == 0, r.stderr
    (tmp_path / "f").write_text("x")
    assert (
        cli("secret", "create", "file", "cfg", "--from", str(tmp_path / "f"), "--mount-path", "/etc/cfg").returncode
        == 0
    )
    assert cli("create", "secret", "hf", input="hf_token_value").returncode == 0
    (tmp_path / "key").write_text(
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
        "-----END OPENSSH PRIVATE KEY-----\n"
    )
    r = cli("create", "secret", "git-ssh", "deploy", "--from", str(tmp_path / "key"))
    assert r.returncode == 0, r.stderr
    listed = {s["name"]: s for s in json.loads(cli("get", "secrets", "-o", "json").stdout)}
    assert listed["api-key"]["exposed_as"] == ["API_KEY"]
    assert listed["databricks"]["exposed_as"] == ["DATABRICKS_HOST", "DATABRICKS_TOKEN"]
    assert listed["hf"]["exposed_as"] == ["HF_TOKEN"]
    assert listed["cfg"]["exposed_as"] == ["SECRET_PATH_CFG", "/etc/cfg/"]
    assert listed["deploy"]["exposed_as"] == ["SECRET_PATH_DEPLOY", "GIT_SSH_COMMAND", "/secrets/deploy/"]
    table = cli("secret", "list").stdout
    assert re.search(r"^databricks\s+databricks\s+DATABRICKS_HOST, DATABRICKS_TOKEN\s", table, re.M), table
    assert re.search(r"^hf\s+hf\s+HF_TOKEN\s", table, re.M), table

    # Two databricks secrets would both set DATABRICKS_*: an error at submit naming both.
    r = cli("create", "secret", "databricks", "prod", "--host", "https://b.example.com", input="dapi-token-two")
    assert r.returncode == 0, r.stderr
    spec = cli.spec("s", "name: s\nimage: python:3.11\ncommand: env\n")
    r = cli("run", "-f", str(spec), "--dry-run")
    assert r.returncode == 2
    assert "secrets 'databricks' and 'prod' both set the env var DATABRICKS_HOST" in r.stderr
    assert "dapi-token" not in r.stdout + r.stderr
    spec = cli.spec("s2", "name: s\nimage: python:3.11\ncommand: env\nsecrets: [prod, hf, deploy]\n")
    assert cli("run", "-f", str(spec), "--dry-run").returncode == 0

    r = cli("delete", "secret", "prod", "databricks", "-y")
    assert r.returncode == 0 and "Deleted secret prod" in r.stdout
    assert {s["name"] for s in json.loads(cli("get", "secrets", "-o", "json").stdout)} == {
        "api-key",
        "cfg",
        "hf",
        "deploy",
    }


def test_validate_checks_what_run_checks(cli):
    spec = cli.spec("v", "name: My_Run\nimage: python:3.11\ncommand: echo hi\ncompute:\n  gpus: 8\n")
    r = cli("validate", "-f", str(spec), "--gpu-type", "a100")
    assert r.returncode == 2 and "unknown gpu_type 'a100'" in r.stderr and "did you mean 'a100_80gb'?" in r.stderr
    r = cli("validate", "-f", str(spec), "--gpus", "10", "--nodes", "3")
    assert r.returncode == 2 and "10 GPUs do not split evenly over 3 nodes" in r.stderr
    r = cli("validate", "-f", str(spec), "--gpus", "10", "--nodes", "3", "--gpu-type", "h100_80gb")
    assert r.returncode == 2 and "do not fit 3 nodes" in r.stderr
    r = cli("validate", "-f", str(spec), "--gpu-type", "h100_80gb", "--gpus", "16")
    assert r.returncode == 0, r.stderr
    assert "'My_Run' becomes 'my-run'" in r.stderr
    assert re.search(r"^name: my-run-[a-z0-9]{6}$", r.stdout, re.M), r.stdout


def _examples(help_text: str) -> list[str]:
    lines, inside = [], False
    for line in help_text.splitlines():
        if line.strip() == "Examples:":
            inside = True
            continue
        if inside and line.strip().startswith("launcher "):
            lines.append(line.split("  #")[0].strip())
        elif inside and line.strip() and not line.startswith("    "):
            inside = False
    return lines


def test_help_examples_work(cli):
    """Every example in --help runs as written (from the repository root, where runspecs/ is)."""
    commands = [
        ["run"],
        ["validate"],
        ["get", "runs"],
        ["logs"],
        ["describe", "run"],
        ["stop", "run"],
        ["delete", "run"],
        ["completion"],
    ]
    examples = []
    for words in commands:
        r = cli(*words, "--help")
        assert r.returncode == 0, r.stderr
        examples += _examples(r.stdout)
    assert len(examples) >= 10, examples
    for example in examples:
        argv = shlex.split(example)[1:]
        if argv[:1] == ["completion"] and ">" in argv:
            argv = argv[: argv.index(">")]
        done = subprocess.run(
            [*launcher_command(cli.env), *argv],
            cwd=REPO,
            env=cli.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, (example, done.stdout[-500:], done.stderr[-1000:])


def test_version_and_completion_scripts(cli):
    from importlib.metadata import version

    r = cli("version")
    assert r.returncode == 0 and r.stdout.strip() == f"launcher {version('launcher')}"
    for shell in ("bash", "zsh", "fish"):
        r = cli("completion", shell)
        assert r.returncode == 0 and "_LAUNCHER_COMPLETE" in r.stdout, (shell, r.stderr)
    assert cli("completion", "tcsh").returncode == 2
