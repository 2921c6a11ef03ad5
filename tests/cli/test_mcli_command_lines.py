"""mcli 0.8.3's command lines, typed as its users type them (issue 37, "mcli's command
shapes"), through the real CLI on the local backend: each was refused (no such option or
command) before. The shapes are mcli's argparse parsers: mcli/cli/m_get/runs.py,
common/run_filters.py (and utils_cli.date_time_parse), m_interactive, m_connect, m_log,
m_get/m_get.py, m_diff, m_watchdog, m_describe/describe_clusters.py and m_util."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta

import pytest

from launcher.cli.filters import parse_time

from .test_mcli_runs_sdk import names, start


def ok(r) -> str:
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    return r.stdout


def refused(r, *words: str) -> str:
    """A bad input: exit 2, a message with `words`, no traceback."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    for word in words:
        assert word in r.stderr, (word, r.stderr)
    return r.stderr


@pytest.fixture
def sleepers(cli):
    """Runs a test started that may still be going, stopped at its end."""
    started: list[str] = []
    yield started
    if started:
        cli("stop", "run", *started, "-y")


# --- mcli's dates ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("2026-01-13", datetime(2026, 1, 13)),
        ("01-13-2026", datetime(2026, 1, 13)),
        ("2026-01-13 19:20:21", datetime(2026, 1, 13, 19, 20, 21)),
        ("01-13-2026 19:20:21.9", datetime(2026, 1, 13, 19, 20, 21, 900000)),
        ("2026-01-13 19:20:21.5", datetime(2026, 1, 13, 19, 20, 21, 500000)),
        ("01-13-2026 19:20:21", datetime(2026, 1, 13, 19, 20, 21)),
        ("2026-01-13T19:20", datetime(2026, 1, 13, 19, 20)),
        ("12:30:23.4", datetime(2026, 12, 4, 12, 30, 23, 400000)),  # a time alone is today's
        ("12:30:23", datetime(2026, 12, 4, 12, 30, 23)),
    ],
)
def test_mcli_date_formats_mean_what_they_say(typed, meant):
    assert parse_time(typed, today=datetime(2026, 12, 4, 9, 0)) == meant


def test_get_runs_ids_is_a_flag_and_dates_filter(cli):
    first = start(cli, "first", "true", follow=True)
    second = start(cli, "second", "true", follow=True)
    table = ok(cli("get", "runs", "--ids"))
    header = table.splitlines()[0].split()
    assert header[:3] == ["NAME", "ID", "CLUSTER"], table
    assert re.search(rf"^{second}\s+{second}\s+local\s", table, re.M), table
    records = json.loads(ok(cli("get", "runs", "--ids", "-o", "json")))
    assert [r["id"] for r in records] == [second, first]
    # mcli's `--ids` took no value: what follows it is a run, and a comma list is several.
    assert names(cli, "--ids", f"{first},{second}") == [second, first]

    today = datetime.now()
    for after in ("01-13-2020", "2020-01-13", "01-13-2020 19:20:21.9", "2020-01-13 00:00:00"):
        assert names(cli, "--after", after) == [second, first], after
    tomorrow = today + timedelta(days=1)
    assert names(cli, "--before", tomorrow.strftime("%m-%d-%Y")) == [second, first]
    assert names(cli, "--before", "01-13-2020") == []
    assert names(cli, "--after", tomorrow.strftime("%Y-%m-%d %H:%M:%S")) == []
    assert names(cli, "--limit", "none") == [second, first]
    assert names(cli, "--limit", "1") == [second]
    refused(cli("get", "runs", "--before", "13-13-2026"), "'13-13-2026' is not a date or time", "01-13-2026")
    refused(cli("get", "runs", "--limit", "many"), "not a number of runs")


def test_stop_and_delete_run_take_mcli_filters(cli, sleepers):
    done = start(cli, "done", "true", follow=True)
    a = start(cli, "sleepy", "sleep 60")
    b = start(cli, "drowsy", "sleep 60")
    sleepers += [a, b]
    cli.wait_status(a, {"RUNNING"})
    cli.wait_status(b, {"RUNNING"})

    out = ok(cli("stop", "run", "--before", "01-13-2020", "-y"))
    assert "Nothing to stop" in out
    # -c (mcli's -p/--platform too), -t, -n, --after: the runs `get runs` shows with them.
    out = ok(cli("stop", "run", "drowsy", "-p", "local", "-t", "cpu", "-n", "0", "--after", "2020-01-13", "-y"))
    assert out.strip() == f"✔ Run {b} stopped", out
    out = ok(cli("stop", "run", "-s", "running", "-c", "local", "--force"))
    assert out.strip() == f"✔ Run {a} stopped", out
    refused(cli("stop", "run", "-s", "sleeping", "-y"), "'sleeping' is not a status")
    refused(cli("stop", "run", "-n", "eight", "-y"), "'eight' is not a number of GPUs")
    refused(cli("stop", "run"), "name the runs, or choose them with a filter")

    out = ok(cli("delete", "run", "-s", "stopped", "-t", "cpu", "--after", "01-13-2020", "-y"))
    assert set(out.split("\n")[:2]) == {f"✔ Deleted run {a}", f"✔ Deleted run {b}"}, out
    assert names(cli) == [done]
    out = ok(cli("delete", "run", "-n", "8", "-y"))
    assert "Nothing to delete: no run matches." in out
    out = ok(cli("delete", "run", "-l", "-c", "local", "-y"))
    assert out.strip() == f"✔ Deleted run {done}"


def test_get_and_delete_secrets_as_mcli(cli):
    for key in ("HF_ONE=value-one-1234", "HF_TWO=value-two-1234", "OTHER=value-other-12"):
        ok(cli("create", "secret", "env", key))
    assert ok(cli("get", "secrets", "-o", "name", "--type", "all")).split() == ["hf-one", "hf-two", "other"]
    assert ok(cli("get", "secrets", "--type", "environment", "-o", "name")).split() == ["hf-one", "hf-two", "other"]
    table = ok(cli("get", "secrets", "--ids"))
    assert re.search(r"^hf-one\s+hf-one\s+env\s", table, re.M), table
    assert json.loads(ok(cli("get", "secrets", "--ids", "-o", "json")))[0]["id"] == "hf-one"
    assert "value-" not in table

    refused(cli("delete", "secret", "zz-*", "-y"), "no secret in", "matches 'zz-*'")
    out = ok(cli("delete", "secret", "hf-*", "--force"))
    assert out.split("\n")[:2] == ["✔ Deleted secret hf-one", "✔ Deleted secret hf-two"], out
    assert ok(cli("get", "secrets", "-o", "name")).split() == ["other"]


def test_get_and_describe_clusters(cli):
    assert ok(cli("get", "clusters", "-o", "name")).split() == ["local"]
    table = ok(cli("get", "clusters", "--ids"))
    assert re.search(r"^\*\s+local\s+local\s+local\s", table, re.M), table
    out = ok(cli("describe", "cluster"))
    assert out.startswith("Cluster:    local (current)\nBackend:    local\n"), out
    assert re.search(r"^GPUs:\s+\d+ \(\d+ free\)$", out, re.M), out
    record = json.loads(ok(cli("describe", "cluster", "local", "-o", "json")))
    assert record["name"] == "local" and record["reachable"] and record["gpus"]
    refused(cli("describe", "cluster", "nope"), "no cluster profile named 'nope'")


def test_diff_run_shows_the_two_specs(cli):
    first = start(cli, "twin", "echo one", follow=True)
    spec = cli.spec("twin2", "name: twin\ncommand: echo two\nenv_variables: {EXTRA: yes-1}\n")
    ok(cli("run", "-f", str(spec), "--follow"))
    second = cli.describe()["name"]
    out = ok(cli("diff", "run", first, second))
    lines = out.splitlines()
    assert lines[:2] == [f"--- {first}", f"+++ {second}"], out
    assert "-command: echo one" in lines and "+command: echo two" in lines, out
    assert f"-name: {first}" in lines and f"+name: {second}" in lines
    assert any(line.startswith("+") and "EXTRA" in line for line in lines), out
    side = ok(cli("diff", first, second, "-y"))
    assert re.search(r"^command: echo one\s+\| command: echo two$", side, re.M), side
    assert re.search(r"^\s+> env_variables:", side, re.M) or "EXTRA" in side, side
    refused(cli("diff", "run", first, "no-such-run"), "no-such-run")
    refused(cli("diff", "run", first), "Missing argument 'B'")


def test_watchdog_sets_and_unsets_retries(cli, sleepers):
    name = start(cli, "watched", "sleep 60")
    sleepers.append(name)
    cli.wait_status(name, {"RUNNING"})
    out = ok(cli("watchdog", name))
    assert f"Enabled the watchdog for run {name}: a failure will be retried up to 10 times." in out
    assert cli.describe(name)["spec"]["scheduling"]["max_retries"] == 10
    ok(cli("watchdog", "watched", "--max-retries", "3"))
    assert cli.describe(name)["spec"]["scheduling"]["max_retries"] == 3
    out = ok(cli("watchdog", name, "--disable"))
    assert "Disabled the watchdog" in out
    assert cli.describe(name)["spec"]["scheduling"]["max_retries"] == 0
    ok(cli("stop", name, "-y"))
    refused(cli("watchdog", name), "has ended (STOPPED)")
    refused(cli("watchdog"), "Missing argument 'RUN'")


def test_interactive_connect_and_logs_take_mcli_flags(cli, sleepers):
    refused(cli("interactive"), "how long should the run wait")
    refused(cli("interactive", "1", "--hours", "2"), "given twice (HOURS and --hours)")
    refused(cli("interactive", "0"), "HOURS '0' is not a duration")
    refused(cli("interactive", "--hours", "1", "--command", "ls", "--tmux"), "do not go together")
    refused(cli("interactive", "--hours", "1", "--container", "model"), "a rank has one container, main")

    r = cli("interactive", "--hours", "0.05", "--name", "dbg", "--no-connect")
    assert r.returncode == 0, r.stderr
    name = re.search(r"Interactive run (dbg-[a-z0-9]+) submitted; it ends by itself after 0.05h", r.stderr).group(1)
    sleepers.append(name)
    assert f"Run {name} is RUNNING" in r.stderr
    record = cli.describe(name)
    assert record["status"] == "RUNNING"
    assert record["spec"]["scheduling"]["max_duration"] == pytest.approx(0.05)

    out = ok(cli("connect", name, "--command", "echo in-$RUN_NAME", "--container", "MAIN"))
    assert out.strip() == f"in-{name}"
    assert ok(cli("connect", "--latest", "--command", "echo latest-$RUN_NAME")).strip() == f"latest-{name}"
    assert ok(cli("connect", "--command", "echo only-$RUN_NAME")).strip() == f"only-{name}"  # the one running
    r = cli("connect", name, "--command", "exit 7")
    assert r.returncode == 7
    refused(cli("connect", name, "--container", "sidecar"), "a rank has one container, main")
    refused(cli("connect", name, "--latest"), "not both")

    ok(cli("logs", name, "--container", "MAIN"))
    ok(cli("logs", name, "-c", "main"))
    refused(cli("logs", name, "--container", "MODEL"), "one container, MAIN")

    table = ok(cli("util"))
    assert "Active non-preemptible runs:" in table and re.search(rf"^local\s+{name}\s+RUNNING\s", table, re.M)
    assert name not in ok(cli("util", "--hide-users"))
    refused(cli("util", "-i"), "no inference deployments")

    ok(cli("stop", name, "-y"))
    r = cli("connect", "--latest", "--command", "true")
    assert r.returncode == 1 and "no STARTING or RUNNING run" in r.stderr
