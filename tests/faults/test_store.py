"""Items 2, 3, 5 and 10 of the second hardening issue, as they touch the launcher home's
state files: a secret no run could use is refused at create (a NUL byte, an env value past
what exec takes, a gcp, s3 or ssh file that is not one), concurrent commands never lose a
write to secrets.json or config.yaml, and a bad secrets.json or config.yaml is named with the
way out. Every case is the real CLI in a subprocess."""

from __future__ import annotations

import json
import stat
import subprocess

import pytest

from launcher.pod.contract import MAX_ARG_STRLEN
from tests.faults.conftest import refused
from tests.forked_cli import launcher_command

cryptography = pytest.importorskip("cryptography", reason="real keys need the dev extra's cryptography")
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

WRITERS = 16


def secret_names(cli) -> list[str]:
    r = cli("secret", "list", "-o", "json")
    assert r.returncode == 0, r.stderr
    return sorted(s["name"] for s in json.loads(r.stdout))


def create_from_bytes(cli, stdin: bytes, *args: str) -> subprocess.CompletedProcess:
    """`launcher secret create ARGS` with raw bytes on stdin (cli() sends text)."""
    done = subprocess.run(
        [*launcher_command(cli.env), "secret", "create", *args],
        cwd=cli.cwd,
        env=cli.env,
        input=stdin,
        capture_output=True,
        timeout=60,
    )
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())


def test_item2_an_env_value_no_run_could_use_is_refused_at_create(cli):
    # `head -c 100 /dev/urandom | launcher secret create env BINV`, with bytes that are certain
    # to be what urandom gives a third of the time (a NUL) and most of the time (not UTF-8).
    refused(
        create_from_bytes(cli, b"\x9c\xff\x00\x17random", "env", "BINV"),
        "secret 'binv': stdin gave bytes that are not UTF-8 text, which no run could use",
    )
    refused(
        create_from_bytes(cli, b"text-with\x00a-nul", "env", "BINV"),
        "secret 'binv': its value holds a NUL byte, which no environment variable (BINV) can hold",
    )
    # One NAME=VALUE string past 128 KiB: exec fails with "Argument list too long" in every run.
    just_over = "x" * (MAX_ARG_STRLEN - len("HUGE=") - 1 + 1)  # its NUL makes the string one byte too long
    refused(
        cli("secret", "create", "env", "HUGE", input=just_over),
        "secret 'huge': its value is too long for an environment variable: HUGE=VALUE would be 131,073 bytes, "
        "and exec takes at most 131,072 (128 KiB, Linux's MAX_ARG_STRLEN)",
        "launcher secret create file",
    )
    refused(
        cli("secret", "create", "env", "HUGE", input="x" * 10_000_000),
        "secret 'huge': stdin gave more than 1 MiB, more than a secret holds",
    )
    refused(
        cli("secret", "create", "hf", input="hf_" + "\0" * 8),
        "secret 'hf': its token holds a NUL byte, which no environment variable (HF_TOKEN) can hold",
    )
    assert secret_names(cli) == []

    # One stored before this check (by an older launcher, in the home itself, which the next
    # command moves into the store's directory): every run is refused, naming it, rather than
    # failing inside.
    (cli.home / "secrets.json").write_text(
        json.dumps(
            {
                "version": 1,
                "secrets": {
                    "old": {"kind": "env", "data": {"value": "from\u0000before"}, "options": {"env_key": "OLD"}}
                },
            }
        )
    )
    spec = cli.spec("plain", "name: plain\ncommand: echo hi\n")
    refused(
        cli("run", "-f", str(spec)),
        f"{cli.home / 'secrets' / 'secrets.json'}: secret 'old': its value holds a NUL byte",
        "delete it with `launcher secret delete old`",
    )
    assert cli("secret", "delete", "old", "-y").returncode == 0

    # The largest value the limit lets in reaches a run whole: the limit is exec's own.
    largest = "y" * (MAX_ARG_STRLEN - len("LARGEST=") - 1)
    assert cli("secret", "create", "env", "LARGEST", input=largest).returncode == 0
    spec = cli.spec("env", "name: env\ncommand: printenv LARGEST | wc -c\n")
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stderr
    assert f"{len(largest) + 1}" in r.stdout.split(), r.stdout


def test_item3_parallel_writers_lose_no_secret_and_no_profile(cli):
    secrets = [cli.popen("secret", "create", "env", f"CONC{i}=value-{i}-of-the-test") for i in range(WRITERS)]
    profiles = [cli.popen("cluster", "add", f"conc{i}", "--context", "nowhere") for i in range(WRITERS)]
    said = {}
    for i, p in enumerate(secrets + profiles):
        out, err = p.communicate(timeout=120)
        said[i] = (p.returncode, out, err)
    for i in range(WRITERS):
        code, out, err = said[i]
        assert code == 0 and f"Created env secret conc{i}" in out, err
        code, out, err = said[WRITERS + i]
        assert code == 0 and f"Added cluster conc{i}" in out, err
    assert secret_names(cli) == sorted(f"conc{i}" for i in range(WRITERS))
    r = cli("cluster", "list", "-o", "json")
    assert sorted(p["name"] for p in json.loads(r.stdout)) == sorted(["local", *(f"conc{i}" for i in range(WRITERS))])
    assert stat.S_IMODE((cli.home / "secrets" / "secrets.json").stat().st_mode) == 0o600
    assert not [p.name for p in cli.home.iterdir() if p.name.endswith(".tmp")]


def test_item5_a_bad_secrets_json_or_config_yaml_is_named_with_the_way_out(cli):
    ok = cli.spec("ok", "name: fine\ncommand: echo hi\n")
    secrets = cli.home / "secrets" / "secrets.json"
    secrets.parent.mkdir(mode=0o700, exist_ok=True)
    # An env record without options.env_key: `secret list` and every run said "internal error: KeyError".
    secrets.write_text(
        json.dumps(
            {
                "version": 1,
                "secrets": {"keyless": {"kind": "env", "data": {"value": "a-value-of-the-test"}, "options": {}}},
            }
        )
    )
    for r in (cli("secret", "list"), cli("run", "-f", str(ok))):
        refused(
            r,
            f"{secrets}: secret 'keyless': it is an env secret without options.env_key",
            "delete it with `launcher secret delete keyless`",
        )
    assert not (cli.home / "runs").exists() or not any((cli.home / "runs").iterdir())
    # The way out the hint names works.
    r = cli("secret", "delete", "keyless", "-y")
    assert r.returncode == 0, r.stderr
    assert secret_names(cli) == []

    # Garbage: not JSON, which the hint said was a matter of permissions.
    secrets.write_bytes(b"\x9c\xff\xfe garbage \x00\x01")
    err = refused(cli("secret", "list"), f"{secrets} is corrupt (not valid JSON", f"mv {secrets} {secrets}.corrupt")
    assert "permission" not in err
    secrets.write_text("{not json")
    refused(cli("secret", "list"), f"{secrets} is corrupt (not valid JSON: Expecting property name")
    secrets.write_text('{"version": ' + "1" * 5000 + "}")  # past Python's digit limit: a ValueError, not JSON's
    refused(cli("secret", "list"), f"{secrets} is corrupt (not valid JSON: a number in it has too many digits")
    secrets.unlink()

    config = cli.home / "config.yaml"
    config.write_bytes(bytes(range(256)))
    for r in (cli("cluster", "list"), cli("run", "-f", str(ok)), cli("cluster", "add", "x")):
        refused(r, f"{config}: not YAML text", f"mv {config} {config}.bad")
    assert config.read_bytes() == bytes(range(256))  # a refused change leaves it as it was


def rsa_pem(fmt=serialization.PrivateFormat.PKCS8) -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption()).decode()


def openssh_key() -> tuple[str, str]:
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    return private, public


def service_account(**changes) -> str:
    doc = {
        "type": "service_account",
        "project_id": "proj",
        "private_key_id": "0123456789abcdef",
        "private_key": rsa_pem(),
        "client_email": "trainer@proj.iam.gserviceaccount.com",
        "client_id": "1234567890",
        "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        "token_uri": "https://oauth2.googleapis.com/token",
    }
    doc.update(changes)
    return json.dumps({k: v for k, v in doc.items() if v is not None}, indent=2)


CREDENTIALS = "[default]\naws_access_key_id = AKIAEXAMPLEKEY012345\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG\n"


def bad_files():
    private, public = openssh_key()
    return [
        ("gcp", "not json at all", "secret 'gcp': its credentials file is not JSON (Expecting value: line 1 column 1)"),
        ("gcp", '["a list"]', "its credentials file is not a JSON object"),
        ("gcp", '{"n": ' + "1" * 5000 + "}", "its credentials file is not JSON that can be read (a number in it"),
        (
            "gcp",
            '{"installed": {"client_id": "x"}}',
            'its credentials file\'s "type" is None, not a Google credentials type',
        ),
        ("gcp", service_account(client_email=None), "its credentials file is a service_account without client_email"),
        (
            "gcp",
            service_account(private_key="not a key"),
            "its credentials file's private_key is not a PEM private key: it does not start with",
        ),
        (
            "s3",
            "AWS_ACCESS_KEY_ID=AKIAEXAMPLEKEY012345\n",
            "secret 's3': its credentials file is not an AWS INI file: line 1 comes before any [profile] header",
        ),
        (
            "s3",
            "[default]\nregion = us-east-1\n",
            "its credentials file has no profile with both aws_access_key_id and aws_secret_access_key (profiles: default)",
        ),
        ("s3", CREDENTIALS + "[default]\n", "its credentials file has the section [default] twice (line 4)"),
        ("ssh", public, "secret 'key': its key file is not a private key: it is a public key"),
        ("git-ssh", "hello\n", "its key file is not a private key: it does not start with a private key's -----BEGIN"),
        (
            "ssh",
            private.replace("-----END OPENSSH PRIVATE KEY-----", ""),
            "it has no -----END OPENSSH PRIVATE KEY----- line",
        ),
        (
            "git-ssh",
            "-----BEGIN OPENSSH PRIVATE KEY-----\n%%% not base64 %%%\n-----END OPENSSH PRIVATE KEY-----\n",
            "what lies between its BEGIN and END lines is not base64",
        ),
    ]


def create_args(kind: str, path) -> list[str]:
    if kind == "s3":
        return ["secret", "create", "s3", "--credentials", str(path)]
    if kind == "gcp":
        return ["secret", "create", "gcp", "--from", str(path)]
    return ["secret", "create", kind, "key", "--from", str(path)]


def test_item10_gcp_s3_and_ssh_files_that_are_not_their_kind_are_refused(cli):
    path = cli.cwd / "file"
    for kind, text, message in bad_files():
        path.write_text(text)
        err = refused(cli(*create_args(kind, path)), message)
        assert "AKIAEXAMPLEKEY012345" not in err and "wJalrXUtnFEMI" not in err  # never a value
    assert secret_names(cli) == []

    # Real ones of each kind still go in (and mcli's shapes: tests/cli/test_mcli_shapes.py).
    private, _ = openssh_key()
    good = [
        ("gcp", service_account()),
        ("s3", CREDENTIALS),
        ("ssh", private),
        ("git-ssh", rsa_pem(serialization.PrivateFormat.TraditionalOpenSSL)),
    ]
    for kind, text in good:
        path.write_text(text)
        r = cli(*create_args(kind, path), "--replace")
        assert r.returncode == 0, (kind, r.stderr)
    config = cli.cwd / "config"
    config.write_text("[profile other]\nregion = eu-west-1\n")
    path.write_text(CREDENTIALS)
    cli.spec("ok", "name: a\ncommand: x\n")
    refused(
        cli("secret", "create", "s3", "--credentials", str(path), "--config", str(cli.cwd / "ok.yaml"), "--replace"),
        "secret 's3': its config file is not an AWS INI file: line 1 comes before any [profile] header",
    )
    assert (
        cli("secret", "create", "s3", "--credentials", str(path), "--config", str(config), "--replace").returncode == 0
    )
    assert secret_names(cli) == ["gcp", "key", "s3"]
