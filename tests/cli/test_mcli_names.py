"""mcli users' names for runs and commands (issue 22, part N): a unique prefix of a run
name, an ambiguous one, the aliases g, r, log and del, and `describe run --no-yaml`;
on the local backend, as a user types them."""

from __future__ import annotations

import json
import re

from tests.cli.conftest import CLI


def finished_run(cli: CLI, spec_name: str, command: str = "echo hello from $RUN_NAME") -> str:
    """The name of a run of a spec called `spec_name`, once it has completed."""
    spec = cli.spec(spec_name, f"name: {spec_name}\ncommand: {json.dumps(command)}\n")
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stderr
    return re.search(rf"hello from ({spec_name}-\S+)", r.stdout).group(1)


def test_a_unique_prefix_of_a_run_name_resolves_in_every_command(cli):
    two = finished_run(cli, "two-words")
    three = finished_run(cli, "three")
    prefix = two[: len("two-words-") + 2]  # more than the spec name, less than the run name

    assert cli.describe(prefix)["name"] == two
    assert cli.describe("thr")["name"] == three
    assert cli.describe(prefix.upper())["name"] == two  # as spec names, in either case
    logs = cli("logs", "thr")
    assert logs.returncode == 0 and f"hello from {three}" in logs.stdout, logs.stderr
    assert cli("stop", "two-w", "-y").returncode == 0  # an ended run: nothing to stop
    metrics = cli("metrics", "thr")  # resolved: the run it names has none
    assert f"run {three} ended (COMPLETED) without any metrics" in metrics.stderr, metrics.stderr

    sleeper = cli.spec("sleeper", "name: sleeper\ncommand: sleep 60\n")
    r = cli("run", "-f", str(sleeper))
    assert r.returncode == 0, r.stderr
    cli.wait_status("sle", {"RUNNING"})
    stopped = cli("stop", "sle", "-y")
    assert stopped.returncode == 0 and "stopped" in stopped.stdout, stopped.stderr
    assert cli.describe("sle")["status"] == "STOPPED"

    deleted = cli("delete", "thr", "-y")
    assert deleted.returncode == 0 and f"Deleted run {three}" in deleted.stdout, deleted.stderr
    assert cli("describe", "thr").returncode == 2


def test_an_ambiguous_prefix_lists_its_matches_and_exits_2(cli):
    first = finished_run(cli, "two-words")
    second = finished_run(cli, "two-words")
    other = finished_run(cli, "twofold")

    for command in (["describe", "tw"], ["logs", "tw"], ["stop", "tw", "-y"], ["delete", "run", "tw", "-y"]):
        r = cli(*command)
        assert r.returncode == 2, (command, r.stdout, r.stderr)
        assert "'tw' is the start of 3 run names" in r.stderr, r.stderr
        assert first in r.stderr and second in r.stderr and other in r.stderr
        assert "Traceback" not in r.stderr
    # Runs of one spec only: the hint names the spec name, which means its latest run.
    r = cli("describe", "two-w")
    assert r.returncode == 2 and "the spec name 'two-words' for its latest run" in r.stderr, r.stderr

    # Exact names, spec names and globs mean what they meant.
    assert cli.describe(first)["name"] == first
    assert cli.describe("two-words")["name"] == second
    assert cli.describe("twof")["name"] == other
    listed = cli("get", "runs", "two-words-*", "-o", "name")
    assert listed.stdout.split() == [second, first]
    assert cli("get", "runs", "tw", "-o", "name").stdout == ""  # a listing filters; it does not resolve


def test_mcli_aliases_are_the_commands(cli):
    assert re.search(r"^\s+get \(g\)\s", cli("--help").stdout, re.M)
    spec = cli.spec("aliased", "name: aliased\ncommand: echo via the r alias\n")
    r = cli("r", "-f", str(spec), "--follow")
    assert r.returncode == 0 and "via the r alias" in r.stdout, r.stderr
    name = cli.describe()["name"]

    assert cli("g", "runs", "-o", "name").stdout == cli("get", "runs", "-o", "name").stdout == f"{name}\n"
    log = cli("log", name)
    assert log.returncode == 0 and log.stdout == cli("logs", name).stdout and "via the r alias" in log.stdout
    assert "Usage: launcher get runs" in cli("g", "runs", "--help").stdout  # the command's own name

    deleted = cli("del", name, "-y")
    assert deleted.returncode == 0 and f"Deleted run {name}" in deleted.stdout, deleted.stderr
    assert cli("get", "runs", "-o", "name").stdout == ""


def test_describe_no_yaml_leaves_the_submitted_spec_out(cli):
    name = finished_run(cli, "described")
    full = cli("describe", "run", name)
    short = cli("describe", "run", name, "--no-yaml")
    assert short.returncode == 0, short.stderr
    assert "Submitted spec:" in full.stdout and "Submitted spec:" not in short.stdout
    assert "hello from" not in short.stdout and "hello from" in full.stdout
    assert short.stdout == full.stdout.split("\nSubmitted spec:")[0]
    record = json.loads(cli("describe", "run", name, "--no-yaml", "-o", "json").stdout)
    assert record["name"] == name and "spec" not in record

    both = cli("describe", "run", name, "--no-yaml", "--yaml-only")
    assert both.returncode == 2 and "pass one of them" in both.stderr


def test_a_prefix_of_a_run_this_machine_did_not_submit_resolves_from_the_listing(cli, fake_kube):
    """Runs another machine submitted are in no index here: the clusters' listings name them."""
    from tests.kubernetes.conftest import make_backend
    from tests.kubernetes.test_backend import run_spec

    backend = make_backend()
    try:
        backend.submit(run_spec("elsewhere-abc123", "echo submitted elsewhere"), [])
        backend.submit(run_spec("elsewise-def456", "echo submitted elsewhere"), [])
    finally:
        backend.close()
    assert cli.describe("elsewhere-a")["name"] == "elsewhere-abc123"
    assert cli.describe("elsewhere")["name"] == "elsewhere-abc123"  # its spec name, as for runs from here
    r = cli("describe", "else")
    assert r.returncode == 2 and "'else' is the start of 2 run names: " in r.stderr, r.stderr
    assert "elsewhere-abc123" in r.stderr and "elsewise-def456" in r.stderr
    missing = cli("describe", "elsewhera")
    assert missing.returncode == 2 and "did you mean 'elsewhere'?" in missing.stderr, missing.stderr
