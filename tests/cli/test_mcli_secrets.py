"""Every secret shape of mcli 0.8.3's `create secret`, and ours, as a user types them: each
kind created both ways gives the same secret, which a run then sees (its env var or file,
checked by hash) and masks in its log. Also mcli's value flags with their warning,
--no-input, `get secrets --type` and `delete secret -a`."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

serialization = pytest.importorskip(
    "cryptography.hazmat.primitives.serialization", reason="real keys need the dev extra's cryptography"
)
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from tests.cli.conftest import CLI

ENV_VALUE = "mcli-env-Value-4417"
FOO_VALUE = "foo-Secret-Bar-9031"
DOCKER_PASSWORD = "registry-Pass-2288"
DATABRICKS_TOKEN = "dapi-Token-77aa1023"
HF_TOKEN = "hf_Token_Value_5590"
FILE_TEXT = "mounted-File-Text-6613\n"
HOST = "https://dbc-1234.cloud.databricks.com"
KNOWN_HOSTS = "sftp.example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"


def _h(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _openssh_key() -> str:
    return (
        ed25519.Ed25519PrivateKey.generate()
        .private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption())
        .decode()
    )


def _rsa_pem() -> str:
    return (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        .decode()
    )


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """The files a user has: keys, cloud credentials, a secret text file, and a fake
    ssh-keyscan on PATH that answers for sftp.example.com."""
    d = tmp_path_factory.mktemp("user-files")
    texts = {
        "creds.txt": FILE_TEXT,
        "id_deploy": _openssh_key(),
        "id_git": _openssh_key(),
        "id_sftp": _openssh_key(),
        "known_hosts": KNOWN_HOSTS,
        "aws_credentials": "[default]\naws_access_key_id = AKIAEXAMPLEKEY0001\n"
        "aws_secret_access_key = wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLE01\n"
        "[other]\naws_access_key_id = AKIAEXAMPLEKEY0002\n"
        "aws_secret_access_key = wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLE02\n",
        "aws_config": "[default]\nregion = us-west-2\n",
        "gcp.json": json.dumps(
            {
                "type": "service_account",
                "client_email": "svc@p.iam.gserviceaccount.com",
                "private_key": _rsa_pem(),
                "token_uri": "https://oauth2.googleapis.com/token",
            }
        ),
        "oci_api_key.pem": _rsa_pem(),
        "oci_config": "[DEFAULT]\nuser=ocid1.user.oc1..aaaa\nfingerprint=12:34:56:78\n"
        "key_file=~/.oci/oci_api_key.pem\ntenancy=ocid1.tenancy.oc1..bbbb\nregion=us-ashburn-1\n",
    }
    for name, text in texts.items():
        (d / name).write_text(text)
    scan = d / "bin" / "ssh-keyscan"
    scan.parent.mkdir()
    scan.write_text(
        f'#!/bin/sh\n[ "$3" = sftp.example.com ] || exit 1\n'  # ssh-keyscan -T 10 HOST
        f"printf '# sftp.example.com:22 SSH-2.0\\n%s' '{KNOWN_HOSTS}'\n"
    )
    scan.chmod(0o755)
    return {name: d / name for name in texts} | {"bin": scan.parent}


def _mcli_form(f: dict[str, Path]) -> list[tuple[list[str], str | None]]:
    return [
        (["create", "secret", "env", f"API_KEY={ENV_VALUE}"], None),
        (["create", "secret", "environment", f"FOO={FOO_VALUE}"], None),
        (
            ["create", "secret", "mounted", str(f["creds.txt"]), "--name", "creds", "--mount-path", "/secrets/creds"],
            None,
        ),
        (
            [
                "create",
                "secret",
                "docker",
                "--name",
                "reg",
                "--server",
                "ghcr.io",
                "--username",
                "me",
                "--password",
                DOCKER_PASSWORD,
            ],
            None,
        ),
        (["create", "secret", "ssh", str(f["id_deploy"]), "--name", "deploy"], None),
        (["create", "secret", "git-ssh", str(f["id_git"])], None),  # named after the key: id-git
        (
            [
                "create",
                "secret",
                "sftp-ssh",
                str(f["id_sftp"]),
                "--name",
                "sftp",
                "--host-name",
                "sftp.example.com",
                "--no-host-check",
                "--no-input",
            ],
            None,
        ),
        (
            [
                "create",
                "secret",
                "s3",
                "--credentials-file",
                str(f["aws_credentials"]),
                "--config-file",
                str(f["aws_config"]),
                "--profile",
                "other",
                "--mount-directory",
                "/secrets/aws",
            ],
            None,
        ),
        (["create", "secret", "gcp", "--credentials-file", str(f["gcp.json"]), "--no-input"], None),
        (
            ["create", "secret", "oci", "--config-file", str(f["oci_config"]), "--key-file", str(f["oci_api_key.pem"])],
            None,
        ),
        (["create", "secret", "databricks", "--host", HOST, "--token", DATABRICKS_TOKEN], None),
        (["create", "secret", "hugging_face", "--token", HF_TOKEN], None),
    ]


def _our_form(f: dict[str, Path]) -> list[tuple[list[str], str | None]]:
    return [
        (["secret", "create", "env", "API_KEY"], ENV_VALUE),
        (["secret", "create", "env", "FOO"], FOO_VALUE),
        (["secret", "create", "file", "creds", "--from", str(f["creds.txt"]), "--mount-path", "/secrets/creds"], None),
        (["secret", "create", "docker-registry", "reg", "--server", "ghcr.io", "--username", "me"], DOCKER_PASSWORD),
        (["secret", "create", "ssh", "deploy", "--from", str(f["id_deploy"])], None),
        (["secret", "create", "git-ssh", "id-git", "--from", str(f["id_git"])], None),
        (
            [
                "secret",
                "create",
                "sftp-ssh",
                "sftp",
                "--from",
                str(f["id_sftp"]),
                "--known-hosts",
                str(f["known_hosts"]),
            ],
            None,
        ),
        (
            [
                "secret",
                "create",
                "s3",
                "--credentials",
                str(f["aws_credentials"]),
                "--config",
                str(f["aws_config"]),
                "--profile",
                "other",
                "--mount-path",
                "/secrets/aws",
            ],
            None,
        ),
        (["secret", "create", "gcp", "--from", str(f["gcp.json"])], None),
        (
            [
                "secret",
                "create",
                "oci",
                "oci",
                "--config-file",
                str(f["oci_config"]),
                "--key-file",
                str(f["oci_api_key.pem"]),
            ],
            None,
        ),
        (["secret", "create", "databricks", "--host", HOST], DATABRICKS_TOKEN),
        (["secret", "create", "hf"], HF_TOKEN),
    ]


# What the run prints of each secret: hashes of what it sees, the public parts, and the raw
# values (which its log must mask).
PROBE = r"""
h() { sha256sum | cut -c1-16; }
echo "env $(printf %s "$API_KEY" | h) $(printf %s "$FOO" | h)"
echo "raw $API_KEY $FOO $HF_TOKEN $DATABRICKS_TOKEN"
echo "mounted $(h < /secrets/creds/secret) $SECRET_PATH_CREDS"
cat /secrets/creds/secret
echo "ssh $(h < /secrets/deploy/id) $(stat -c %a /secrets/deploy/id) $SECRET_PATH_DEPLOY"
echo "git $GIT_SSH_COMMAND"
echo "sftp $(h < $COMPOSER_SFTP_KEY_FILE) $(h < $COMPOSER_SFTP_KNOWN_HOSTS_FILE) $COMPOSER_SFTP_KEY_FILE"
echo "s3 $(h < $AWS_SHARED_CREDENTIALS_FILE) $(h < $AWS_CONFIG_FILE) $AWS_PROFILE $AWS_SHARED_CREDENTIALS_FILE"
echo "gcp $(h < $GOOGLE_APPLICATION_CREDENTIALS) $GOOGLE_APPLICATION_CREDENTIALS"
echo "oci $(h < $OCI_CLI_KEY_FILE) $(grep -c "^key_file = $OCI_CLI_KEY_FILE\$" $OCI_CLI_CONFIG_FILE)"
echo "databricks $DATABRICKS_HOST $(printf %s "$DATABRICKS_TOKEN" | h)"
echo "hf $(printf %s "$HF_TOKEN" | h)"
"""


def _expected(f: dict[str, Path]) -> list[str]:
    read = {name: p.read_text() for name, p in f.items() if p.is_file()}
    return [
        f"env {_h(ENV_VALUE)} {_h(FOO_VALUE)}",
        "raw **** **** **** ****",
        f"mounted {_h(FILE_TEXT)} /secrets/creds/secret",
        f"ssh {_h(read['id_deploy'])} 400 /secrets/deploy/id",
        "git ssh -o StrictHostKeyChecking=no -o IdentitiesOnly=yes -i /secrets/id-git/id",
        f"sftp {_h(read['id_sftp'])} {_h(KNOWN_HOSTS)} /secrets/sftp/id",
        f"s3 {_h(read['aws_credentials'])} {_h(read['aws_config'])} other /secrets/aws/credentials",
        f"gcp {_h(read['gcp.json'])} /secrets/gcp/credentials.json",
        f"oci {_h(read['oci_api_key.pem'])} 1",
        f"databricks {HOST} {_h(DATABRICKS_TOKEN)}",
        f"hf {_h(HF_TOKEN)}",
    ]


def _listing(cli: CLI) -> list[dict]:
    r = cli("get", "secrets", "-o", "json")
    assert r.returncode == 0, r.stderr
    return [{k: v for k, v in s.items() if k != "created_at"} for s in json.loads(r.stdout)]


def _create_all(cli: CLI, commands) -> dict[str, dict]:
    """Run each create command; the stored records afterwards, values included, without dates."""
    for args, stdin in commands:
        r = cli(*args, input=stdin if stdin is not None else "")
        assert r.returncode == 0, (args, r.stderr)
        assert re.search(r"Created \S+ secret \S+ in the local secret store", r.stdout), r.stdout
    records = json.loads((cli.home / "secrets" / "secrets.json").read_text())["secrets"]
    return {name: {k: v for k, v in rec.items() if k != "created_at"} for name, rec in records.items()}


def test_each_secret_shape_created_both_ways_reaches_a_run_masked(cli, files, tmp_path):
    ours = CLI(tmp_path / "our-home", cli.cwd)
    ours.home.mkdir()
    for c in (cli, ours):
        c.env["PATH"] = f"{files['bin']}{os.pathsep}{c.env['PATH']}"  # the fake ssh-keyscan
    # The two spellings are one command: what each stores is the same, values included.
    assert _create_all(cli, _mcli_form(files)) == _create_all(ours, _our_form(files))
    listed = _listing(cli)
    assert [(s["name"], s["kind"]) for s in listed] == [
        ("api-key", "env"),
        ("creds", "file"),
        ("databricks", "databricks"),
        ("deploy", "ssh"),
        ("foo", "env"),
        ("gcp", "gcp"),
        ("hf", "hf"),
        ("id-git", "git-ssh"),
        ("oci", "oci"),
        ("reg", "docker-registry"),
        ("s3", "s3"),
        ("sftp", "sftp-ssh"),
    ]
    assert {s["name"]: s["exposed_as"] for s in listed}["reg"] == ["imagePullSecrets"]
    assert {s["name"]: s["exposed_as"] for s in listed}["oci"] == [
        "OCI_CLI_CONFIG_FILE",
        "OCI_CLI_KEY_FILE",
        "/secrets/oci/",
    ]

    for c in (cli, ours):
        spec = c.spec(
            "probe",
            "name: probe\nimage: python:3.11\ncommand: |\n"
            + "".join(f"  {line}\n" for line in PROBE.strip().splitlines()),
        )
        r = c("run", "-f", str(spec), "--follow")
        assert r.returncode == 0, r.stdout + r.stderr
        lines = r.stdout.splitlines()
        for line in _expected(files):
            assert line in lines, (line, r.stdout)
        assert lines[lines.index(f"mounted {_h(FILE_TEXT)} /secrets/creds/secret") + 1] == "****"  # the file's cat
        for value in (ENV_VALUE, FOO_VALUE, DOCKER_PASSWORD, DATABRICKS_TOKEN, HF_TOKEN, FILE_TEXT.strip()):
            assert value not in r.stdout + r.stderr
        logs = c("logs", "probe")
        assert "raw **** **** **** ****" in logs.stdout and ENV_VALUE not in logs.stdout


def test_a_value_flag_warns_and_shows_the_stdin_form(cli):
    r = cli("create", "secret", "hf", "--token", HF_TOKEN)
    assert r.returncode == 0, r.stderr
    assert (
        "--token puts the value in the process list and your shell history; pipe it instead: "
        'printf %s "$VALUE" | launcher create secret hf\n'
    ) in r.stderr
    assert HF_TOKEN not in r.stdout + r.stderr

    r = cli("create", "secret", "env", f"API_KEY={ENV_VALUE}", "--name", "api")
    assert r.returncode == 0, r.stderr
    assert "KEY=VALUE puts the value in the process list" in r.stderr
    assert 'printf %s "$VALUE" | launcher create secret env API_KEY --name api' in r.stderr
    assert ENV_VALUE not in r.stderr

    r = cli("create", "secret", "env", "--key", "OTHER", "--value", ENV_VALUE)
    assert r.returncode == 0 and "--value puts the value in the process list" in r.stderr
    assert "launcher create secret env --key OTHER\n" in r.stderr and ENV_VALUE not in r.stderr

    r = cli(
        "create",
        "secret",
        "docker-registry",
        "reg",
        "--server",
        "ghcr.io",
        "--username",
        "me",
        f"--password={DOCKER_PASSWORD}",
    )
    assert r.returncode == 0 and "--password puts the value" in r.stderr and DOCKER_PASSWORD not in r.stderr
    assert "launcher create secret docker-registry reg --server ghcr.io --username me\n" in r.stderr

    # The form it shows works, without the warning.
    r = cli("create", "secret", "hf", "second", input=HF_TOKEN)
    assert r.returncode == 0 and r.stderr == ""
    stored = json.loads((cli.home / "secrets" / "secrets.json").read_text())["secrets"]
    assert stored["second"]["data"] == stored["hf"]["data"] == {"token": HF_TOKEN}


def _on_a_terminal(cli: CLI, *args: str, answer: str | None = None) -> subprocess.CompletedProcess:
    """`launcher ARGS` with a terminal on stdin, as a user at a shell has; `answer` is typed
    when it asks."""
    primary, secondary = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "launcher", *args],
            cwd=cli.cwd,
            env=cli.env,
            stdin=secondary,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        if answer is not None:
            os.write(primary, answer.encode())
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(primary)
        os.close(secondary)
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


@pytest.mark.parametrize(
    "args, missing",
    [
        (["create", "secret", "hf", "--no-input"], "--no-input: no Hugging Face token, and no prompt is shown"),
        (["create", "secret", "env", "API_KEY", "--no-input"], "--no-input: no value of API_KEY"),
        (["create", "secret", "env", "--no-input"], "no KEY of the variable (--no-input"),
        (["create", "secret", "mounted", "--no-input"], "no secret name (--no-input"),
        (["create", "secret", "ssh", "--no-input"], "no private key file (--no-input"),
        (["create", "secret", "s3", "--no-input"], "no AWS credentials file (--no-input"),
        (["create", "secret", "databricks", "--no-input"], "no Databricks workspace URL (--no-input"),
        (["create", "secret", "docker", "--name", "reg", "--no-input"], "no registry URL (--no-input"),
        (["create", "secret", "sftp-ssh", "/dev/null", "--name", "s", "--no-input"], "no SFTP server host name"),
    ],
)
def test_no_input_never_prompts_and_names_what_is_missing(cli, args, missing):
    r = _on_a_terminal(cli, *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert missing in r.stderr and "Traceback" not in r.stderr
    assert not (cli.home / "secrets" / "secrets.json").exists() or _listing(cli) == []


def test_no_input_reads_a_piped_value_and_refuses_an_empty_pipe(cli):
    r = cli("create", "secret", "env", "API_KEY", "--no-input", input="")
    assert r.returncode == 2 and "--no-input: no value of API_KEY: stdin was empty" in r.stderr
    assert 'pipe it in: printf %s "$VALUE" | launcher create secret env API_KEY --no-input' in r.stderr
    r = cli("create", "secret", "mounted", "--name", "note", "--no-input", input=FILE_TEXT)
    assert r.returncode == 0, r.stderr
    assert json.loads((cli.home / "secrets" / "secrets.json").read_text())["secrets"]["note"]["options"] == {
        "mount_path": "/secrets/note"
    }


def test_sftp_host_keys_are_confirmed_on_a_terminal(cli, files):
    cli.env["PATH"] = f"{files['bin']}{os.pathsep}{cli.env['PATH']}"
    base = ["create", "secret", "sftp-ssh", str(files["id_sftp"]), "--name", "sftp", "--host-name", "sftp.example.com"]
    r = _on_a_terminal(cli, *base, answer="n\n")
    assert r.returncode == 2 and "the host keys were not confirmed" in r.stderr
    r = cli(*base, input="")
    assert r.returncode == 2 and "need confirming" in r.stderr and "--no-host-check" in r.stderr
    r = _on_a_terminal(cli, *base, answer="y\n")
    assert r.returncode == 0, r.stderr
    assert "Host keys of sftp.example.com" in r.stdout and "ssh-ed25519 AAAAC3Nza" in r.stdout
    r = cli("create", "secret", "sftp-ssh", str(files["id_sftp"]), "--name", "other", "--host-name", "nowhere.example")
    assert r.returncode == 2 and "ssh-keyscan nowhere.example found no host keys" in r.stderr


def test_key_file_shapes_and_their_mistakes(cli, files):
    r = cli("create", "secret", "ssh", "deploy")  # our NAME without --from: not a key file
    assert r.returncode == 2 and "deploy" in r.stderr and "Traceback" not in r.stderr
    r = cli("create", "secret", "ssh", "one", "--from", str(files["id_deploy"]), "--name", "two")
    assert r.returncode == 2 and "two names: 'one' and --name 'two'" in r.stderr
    r = cli("create", "secret", "ssh", str(files["aws_config"]), "--name", "k")
    assert r.returncode == 2 and "its key file is not a private key" in r.stderr  # check_new still runs
    r = cli("create", "secret", "mounted", str(files["creds.txt"]), "--mount-path", "/etc")
    assert r.returncode == 2 and "--mount-path: the mount path /etc would hide" in r.stderr
    r = cli("create", "secret", "s3", "--credentials-file", str(files["aws_credentials"]), "--profile", "nope")
    assert r.returncode == 2
    assert "--profile 'nope' is not a profile of its credentials file (profiles: default, other)" in r.stderr
    r = cli("create", "secret", "oci", "--config-file", str(files["aws_config"]), "--key-file", str(files["id_git"]))
    assert r.returncode == 2 and "its config file has no profile with user, fingerprint, tenancy, region" in r.stderr
    r = cli("create", "secret", "mounted", str(files["creds.txt"]))  # the name from the file: creds
    assert r.returncode == 0 and "Created file secret creds" in r.stdout


def test_get_secrets_filters_by_type_in_either_spelling(cli, files):
    for args, stdin in [
        (["create", "secret", "env", "API_KEY"], ENV_VALUE),
        (["create", "secret", "env", "FOO"], FOO_VALUE),
        (["create", "secret", "mounted", str(files["creds.txt"])], None),
        (["create", "secret", "hf"], HF_TOKEN),
    ]:
        assert cli(*args, input=stdin or "").returncode == 0

    def names(*args: str) -> list[str]:
        r = cli("get", "secrets", *args, "-o", "json")
        assert r.returncode == 0, r.stderr
        return [s["name"] for s in json.loads(r.stdout)]

    assert names("--type", "env") == names("--type", "environment") == ["api-key", "foo"]
    assert names("--type", "mounted") == names("--type", "file") == ["creds"]
    assert names("--type", "hugging_face", "--type", "mounted") == ["creds", "hf"]
    assert names("--type", "ssh") == []
    table = cli("secret", "list", "--type", "hf").stdout
    assert re.search(r"^hf\s+hf\s+HF_TOKEN", table, re.M) and "api-key" not in table
    assert "No secrets of kind gcp in" in cli("get", "secrets", "--type", "gcp").stdout
    r = cli("get", "secrets", "--type", "enviroment")
    assert r.returncode == 2 and "--type 'enviroment' is not a secret kind" in r.stderr


def test_delete_secret_all_confirms_with_the_count(cli):
    for key, value in (("API_KEY", ENV_VALUE), ("FOO", FOO_VALUE), ("HF_TOKEN", HF_TOKEN)):
        assert cli("create", "secret", "env", key, input=value).returncode == 0
    r = _on_a_terminal(cli, "delete", "secret", "-a", answer="n\n")
    assert r.returncode == 0 and "Delete all 3 secret(s) in the local secret store" in r.stdout
    assert "(api-key, foo, hf-token)?" in r.stdout and len(_listing(cli)) == 3
    r = cli("delete", "secret", "--all", input="")
    assert r.returncode == 2 and "pass -y" in r.stderr and len(_listing(cli)) == 3
    r = cli("delete", "secret", "-a", "foo", "-y")
    assert r.returncode == 2 and "not both" in r.stderr
    r = cli("delete", "secret", input="")
    assert r.returncode == 2 and "or -a/--all" in r.stderr
    r = _on_a_terminal(cli, "delete", "secret", "-a", answer="y\n")
    assert r.returncode == 0 and r.stdout.count("Deleted secret") == 3 and _listing(cli) == []
    assert cli("create", "secret", "env", "FOO", input=FOO_VALUE).returncode == 0
    r = cli("secret", "delete", "-a", "-y")  # our spelling
    assert r.returncode == 0 and "Deleted secret foo" in r.stdout and _listing(cli) == []
    r = cli("delete", "secret", "-a", "-y")
    assert r.returncode == 0 and "No secrets in the local secret store" in r.stdout


def test_mcli_names_are_listed_and_complete(cli):
    r = cli("create", "secret", "--help")
    assert r.returncode == 0
    for word in ("mounted", "sftp-ssh", "oci", "environment", "docker", "hugging_face"):
        assert re.search(rf"^\s+{word}\s", r.stdout, re.M), (word, r.stdout)
    env = {
        **cli.env,
        "_LAUNCHER_COMPLETE": "bash_complete",
        "COMP_WORDS": "launcher create secret h",
        "COMP_CWORD": "3",
    }
    done = subprocess.run([sys.executable, "-m", "launcher"], env=env, capture_output=True, text=True, cwd=cli.cwd)
    assert {line.split(",", 1)[1] for line in done.stdout.splitlines()} == {"hf", "hugging_face", "hugging-face"}


def test_kubernetes_store_env_mounted_and_docker_both_ways_reach_a_run(cli, fake_kube, files):
    """mcli's env, mounted and docker shapes and ours, as Kubernetes Secrets of the fake cluster:
    the same Secrets, then a run on it sees the variable and the file, masked."""
    commands = {
        "mcli": [
            (["create", "secret", "env", f"API_KEY={ENV_VALUE}", "--cluster", "fake"], None),
            (
                [
                    "create",
                    "secret",
                    "mounted",
                    str(files["creds.txt"]),
                    "--name",
                    "creds",
                    "--mount-path",
                    "/secrets/creds",
                    "--cluster",
                    "fake",
                ],
                None,
            ),
            (
                [
                    "create",
                    "secret",
                    "docker",
                    "--name",
                    "reg",
                    "--server",
                    "ghcr.io",
                    "--username",
                    "me",
                    "--password",
                    DOCKER_PASSWORD,
                    "--cluster",
                    "fake",
                ],
                None,
            ),
        ],
        "ours": [
            (["secret", "create", "env", "API_KEY", "--cluster", "fake"], ENV_VALUE),
            (
                [
                    "secret",
                    "create",
                    "file",
                    "creds",
                    "--from",
                    str(files["creds.txt"]),
                    "--mount-path",
                    "/secrets/creds",
                    "--cluster",
                    "fake",
                ],
                None,
            ),
            (
                [
                    "secret",
                    "create",
                    "docker-registry",
                    "reg",
                    "--server",
                    "ghcr.io",
                    "--username",
                    "me",
                    "--cluster",
                    "fake",
                ],
                DOCKER_PASSWORD,
            ),
        ],
    }
    stored = {}
    for form, steps in commands.items():
        for args, stdin in steps:
            r = cli(*args, input=stdin if stdin is not None else "")
            assert r.returncode == 0, (args, r.stderr)
            assert "in namespace default of cluster fake" in r.stdout, r.stdout
        secrets = {name: fake_kube.get("Secret", "default", name) for name in ("api-key", "creds", "reg")}
        stored[form] = {
            name: (obj["type"], obj["data"], obj["metadata"]["labels"], obj["metadata"]["annotations"])
            for name, obj in secrets.items()
        }
        r = cli("get", "secrets", "--cluster", "fake", "--type", "mounted", "-o", "json")
        assert [s["name"] for s in json.loads(r.stdout)] == ["creds"], r.stderr
        if form == "mcli":
            r = cli("delete", "secret", "-a", "-y", "--cluster", "fake")
            assert r.returncode == 0 and r.stdout.count("Deleted secret") == 3, r.stderr
            assert not [o for o in fake_kube.list("Secret", "default")[0] if o["metadata"]["name"] in secrets]
    assert stored["mcli"] == stored["ours"]
    assert ENV_VALUE not in json.dumps(stored["ours"]["api-key"][2:])  # nor in labels or annotations
    kind, data, _, _ = stored["ours"]["reg"]  # a Secret a pod's imagePullSecrets can name
    assert kind == "kubernetes.io/dockerconfigjson"
    auth = json.loads(base64.b64decode(data[".dockerconfigjson"]))["auths"]["ghcr.io"]["auth"]
    assert base64.b64decode(auth).decode() == f"me:{DOCKER_PASSWORD}"

    spec = cli.spec(
        "probe",
        "name: probe\nimage: python:3.11\ncommand: |\n"
        '  echo "env $(printf %s "$API_KEY" | sha256sum | cut -c1-16) raw $API_KEY"\n'
        '  echo "mounted $(sha256sum < /secrets/creds/secret | cut -c1-16) $SECRET_PATH_CREDS"\n'
        "  cat /secrets/creds/secret\n",
    )
    r = cli("run", "-f", str(spec), "--cluster", "fake", "--follow", timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"env {_h(ENV_VALUE)} raw ****" in r.stdout, r.stdout
    assert f"mounted {_h(FILE_TEXT)} /secrets/creds/secret\n****" in r.stdout
    assert ENV_VALUE not in r.stdout + r.stderr and FILE_TEXT.strip() not in r.stdout + r.stderr
