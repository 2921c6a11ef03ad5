"""mcli 0.8.3's run-listing flags and stop/delete selections (issue 22, part S), through
the real CLI on the local backend: `get runs -c -s -t -n -l --ids --limit`, and
`stop run` / `delete run` with -a/--all and -l/--latest, whose confirmation counts the
runs it will touch. Each of these failed on main (no such option)."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys

import pytest


def submitted_name(out: str) -> str:
    m = re.search(r"Run (\S+) submitted", out)
    assert m, out
    return m.group(1)


def start(cli, name: str, command: str, *, follow: bool = False) -> str:
    spec = cli.spec(name, f"name: {name}\ncommand: {command!r}\n")
    r = cli("run", "-f", str(spec), *(["--follow"] if follow else []))
    assert r.returncode in (0, 1), r.stderr
    if follow:
        return cli.describe()["name"]
    return submitted_name(r.stdout + r.stderr)


def names(cli, *args: str) -> list[str]:
    r = cli("get", "runs", *args, "-o", "name")
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


@pytest.fixture
def three(cli):
    """alpha COMPLETED, beta FAILED, gamma RUNNING (newest first: gamma, beta, alpha)."""
    alpha = start(cli, "alpha", "echo ok", follow=True)
    beta = start(cli, "beta", "exit 3", follow=True)
    gamma = start(cli, "gamma", "sleep 120")
    cli.wait_status(gamma, {"RUNNING"})
    yield alpha, beta, gamma
    cli("delete", "run", "--all", "-y")


def test_get_runs_takes_mcli_filters(cli, three):
    alpha, beta, gamma = three
    assert names(cli) == [gamma, beta, alpha]
    assert names(cli, "-s", "completed,failed") == [beta, alpha]
    assert names(cli, "--status", "running", "-s", "FAILED") == [gamma, beta]
    assert names(cli, "-c", "local") == [gamma, beta, alpha]
    assert names(cli, "-t", "none") == [gamma, beta, alpha] and names(cli, "--gpu-type", "a100_80gb") == []
    assert names(cli, "-n", "0") == [gamma, beta, alpha] and names(cli, "--gpu-num", "1,8") == []
    assert names(cli, "-l") == [gamma] and names(cli, "-s", "completed", "--latest") == [alpha]
    assert names(cli, "--ids", f"{alpha},{beta}") == [beta, alpha]
    assert names(cli, "--limit", "2") == [gamma, beta]
    bad = cli("get", "runs", "-n", "eight")
    assert bad.returncode == 2 and "'eight' is not a number of GPUs" in bad.stderr
    bad = cli("get", "runs", "-s", "done")
    assert bad.returncode == 2 and "'done' is not a status" in bad.stderr and "Traceback" not in bad.stderr


def answer(cli, answer: str, *args: str) -> subprocess.CompletedProcess:
    """Run the CLI with a terminal on stdin that answers the confirmation."""
    master, slave = pty.openpty()
    p = subprocess.Popen(
        [sys.executable, "-m", "launcher", *args],
        cwd=cli.cwd,
        env=cli.env,
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(slave)
    try:
        os.write(master, answer.encode() + b"\n")
        out, err = p.communicate(timeout=120)
    finally:
        os.close(master)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def test_stop_run_all_and_latest_count_what_they_stop(cli):
    one = start(cli, "one", "sleep 120")
    two = start(cli, "two", "sleep 120")
    done = start(cli, "done", "true", follow=True)
    for name in (one, two):
        cli.wait_status(name, {"RUNNING"})
    refused = answer(cli, "n", "stop", "run", "--all")
    assert refused.returncode == 0, refused.stderr
    assert f"Stop 2 runs ({two}, {one})?" in refused.stdout and "Nothing stopped" in refused.stdout
    assert cli.describe(one)["status"] == "RUNNING"
    # --latest is the latest run, as in mcli: `done`, which has ended.
    nothing = "Nothing to stop: the matching runs have already ended."
    assert cli("stop", "run", "--latest", "-y").stdout.strip() == nothing
    r = cli("stop", "run", "one", "two", "--latest", "-y")  # the latest of the runs named
    assert r.returncode == 0 and r.stdout.strip() == f"✔ Run {two} stopped", r.stdout + r.stderr
    r = cli("stop", "-a", "-y")
    assert r.returncode == 0 and r.stdout.strip() == f"✔ Run {one} stopped", r.stdout + r.stderr
    assert cli("stop", "run", "-a", "-y").stdout.strip() == nothing
    assert cli.describe(done)["status"] == "COMPLETED"
    cli("delete", "run", "--all", "-y")


def test_delete_run_latest_and_all(cli):
    first = start(cli, "first", "true", follow=True)
    second = start(cli, "second", "true", follow=True)
    bare = cli("delete", "run")
    assert bare.returncode == 2 and "name the runs, or choose them with a filter (-c, -s, -t, -n" in bare.stderr
    assert "every run with --all or the latest with --latest" in bare.stderr
    refused = answer(cli, "n", "delete", "run", "-l")
    assert f"Delete 1 run ({second})?" in refused.stdout and "Nothing deleted" in refused.stdout
    r = cli("delete", "run", "--latest", "-y")
    assert r.returncode == 0 and r.stdout.strip() == f"✔ Deleted run {second}", r.stdout + r.stderr
    assert names(cli) == [first]
    third = start(cli, "third", "true", follow=True)
    r = cli("delete", "-a", "-y")
    assert r.returncode == 0 and r.stdout.split("\n")[:2] == [f"✔ Deleted run {third}", f"✔ Deleted run {first}"]
    assert names(cli) == []
    assert cli("delete", "run", "--all", "-y").stdout.strip() == "Nothing to delete: there are no runs."
