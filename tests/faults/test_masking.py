"""Masking. As a pure function: the masking stream catches a value however the output is
cut into chunks, across lines, next to or overlapping another value. Issue 21, item 1:
every value a structured secret holds (a GCP key's fields and PEM lines, AWS keys, a
docker password) is masked in a run's logs on both backends, and a property test feeds
random credentials documents, PEM blocks and binary values."""

from __future__ import annotations

import base64
import json
import os
import random
import subprocess
import sys
from pathlib import Path

from launcher.secrets.mask import MIN_MASK_LEN, Masker, MaskingStream, mask_candidates
from tests.conftest import wait_until
from tests.faults.test_leaks import sweep

KEY = "-----BEGIN KEY-----\nMIIEv+/base64==\nline-two-of-key\n-----END KEY-----\n"
VALUES = [*mask_candidates(KEY), *mask_candidates("tok-abcdef"), *mask_candidates("abcdabcd"), "cd-x"]
TEXT = (f"start {KEY} middle tok-abcdef tok-abcde abcdabcdabcd-x partial abcdabc MIIEv+/base64==!"
        " line-two-of-key\n" * 4)


def masked_in_chunks(text: str, sizes) -> str:
    stream = MaskingStream(Masker(VALUES))
    data, out, i = text.encode(), b"", 0
    for n in sizes:
        out += stream.feed(data[i:i + n])
        i += n
        if i >= len(data):
            break
    out += stream.feed(data[i:]) + stream.flush()
    return out.decode()


def test_every_chunking_masks_like_the_whole_text():
    whole = Masker(VALUES).mask(TEXT)
    assert not any(v in whole for v in VALUES)
    assert "tok-abcde " in whole and "abcdabc " in whole  # near misses stay as they are
    rng = random.Random(12)
    for _ in range(300):
        sizes = [rng.choice([1, 2, 3, 7, 16, 64, 500]) for _ in range(len(TEXT))]
        assert masked_in_chunks(TEXT, sizes) == whole
    assert masked_in_chunks(TEXT, [1] * len(TEXT)) == whole


def test_a_value_split_at_the_end_is_held_back_until_it_is_known():
    stream = MaskingStream(Masker(["secret-value"]))
    assert stream.feed(b"line one\nsecret-") == b"line one\n"  # might be the start of the value
    assert stream.feed(b"val") == b""
    assert stream.feed(b"ue!\nsecret-v") == b"****!\n"
    assert stream.flush() == b"secret-v"  # the stream ended: it was not the value


def test_one_threshold_for_what_is_masked():
    assert mask_candidates("abc") == [] and mask_candidates("abcd") == ["abcd"] == mask_candidates(" abcd\n")
    assert "xy" not in mask_candidates("long-enough-line\nxy\n") and MIN_MASK_LEN == 4


# ---------------------------------------------------------------- item 1: structured secrets
# A run reads its credentials files and prints what it finds there: every value a secret
# holds is masked, not only the file's text and its lines. (The repro of issue 21, item 1.)

def service_account() -> dict:
    """A GCP service-account key file as Google writes one, with a real RSA key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    email = "trainer@mask-test-4711.iam.gserviceaccount.com"
    return {"type": "service_account", "project_id": "mask-test-4711", "private_key_id": "7c0ffee" * 5 + "12345",
            "private_key": key, "client_email": email, "client_id": "109876543210987654321",
            "auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": "https://oauth2.googleapis.com/token",
            "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
            "client_x509_cert_url": f"https://www.googleapis.com/robot/v1/metadata/x509/{email}",
            "universe_domain": "googleapis.com"}


AWS_KEY_ID = "AKIAMASKTEST4711ABCD"
AWS_SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYMASKTEST4711"
AWS_SESSION_TOKEN = "IQoJb3JpZ2luX2VjEMASKTEST+token/4711=="
AWS_CREDENTIALS = (f"[default]\naws_access_key_id = {AWS_KEY_ID}\naws_secret_access_key={AWS_SECRET_KEY}\n"
                   f"aws_session_token = \"{AWS_SESSION_TOKEN}\"\n")
AWS_CONFIG = "[default]\nregion = us-west-2\noutput = json\ns3 =\n  addressing_style = path\n"

# What the run prints: the GCP key alone, line by line, JSON-escaped (as json.dumps writes
# it, newlines as \n), its base64 body as one line, the other fields, and the AWS keys as
# botocore's configparser reads them.
PRINTER = r"""
import configparser, json, os
with open(os.environ["GOOGLE_APPLICATION_CREDENTIALS"]) as f:
    sa = json.load(f)
key = sa["private_key"]
print(key)
print(json.dumps(key))
print(json.dumps({"credentials": sa}))
print("".join(key.splitlines()[1:-1]))
print(key.splitlines()[3])
print(sa["private_key_id"], sa["client_email"], sa["client_id"])
aws = configparser.ConfigParser()
aws.read(os.environ["AWS_SHARED_CREDENTIALS_FILE"])
print(aws["default"]["aws_access_key_id"], aws["default"]["aws_secret_access_key"])
print(aws["default"]["aws_session_token"].strip('"'))
aws.read(os.environ["AWS_CONFIG_FILE"])
print("public:", sa["token_uri"], aws["default"]["region"])
print("printed every credential")
"""


def credential_values(sa: dict) -> list[str]:
    key = sa["private_key"]
    return [key.strip(), json.dumps(key)[1:-1], "".join(key.splitlines()[1:-1]),
            *[line for line in key.splitlines() if "-----" not in line],
            sa["private_key_id"], sa["client_email"], sa["client_id"], sa["project_id"],
            AWS_KEY_ID, AWS_SECRET_KEY, AWS_SESSION_TOKEN]


def program(name: str, image: str = "") -> str:
    return (f"name: {name}\n{image}command: |\n  python - <<'EOF'\n"
            + "".join(f"  {line}\n" for line in PRINTER.strip().splitlines()) + "  EOF\n")


def create_credentials(run, directory: Path, *cluster: str) -> dict:
    sa = service_account()
    (directory / "sa.json").write_text(json.dumps(sa, indent=2) + "\n")
    (directory / "credentials").write_text(AWS_CREDENTIALS)
    (directory / "config").write_text(AWS_CONFIG)
    r = run("secret", "create", "gcp", "--from", str(directory / "sa.json"), *cluster)
    assert r.returncode == 0, r.stderr
    r = run("secret", "create", "s3", "--credentials", str(directory / "credentials"),
            "--config", str(directory / "config"), *cluster)
    assert r.returncode == 0, r.stderr
    return sa


def assert_masked(text: str, values: list[str], what: str) -> None:
    assert "printed every credential" in text, f"{what}: {text}"
    leaked = [v[:16] for v in values if v in text]
    assert leaked == [], f"{what} holds {leaked}"
    assert text.count("****") >= 12, f"{what}: {text}"


def test_item1_gcp_key_and_s3_keys_printed_by_a_local_run_are_masked(cli):
    sa = create_credentials(cli, cli.cwd)
    r = cli("run", "-f", str(cli.spec("creds", program("creds"))), "--follow")
    assert r.returncode == 0, r.stderr
    values = credential_values(sa)
    logs = [p for p in cli.home.rglob("rank-0.log")]
    assert len(logs) == 1
    assert_masked(logs[0].read_text(), values, "rank-0.log")
    assert_masked(cli("logs", "creds").stdout, values, "launcher logs")
    assert_masked(r.stdout + r.stderr, values, "run --follow")
    # Nothing under the launcher home but the store holds a value.
    assert [h for h in sweep(cli.home, values) if not h.startswith("secrets.json: ")] == []
    # Public settings stay readable: Google's endpoints, the AWS region.
    assert "public: https://oauth2.googleapis.com/token us-west-2\n" in cli("logs", "creds").stdout


def test_item1_gcp_key_and_s3_keys_printed_by_a_pod_are_masked(fake_kube_factory, launcher_home, tmp_path):
    """The same run on the fake cluster: the entrypoint in the pod (the stdlib zipapp, the
    default mode) masks before the kubelet keeps a line, and `launcher logs` reads only
    masked lines."""
    fake_kube = fake_kube_factory(profile={"entrypoint_mode": "zipapp"})
    env = {**os.environ, "LAUNCHER_HOME": str(launcher_home)}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "launcher", *args], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)

    sa = create_credentials(run, tmp_path, "--cluster", "fake")
    spec = tmp_path / "creds.yaml"
    spec.write_text(program("podcreds", "image: python:3.11\n"))
    r = run("run", "-f", str(spec), "--cluster", "fake", "--follow")
    assert r.returncode == 0, r.stderr
    values = credential_values(sa)
    wait_until(lambda: fake_kube.containers, 30, message="the fake cluster to have run the pod's container")
    pod_logs = "\n".join(text for c in fake_kube.containers.values() for _, text in c.lines)
    assert_masked(pod_logs, values, "the pod's log")
    assert_masked(run("logs", "podcreds").stdout, values, "launcher logs")
    assert_masked(r.stdout + r.stderr, values, "run --follow")


def test_item1_docker_registry_password_and_auth_are_masked():
    """A docker-registry secret reaches no run's environment, but its password and its
    base64 auth are masked in whatever `launcher logs` shows all the same."""
    from launcher.secrets.kinds import Secret, SecretKind

    auth = base64.b64encode(b"robot:hunter2-registry-pass").decode()
    config = {"auths": {"reg.example.com": {"username": "robot", "password": "hunter2-registry-pass",
                                            "email": "", "auth": auth}}}
    secret = Secret("reg", SecretKind.DOCKER_REGISTRY, {".dockerconfigjson": json.dumps(config)})
    masker = Masker(secret.masked_values())
    line = f"pass hunter2-registry-pass auth {auth} basic robot:hunter2-registry-pass"
    assert masker.mask(line) == "pass **** auth **** basic ****"
    # An auth without a password beside it (a config written by `docker login`).
    only_auth = {"auths": {"reg.example.com": {"auth": auth}}}
    assert Masker(mask_candidates(json.dumps(only_auth))).mask("hunter2-registry-pass") == "****"


def test_a_secret_files_last_newline_survives_masking(cli):
    """`cat` of a file secret, then the next line: the newline that ends the file is no
    part of what is masked (issue 22: it was swallowed, `****NEXT`)."""
    (cli.cwd / "cred").write_text("file-secret-value-9\n")
    r = cli("secret", "create", "file", "cred", "--from", str(cli.cwd / "cred"), "--mount-path", "/secrets/cred")
    assert r.returncode == 0, r.stderr
    spec = cli.spec("cat", "name: cat\ncommand: |\n  cat \"$SECRET_PATH_CRED\"; echo NEXT\n")
    assert cli("run", "-f", str(spec), "--follow").returncode == 0
    assert "\n****\nNEXT\n" in cli("logs", "cat").stdout
