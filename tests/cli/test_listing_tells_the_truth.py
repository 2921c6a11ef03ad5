"""Listing tells the truth: a cluster that cannot be reached is an error when it was the
only one asked (never an empty listing), a warning when another answered; `get clusters`
lists the profiles and an unknown noun is a usage error; a typo keeps its did-you-mean
while a profile is down."""

from __future__ import annotations

import json

import pytest

from launcher.config import load_config
from launcher.errors import LauncherError
from launcher.sdk.fanout import list_runs
from tests.fakes.kube.faults import unreachable_server
from tests.kubernetes.test_api_faults import add_profile

REFUSED = "cannot reach the API server: connection refused"


@pytest.fixture
def dead(launcher_home):
    """A cluster profile `dead` whose kubeconfig points at a closed port of 127.0.0.1."""
    with unreachable_server("refused") as url:
        add_profile(launcher_home, "dead", url)
        yield url


def local_run(cli, name: str = "hello") -> str:
    spec = cli.spec(
        name,
        f"""
        name: {name}
        image: none
        command: "true"
    """,
    )
    r = cli("run", "-f", str(spec), "--backend", "local", "--follow")
    assert r.returncode == 0, r.stderr
    [run] = cli("get", "runs", "-o", "name", "--cluster", "local").stdout.split()
    return run


@pytest.mark.parametrize("output", ["table", "json", "name"])
def test_get_runs_cluster_dead_exits_1(cli, dead, output):
    r = cli("get", "runs", "--cluster", "dead", "-o", output)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stdout == ""  # not `[]`, not "No runs found.": nothing was listed
    assert r.stderr.startswith(f"✗ cluster dead: {REFUSED} ({dead})"), r.stderr
    assert "Traceback" not in r.stderr


def test_get_runs_lists_what_answered_and_warns_of_the_rest(cli, dead):
    run = local_run(cli)
    r = cli("get", "runs", "-o", "json")
    assert r.returncode == 0, r.stderr
    assert [rec["name"] for rec in json.loads(r.stdout)] == [run]
    assert [ln for ln in r.stderr.splitlines() if ln.startswith("!")] == [f"! cluster dead: {REFUSED} ({dead})"]


def test_a_listing_of_profiles_that_all_failed_is_an_error_naming_each(launcher_home):
    with unreachable_server("refused") as one, unreachable_server("refused") as two:
        add_profile(launcher_home, "one", one)
        add_profile(launcher_home, "two", two)
        config = load_config()
        with pytest.raises(LauncherError) as failed:
            list_runs([config.profile("one"), config.profile("two")])
        assert failed.value.message == "none of the 2 cluster profiles could be listed"
        assert failed.value.exit_code == 1
        assert failed.value.warnings == [f"cluster one: {REFUSED} ({one})", f"cluster two: {REFUSED} ({two})"]
        # One that answered is enough: the others are warnings.
        pairs, warnings = list_runs([config.profile("local"), config.profile("one")])
        assert pairs == [] and warnings == [f"cluster one: {REFUSED} ({one})"]


def test_get_clusters_lists_the_profiles_as_cluster_list_does(cli, dead):
    for output in ("table", "json"):
        listed = cli("get", "clusters", "-o", output)
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout == cli("cluster", "list", "-o", output).stdout
    assert [p["name"] for p in json.loads(cli("get", "cluster", "-o", "json").stdout)] == ["local", "dead"]


@pytest.mark.parametrize(
    ("noun", "hint"),
    [("foo", ""), ("clustrs", "; did you mean 'clusters'?"), ("secret-list", "; did you mean 'secrets'?")],
)
def test_an_unknown_get_noun_is_a_usage_error(cli, noun, hint):
    r = cli("get", noun)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stdout == ""
    assert f"no such noun {noun!r} for `launcher get` (one of: clusters, runs, secrets){hint}" in r.stderr
    assert "Traceback" not in r.stderr


def test_get_with_options_only_still_lists_runs(cli):
    run = local_run(cli)
    assert cli("get", "--status", "completed", "-o", "name").stdout.split() == [run]
    assert cli("get", "-o", "name").stdout.split() == [run]


@pytest.mark.parametrize("command", [["logs"], ["describe", "run"]])
def test_a_typo_while_a_profile_is_down_gets_its_did_you_mean_and_one_warning(cli, dead, command):
    local_run(cli)
    r = cli(*command, "helo")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.splitlines() == [
        f"! cluster dead: {REFUSED} ({dead})",
        "✗ no run named 'helo'",
        "  did you mean 'hello'? list runs with `launcher get runs`",
    ]
