"""Item 5 of the third hardening issue: every bad input is an exit 2 naming file:line and
the field, never "internal error" nor minutes of work: merge keys bounded as aliases are,
lone surrogates, infinities and values past what the cluster's API takes. Every case is
the real CLI in a subprocess; the cluster cases use the fake API server."""

from __future__ import annotations

import time

import pytest

from tests.faults.conftest import refused

COMMANDS = (["validate"], ["run", "--dry-run"], ["run"])


def refused_alike(cli, spec, message: str, *args: str) -> None:
    """validate, run --dry-run and run each refuse `spec` with exit 2 and `message`, and
    nothing was started."""
    for command in COMMANDS:
        err = refused(cli(*command, "-f", str(spec), *args, timeout=60))
        assert f"✗ {message}" in err, (command, err)
    assert not (cli.home / "runs").exists() or not any((cli.home / "runs").iterdir())


def test_item5_chained_merge_keys_are_bounded_like_aliases(cli):
    """Each level merges the one before twice: 2^40 pairs from a file of about a kilobyte."""
    levels = "".join(f"l{i}: &a{i} {{<<: [*a{i - 1}, *a{i - 1}]}}\n" for i in range(1, 40))
    spec = cli.spec("merge", f"name: merge\ncommand: 'true'\nl0: &a0 {{k: v}}\n{levels}")
    assert spec.stat().st_size < 1300
    began = time.monotonic()
    err = refused(cli("validate", "-f", str(spec), timeout=60), f"{spec}:")
    assert "merge keys (<<) to more than 100000 values" in err, err
    assert time.monotonic() - began < 20
    # A mapping merged into itself is named, not a recursion.
    loop = cli.spec("loop", "name: loop\ncommand: 'true'\nm: &a {<<: *a}\n")
    refused(cli("validate", "-f", str(loop)), f"{loop}:3:4: a merge key (<<) refers to the mapping that holds it")


SURROGATES = [
    ("command", 'name: s\ncommand: "echo \\uD800"\n', "{spec}:2:10: command: holds '\\ud800' at character 6"),
    (
        "env",
        'name: s\ncommand: "true"\nenv_variables:\n  ODD: "a\\uDC00"\n',
        "{spec}:4:8: env_variables.ODD: holds '\\udc00' at character 2",
    ),
]


@pytest.mark.parametrize("case, text, message", SURROGATES, ids=[c[0] for c in SURROGATES])
def test_item5_a_lone_surrogate_is_refused_at_its_field(cli, case, text, message):
    spec = cli.spec(case, text)
    refused_alike(cli, spec, message.format(spec=spec) + ", a lone UTF-16 surrogate", "--backend", "local")


INFINITE = [
    ("cpus-inf", "compute: {cpus: .inf}", "{spec}:4:17: compute.cpus: must be a finite number, got inf"),
    ("cpus-1e999", "compute: {cpus: 1e999}", "{spec}:4:17: compute.cpus: must be a finite number, got inf"),
    ("nodes-inf", "compute: {nodes: .inf}", "{spec}:4:18: compute.nodes: must be a finite number, got inf"),
    (
        "duration-inf",
        "scheduling: {max_duration: .inf}",
        "{spec}:4:28: scheduling.max_duration: must be a finite number, got inf",
    ),
]


@pytest.mark.parametrize("case, line, message", INFINITE, ids=[c[0] for c in INFINITE])
def test_item5_infinities_are_refused_at_the_field_on_every_backend(cli, fake_kube, case, line, message):
    spec = cli.spec(case, f"name: inf\nimage: python:3.11-slim\ncommand: 'true'\n{line}\n")
    for target in (["--backend", "local"], ["--cluster", "fake"]):
        refused_alike(cli, spec, message.format(spec=spec), *target)
    assert not [r for r in fake_kube.requests if r[0] == "POST"]


PAST_THE_API = [
    (
        "deadline",
        "scheduling: {max_duration: 1e300}",
        "{spec}:4:28: scheduling.max_duration: 1e+300 hours is more seconds than a Job's activeDeadlineSeconds "
        "holds (a 64-bit integer",
    ),
    (
        "completions",
        "compute: {nodes: 100000000}",
        "{spec}:4:18: compute.nodes: 100,000,000 nodes is more than Kubernetes runs in one Indexed Job "
        "(at most 100,000 pods)",
    ),
]


@pytest.mark.parametrize("case, line, message", PAST_THE_API, ids=[c[0] for c in PAST_THE_API])
def test_item5_validate_refuses_what_the_api_server_would(cli, fake_kube, case, line, message):
    """The dry-run used to render activeDeadlineSeconds: 3.6e+303 and an Indexed Job of
    10^8 completions; the API server refuses both, so validate does, naming the field."""
    spec = cli.spec(case, f"name: big\nimage: python:3.11-slim\ncommand: 'true'\n{line}\n")
    refused_alike(cli, spec, message.format(spec=spec), "--cluster", "fake")
    assert not [r for r in fake_kube.requests if r[0] == "POST"]


def test_item5_a_set_value_that_refers_to_itself_is_named(cli):
    spec = cli.spec("ok", "name: ok\ncommand: 'true'\n")
    refused_alike(
        cli,
        spec,
        "--set parameters.x=&a [*a]: parameters.x: an alias (*name) refers to a value that holds it",
        "--set",
        "parameters.x=&a [*a]",
        "--backend",
        "local",
    )
    # A value that holds an alias of another part of it is fine.
    r = cli("validate", "-f", str(spec), "--set", "parameters.y={a: &b [1], c: *b}")
    assert r.returncode == 0, r.stderr


def test_item5_update_refuses_what_the_spec_refuses(cli, token, kill_leftovers):
    """`update run --max-duration inf` was taken (and on a cluster an internal error), as
    was --max-retries past the spec's bound of 100."""
    spec = cli.spec("slow", f"name: slow\nenv_variables: {{FAULT_TOKEN: {token}}}\ncommand: sleep 60\n")
    assert cli("run", "-f", str(spec)).returncode == 0
    name = cli.describe()["name"]
    try:
        refused(
            cli("update", "run", name, "--max-duration", "inf"),
            "--max-duration must be a finite number of hours above 0, got inf",
        )
        refused(cli("update", "run", name, "--max-retries", "1000"), "--max-retries must be from 0 to 100, got 1000")
        assert cli("describe", "run", name, "-o", "json").stdout.count('"max_retries": 0') == 1
    finally:
        cli("stop", name)
