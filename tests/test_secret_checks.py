"""launcher.secrets.kinds' checks of a secret: check_record (what every run needs of a stored
secret) and check_new (that, and a file that parses as its kind), for the shapes the CLI
tests leave aside."""

from __future__ import annotations

import base64
import json

import pytest

from launcher.secrets.kinds import Secret, SecretKind, check_new, check_record

serialization = pytest.importorskip(
    "cryptography.hazmat.primitives.serialization", reason="real keys need the dev extra's cryptography"
)
from cryptography.hazmat.primitives.asymmetric import ec

VALUES = ("a-password-of-the-test", "AKIAEXAMPLEKEY012345")


def docker(server: str, username: str, password: str = VALUES[0]) -> Secret:
    auth = base64.b64encode(f"{username}:{password}".encode()).decode()
    config = {"auths": {server: {"username": username, "password": password, "email": "", "auth": auth}}}
    return Secret("reg", SecretKind.DOCKER_REGISTRY, {".dockerconfigjson": json.dumps(config)}, {"server": server})


def test_encrypted_and_ec_pem_keys_are_private_keys():
    key = ec.generate_private_key(ec.SECP256R1())
    for fmt, encryption in [
        (serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()),
        (
            serialization.PrivateFormat.TraditionalOpenSSL,  # Proc-Type: and DEK-Info: headers
            serialization.BestAvailableEncryption(b"passphrase"),
        ),
        (serialization.PrivateFormat.PKCS8, serialization.BestAvailableEncryption(b"pass")),
        (serialization.PrivateFormat.OpenSSH, serialization.BestAvailableEncryption(b"pass")),
    ]:
        pem = key.private_bytes(serialization.Encoding.PEM, fmt, encryption).decode()
        assert check_new(Secret("k", SecretKind.SSH, {"private_key": pem})) is None, pem.splitlines()[:3]


@pytest.mark.parametrize(
    "secret, problem",
    [
        (docker("registry.example.com", "robot"), None),
        (
            docker("registry.example.com", "ro:bot"),
            "its username for registry.example.com holds a ':', which a registry's username:password auth cannot",
        ),
        (docker("", "robot"), "its server '' is not a registry host name"),
        (docker("two words", "robot"), "its server 'two words' is not a registry host name"),
        (Secret("reg", SecretKind.DOCKER_REGISTRY, {"username": "u", "password": VALUES[0], "server": "r.io"}), None),
        (
            Secret("reg", SecretKind.DOCKER_REGISTRY, {"username": "u", "server": "r.io"}),
            "its entry for r.io has no password",
        ),
        (
            Secret("db", SecretKind.DATABRICKS, {"host": "https://dbc-1234.cloud.databricks.com", "token": VALUES[0]}),
            None,
        ),
        (Secret("db", SecretKind.DATABRICKS, {"host": "dbc-1234.cloud.databricks.com", "token": VALUES[0]}), None),
        (
            Secret("db", SecretKind.DATABRICKS, {"host": "ftp://x", "token": VALUES[0]}),
            "its host 'ftp://x' is not a workspace URL",
        ),
        (
            Secret("db", SecretKind.DATABRICKS, {"host": "https://a b", "token": VALUES[0]}),
            "its host 'https://a b' is not a workspace URL",
        ),
        (
            Secret(
                "gcp",
                SecretKind.GCP,
                {
                    "credentials": json.dumps(
                        {
                            "type": "authorized_user",
                            "client_id": "i",
                            "client_secret": VALUES[0],
                            "refresh_token": VALUES[1],
                        }
                    )
                },
            ),
            None,
        ),
        (
            Secret("gcp", SecretKind.GCP, {"credentials": json.dumps({"type": "authorized_user", "client_id": "i"})}),
            "its credentials file is an authorized_user without client_secret, refresh_token",
        ),
        (
            Secret(
                "gcp",
                SecretKind.GCP,
                {
                    "credentials": json.dumps(
                        {
                            "type": "external_account",
                            "audience": "//iam",
                            "subject_token_type": "jwt",
                            "credential_source": {"file": "/var/run/token"},
                        }
                    )
                },
            ),
            None,
        ),
    ],
)
def test_kinds_with_a_shape(secret, problem):
    said = check_new(secret)
    assert said == problem if problem is None else said.startswith(problem), said
    assert not any(v in (said or "") for v in VALUES)


@pytest.mark.parametrize(
    "secret, problem",
    [
        (Secret("e", SecretKind.ENV, {"value": "v"}, {}), "it is an env secret without options.env_key"),
        (Secret("e", SecretKind.ENV, {"value": "v"}, {"env_key": ""}), "it is an env secret without options.env_key"),
        (
            Secret("e", SecretKind.ENV, {"value": "v"}, {"env_key": "A=B"}),
            "its options.env_key 'A=B' cannot name an environment variable",
        ),
        (Secret("e", SecretKind.ENV, {}, {"env_key": "A"}), "its data has no value"),
        (
            Secret("e", SecretKind.ENV, {"value": "bad \udcf2 surrogate"}, {"env_key": "A"}),
            "its value is not UTF-8 text",
        ),
        (Secret("f", SecretKind.FILE, {"value": "x"}, {"mount_path": 7}), "its options.mount_path is not a string"),
        (Secret("d", SecretKind.DATABRICKS, {"host": "https://x"}), "its data has no token"),
        (Secret("f", SecretKind.FILE, {"value": "a\0b"}, {"mount_path": "/m"}), None),  # a file may hold a NUL
        # A stored gcp secret is not parsed again on every read: one made before the check still lists.
        (Secret("g", SecretKind.GCP, {"credentials": "anything"}), None),
    ],
)
def test_what_every_run_needs_of_a_stored_secret(secret, problem):
    said = check_record(secret)
    assert said == problem if problem is None else said.startswith(problem), said
