"""Issue 36, item 3: no secret can break every run. `secret create` refuses an env name the
run's environment owns and a mount path onto a system directory, naming the secret; one
stored before the rule (or by hand) is refused by `validate`, `run --dry-run` and `run` in
the same words, while a run that leaves it out with `secrets:` still runs."""

from __future__ import annotations

import json

import pytest

from tests.faults.conftest import refused
from tests.faults.test_validate import assert_same_refusal

OWNED = ["PATH", "HOME", "LAUNCHER_HOME", "LD_PRELOAD", "PYTHONPATH", "RANK", "WORLD_SIZE", "MASTER_PORT"]


@pytest.mark.parametrize("var", OWNED)
def test_item3_an_env_secret_the_runs_environment_owns_is_refused_at_create(cli, var):
    r = cli("secret", "create", "env", var, input="a-value-long-enough-4711")
    name = var.lower().replace("_", "-")
    refused(r, f"secret {name!r}: it sets the environment variable {var}, which the run's own environment owns")
    assert cli("secret", "list", "-o", "json").stdout.strip() == "[]"


@pytest.mark.parametrize("path", ["/usr", "/bin", "/lib", "/usr/lib/creds", "/sbin", "/var", "/tmp", "/opt", "/"])
def test_item3_a_mount_onto_a_system_directory_is_refused_at_create(cli, path):
    (cli.cwd / "key").write_text("a value long enough to mask\n")
    r = cli("secret", "create", "file", "creds", "--from", "key", "--mount-path", path)
    refused(r, "secret 'creds': --mount-path: the mount path")
    assert cli("secret", "list", "-o", "json").stdout.strip() == "[]"


def test_item3_an_ordinary_env_name_and_mount_path_are_still_secrets(cli):
    assert cli("secret", "create", "env", "MY_PATH", input="a-value-long-enough-4711").returncode == 0
    (cli.cwd / "key").write_text("a value long enough to mask\n")
    r = cli("secret", "create", "file", "creds", "--from", "key", "--mount-path", "/var/secrets/creds")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize(
    "field, value, message",
    [
        (
            "env_key",
            "PATH",
            "✗ secret 'tok': it sets the environment variable PATH, which the run's own environment owns",
        ),
        ("env_key", "LAUNCHER_HOME", "✗ secret 'tok': it sets the environment variable LAUNCHER_HOME"),
        ("mount_path", "/usr", "✗ secret 'creds': the mount path /usr would hide the system's /usr"),
        ("mount_path", "/bin", "✗ secret 'creds': the mount path /bin would hide the system's /bin"),
    ],
)
def test_item3_a_stored_secret_that_would_break_runs_is_refused_by_validate_and_run(cli, field, value, message):
    assert cli("secret", "create", "env", "TOK", input="a-value-long-enough-4711").returncode == 0
    (cli.cwd / "key").write_text("a value long enough to mask\n")
    assert cli("secret", "create", "file", "creds", "--from", "key", "--mount-path", "/secrets/creds").returncode == 0
    store = cli.home / "secrets" / "secrets.json"
    doc = json.loads(store.read_text())
    doc["secrets"]["tok" if field == "env_key" else "creds"]["options"][field] = value
    store.write_text(json.dumps(doc))  # stored before the rule, or by hand

    spec = cli.spec("all", "name: all\ncommand: echo ran\n")  # every secret, mcli's default
    assert_same_refusal(cli, spec, message, "--backend", "local")
    # The same words as `secret create` says for such a secret.
    created = refused(
        cli("secret", "create", "env", value, input="another-long-value")
        if field == "env_key"
        else cli("secret", "create", "file", "creds2", "--from", "key", "--mount-path", value)
    )
    assert message.split(": ", 1)[1] in created, created

    # A run that leaves it out is not broken by it.
    other = "creds" if field == "env_key" else "tok"
    spec = cli.spec("some", f"name: some\ncommand: echo ran\nsecrets: [{other}]\n")
    r = cli("run", "-f", str(spec), "--follow", "--backend", "local")
    assert r.returncode == 0 and "ran" in r.stdout, r.stdout + r.stderr
