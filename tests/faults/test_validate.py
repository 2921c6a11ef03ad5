"""Items 6, 9 and 10 of the second hardening issue: `validate` and `run --dry-run` refuse
what `run` refuses, with the same message (they share one check), and the spec's stricter
fields (max_retries' bound, gpus, secret mount paths). Every case is the real CLI in a
subprocess."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.faults.conftest import refused

COMMANDS = (["validate"], ["run", "--dry-run"], ["run"])


def refusals(cli, spec, *args: str) -> dict[str, str]:
    """validate's, run --dry-run's and run's stderr for the same spec: each a clean exit 2."""
    return {" ".join(command): refused(cli(*command, "-f", str(spec), *args)) for command in COMMANDS}


def error_lines(stderr: str) -> list[str]:
    """The error and its hint: the lines from the ✗ on."""
    lines = stderr.splitlines()
    return lines[next(i for i, line in enumerate(lines) if line.startswith("✗")) :]


def assert_same_refusal(cli, spec, message: str, *args: str) -> list[str]:
    said = {command: error_lines(err) for command, err in refusals(cli, spec, *args).items()}
    assert all(lines == said["run"] for lines in said.values()), said
    assert message in said["run"][0], said["run"]
    assert not (cli.home / "runs").exists() or not any((cli.home / "runs").iterdir())
    return said["run"]


BIG = 140_000  # past the 128 KiB Linux takes of one argument or one NAME=value

# (id, the spec's text, the refusal run gives, starting after "✗ ")
REFUSED_BY_RUN = [
    (
        "nodes",
        "name: wide\ncommand: 'true'\ncompute: {nodes: 100000}\n",
        "{spec}:3:18: compute.nodes: 100000 is more than the local backend runs on this machine",
    ),
    (
        "apt",
        "name: apt\ncommand: 'true'\nintegrations:\n  - integration_type: apt_packages\n    packages: [curl]\n",
        "{spec}:4:5: integrations.0: apt_packages: the local backend does not install system packages",
    ),
    ("nul-command", 'name: nul\ncommand: "echo a\\0b"\n', "{spec}:2:10: command: holds a NUL byte"),
    (
        "nul-env",
        'name: nul\ncommand: "true"\nenv_variables:\n  SAFE: x\n  ODD: "a\\0b"\n',
        "{spec}:5:8: env_variables.ODD: holds a NUL byte",
    ),
    (
        "long-command",
        f"name: long\ncommand: echo {'x' * BIG}\n",
        "{spec}:2:10: command: is 140,005 bytes (136.7 KiB), longer than the 131,072 bytes (128.0 KiB) Linux passes "
        "as one argument (MAX_ARG_STRLEN)",
    ),
    (
        "long-env",
        f"name: long\ncommand: 'true'\nenv_variables:\n  LONG: {'x' * BIG}\n",
        "{spec}:4:9: env_variables.LONG: NAME=value is 140,005 bytes (136.7 KiB), longer than the 131,072 bytes "
        "(128.0 KiB) Linux takes of one environment variable",
    ),
]


@pytest.mark.parametrize("case, text, message", REFUSED_BY_RUN, ids=[c[0] for c in REFUSED_BY_RUN])
def test_item6_validate_and_dry_run_refuse_what_run_refuses(cli, case, text, message):
    spec = cli.spec(case, text)
    line = assert_same_refusal(cli, spec, "✗ " + message.format(spec=spec), "--backend", "local")[0]
    assert line.startswith("✗ " + message.format(spec=spec)), line


REFUSED_BY_A_CLUSTER = [c for c in REFUSED_BY_RUN if c[0].startswith(("nul", "long-"))]


@pytest.mark.parametrize("case, text, message", REFUSED_BY_A_CLUSTER, ids=[c[0] for c in REFUSED_BY_A_CLUSTER])
def test_item6_a_cluster_refuses_what_no_pod_could_exec(cli, fake_kube_factory, case, text, message):
    """The exec's limits are Linux's, in a pod as here: validate, the dry-run and run on a
    cluster refuse the same specs, and run creates nothing in the cluster."""
    fake_kube = fake_kube_factory()
    spec = cli.spec(case, text + "image: python:3.11-slim\n")  # last: the lines stay where they were
    line = assert_same_refusal(cli, spec, "", "--cluster", "fake")[0]
    assert line.startswith("✗ " + message.format(spec=spec)), line
    assert not [r for r in fake_kube.requests if r[0] == "POST"]


def test_item6_secrets_and_command_past_arg_max_are_refused_naming_the_largest(cli):
    """Each env secret fits one variable (120 KB), but every run without `secrets:` gets
    them all: together past the 2 MiB a Linux exec takes. run refused it (it failed to
    start the supervisor: "Argument list too long", exit 1); now validate, the dry-run
    and run refuse it alike, naming the largest secrets and never a value."""
    values = {}
    for i in range(18):
        values[f"big{i:02d}"] = value = uuid.uuid4().hex * 3750  # 120,000 characters
        r = cli("secret", "create", "env", f"BIG{i:02d}", input=value)
        assert r.returncode == 0, r.stderr
    spec = cli.spec("plain", "name: plain\ncommand: echo hi\n")
    lines = assert_same_refusal(
        cli, spec, "a Linux exec accepts (ARG_MAX). The largest parts: secret 'big", "--backend", "local"
    )
    text = "\n".join(lines)
    assert text.count("secret 'big") == 3 and "117.2 KiB" in text, text
    assert not [v for v in values.values() if v[:32] in text]
    assert "secrets:" in lines[1]  # the way out: name the secrets the run needs
    # Naming fewer of them is the way out: the same spec with `secrets:` runs.
    few = cli.spec("few", "name: few\ncommand: echo hi\nsecrets: [big00, big01]\n")
    r = cli("validate", "-f", str(few), "--backend", "local")
    assert r.returncode == 0, r.stderr


def test_item9_max_retries_has_a_documented_upper_bound(cli):
    spec = cli.spec("loop", "name: loop\ncommand: 'false'\nscheduling:\n  max_retries: 1000000000000000000000\n")
    assert_same_refusal(
        cli,
        spec,
        f"✗ {spec}:4:16: scheduling.max_retries: must be less than or equal to 100, got 1000000000000000000000",
        "--backend",
        "local",
    )
    ok = cli.spec("ok", "name: ok\ncommand: 'true'\n")
    assert_same_refusal(
        cli,
        ok,
        "✗ --max-retries 101: scheduling.max_retries: must be less than or equal to 100",
        "--max-retries",
        "101",
        "--backend",
        "local",
    )
    assert cli("validate", "-f", str(ok), "--max-retries", "100").returncode == 0


def test_item10_gpus_is_a_strict_integer(cli):
    spec = cli.spec("gpus", "name: g\ncommand: 'true'\ncompute:\n  gpus: true\n")
    assert_same_refusal(cli, spec, f"✗ {spec}:4:9: compute.gpus: must be an integer, got True", "--backend", "local")


@pytest.mark.parametrize(
    "path, message",
    [
        ("/etc", "the mount path /etc would hide the run's /etc"),
        ("/mnt/config", "the mount path /mnt/config would hide the run's config mount"),
        ("/mnt", "the mount path /mnt would hide the run's config mount"),
        ("/mnt/config/creds", "the mount path /mnt/config/creds would lie inside the run's config mount"),
        ("/proc/creds", "would lie inside the kernel's /proc"),
        ("/sys", "would hide the kernel's /sys"),
        ("/dev/shm", "would lie inside the run's devices"),
        ("//x", "the mount path must be a normalised directory other than / (e.g. '/x'), got '//x'"),
        ("/secrets/a\nb", "the mount path must not hold a control character (a newline, a tab), got '/secrets/a\\nb'"),
        ("secrets/a", "the mount path must be absolute"),
    ],
)
def test_item10_mount_paths_that_hide_what_a_run_needs_are_refused(cli, path, message):
    (cli.cwd / "key").write_text("a value long enough to mask\n")
    refused(cli("secret", "create", "file", "creds", "--from", "key", "--mount-path", path), message)
    assert cli("secret", "list", "-o", "json").stdout.strip() == "[]"


def test_item10_a_directory_of_its_own_under_etc_is_still_a_mount_path(cli):
    (cli.cwd / "key").write_text("a value long enough to mask\n")
    r = cli("secret", "create", "file", "creds", "--from", "key", "--mount-path", "/etc/creds")
    assert r.returncode == 0, r.stderr


def test_item10_secrets_mounted_one_inside_another_or_stored_before_the_rule_are_refused(cli):
    (cli.cwd / "key").write_text("a value long enough to mask\n")
    for name, path in (("outer", "/secrets/outer"), ("inner", "/secrets/outer/inner")):
        r = cli("secret", "create", "file", name, "--from", "key", "--mount-path", path)
        assert r.returncode == 0, r.stderr
    spec = cli.spec("both", "name: both\ncommand: 'true'\n")
    assert_same_refusal(
        cli,
        spec,
        "✗ secrets 'inner' and 'outer' mount one inside the other (/secrets/outer/inner "
        "and /secrets/outer): one would hide the other",
        "--backend",
        "local",
    )
    assert cli("secret", "delete", "inner", "-y").returncode == 0

    # A secret stored before the rule (or by hand) with /etc as its mount path.
    store = cli.home / "secrets" / "secrets.json"
    doc = json.loads(store.read_text())
    doc["secrets"]["outer"]["options"]["mount_path"] = "/etc"
    store.write_text(json.dumps(doc))
    assert_same_refusal(
        cli, spec, "✗ secret 'outer': the mount path /etc would hide the run's /etc", "--backend", "local"
    )


def test_item6_a_cluster_run_whose_secrets_pass_arg_max_is_refused_before_anything_is_created(cli, fake_kube):
    """A cluster's secrets are read by `run` alone (validate and the dry-run never contact
    the cluster): run refuses, naming the secrets, and creates nothing."""
    from launcher.config import load_config
    from launcher.sdk.profiles import open_secret_store
    from launcher.secrets.kinds import Secret, SecretKind

    store = open_secret_store(load_config().profile("fake"))
    for i in range(18):
        store.create(
            Secret(f"big{i:02d}", SecretKind.ENV, {"value": uuid.uuid4().hex * 3750}, {"env_key": f"BIG{i:02d}"})
        )
    spec = cli.spec("plain", "name: plain\nimage: python:3.11-slim\ncommand: echo hi\n")
    err = refused(
        cli("run", "-f", str(spec), "--cluster", "fake"),
        "a Linux exec accepts (ARG_MAX). The largest parts: secret 'big",
    )
    assert "secrets:" in err
    assert not [r for r in fake_kube.requests if r[0] == "POST" and r[1] != "Secret"], fake_kube.requests
