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
from tests.forked_cli import launcher_command

KEY = "-----BEGIN KEY-----\nMIIEv+/base64==\nline-two-of-key\n-----END KEY-----\n"
VALUES = [*mask_candidates(KEY), *mask_candidates("tok-abcdef"), *mask_candidates("abcdabcd"), "cd-x"]
TEXT = f"start {KEY} middle tok-abcdef tok-abcde abcdabcdabcd-x partial abcdabc MIIEv+/base64==! line-two-of-key\n" * 4


def masked_in_chunks(text: str, sizes) -> str:
    stream = MaskingStream(Masker(VALUES))
    data, out, i = text.encode(), b"", 0
    for n in sizes:
        out += stream.feed(data[i : i + n])
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


def test_the_masker_without_its_one_pass_search_masks_alike():
    """Where ahocorasick_rs is missing (a zipapp pod's interpreter), every chunk is searched
    value by value: the same output, chunk by chunk."""
    program = (
        "import sys, random; sys.modules['ahocorasick_rs'] = None\n"
        "from tests.faults.test_masking import masked_in_chunks, TEXT, VALUES\n"
        "from launcher.secrets.mask import Masker\n"
        "assert Masker(VALUES)._occurs is None\n"
        "rng = random.Random(3)\n"
        "for _ in range(50):\n"
        "    print(repr(masked_in_chunks(TEXT, [rng.choice([1, 5, 64, 500]) for _ in range(len(TEXT))])))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[2]
    )
    assert done.returncode == 0, done.stderr
    assert Masker(VALUES)._occurs is not None  # this environment has it: the other path
    whole = repr(Masker(VALUES).mask(TEXT))
    assert done.stdout.splitlines() == [whole] * 50


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

    key = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        .decode()
    )
    email = "trainer@mask-test-4711.iam.gserviceaccount.com"
    return {
        "type": "service_account",
        "project_id": "mask-test-4711",
        "private_key_id": "7c0ffee" * 5 + "12345",
        "private_key": key,
        "client_email": email,
        "client_id": "109876543210987654321",
        "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        "token_uri": "https://oauth2.googleapis.com/token",
        "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
        "client_x509_cert_url": f"https://www.googleapis.com/robot/v1/metadata/x509/{email}",
        "universe_domain": "googleapis.com",
    }


AWS_KEY_ID = "AKIAMASKTEST4711ABCD"
AWS_SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYMASKTEST4711"
AWS_SESSION_TOKEN = "IQoJb3JpZ2luX2VjEMASKTEST+token/4711=="
AWS_CREDENTIALS = (
    f"[default]\naws_access_key_id = {AWS_KEY_ID}\naws_secret_access_key={AWS_SECRET_KEY}\n"
    f'aws_session_token = "{AWS_SESSION_TOKEN}"\n'
)
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
    return [
        key.strip(),
        json.dumps(key)[1:-1],
        "".join(key.splitlines()[1:-1]),
        *[line for line in key.splitlines() if "-----" not in line],
        sa["private_key_id"],
        sa["client_email"],
        sa["client_id"],
        sa["project_id"],
        AWS_KEY_ID,
        AWS_SECRET_KEY,
        AWS_SESSION_TOKEN,
    ]


def program(name: str, image: str = "") -> str:
    return (
        f"name: {name}\n{image}command: |\n  python - <<'EOF'\n"
        + "".join(f"  {line}\n" for line in PRINTER.strip().splitlines())
        + "  EOF\n"
    )


def create_credentials(run, directory: Path, *cluster: str) -> dict:
    sa = service_account()
    (directory / "sa.json").write_text(json.dumps(sa, indent=2) + "\n")
    (directory / "credentials").write_text(AWS_CREDENTIALS)
    (directory / "config").write_text(AWS_CONFIG)
    r = run("secret", "create", "gcp", "--from", str(directory / "sa.json"), *cluster)
    assert r.returncode == 0, r.stderr
    r = run(
        "secret",
        "create",
        "s3",
        "--credentials",
        str(directory / "credentials"),
        "--config",
        str(directory / "config"),
        *cluster,
    )
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
    assert [h for h in sweep(cli.home, values) if not h.startswith("secrets/secrets.json: ")] == []
    # Public settings stay readable: Google's endpoints, the AWS region.
    assert "public: https://oauth2.googleapis.com/token us-west-2\n" in cli("logs", "creds").stdout


def test_item1_gcp_key_and_s3_keys_printed_by_a_pod_are_masked(fake_kube_factory, launcher_home, tmp_path):
    """The same run on the fake cluster: the entrypoint in the pod (the stdlib zipapp, the
    default mode) masks before the kubelet keeps a line, and `launcher logs` reads only
    masked lines."""
    fake_kube = fake_kube_factory(profile={"entrypoint_mode": "zipapp"})
    env = {**os.environ, "LAUNCHER_HOME": str(launcher_home)}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*launcher_command(env), *args],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )

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
    config = {
        "auths": {
            "reg.example.com": {"username": "robot", "password": "hunter2-registry-pass", "email": "", "auth": auth}
        }
    }
    secret = Secret("reg", SecretKind.DOCKER_REGISTRY, {".dockerconfigjson": json.dumps(config)})
    masker = Masker(secret.masked_values())
    line = f"pass hunter2-registry-pass auth {auth} basic robot:hunter2-registry-pass"
    assert masker.mask(line) == "pass **** auth **** basic ****"
    # An auth without a password beside it (a config written by `docker login`).
    only_auth = {"auths": {"reg.example.com": {"auth": auth}}}
    assert Masker(mask_candidates(json.dumps(only_auth))).mask("hunter2-registry-pass") == "****"


def test_a_json_auth_field_that_is_not_base64_still_leaves_the_other_values_masked():
    # base64 of a non-ASCII string raises ValueError, not binascii.Error: it once ended the
    # walk over the document, and the values after it went unmasked.
    candidates = mask_candidates(json.dumps({"auth": "\u00e9t\u00e9", "password": "hunter-22"}))
    assert "hunter-22" in candidates


def test_each_line_of_an_ssh_key_and_its_body_are_masked():
    """As before issue 21 (a guard: the key is multi-line, not structured)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    from launcher.secrets.kinds import Secret, SecretKind

    key = (
        ed25519.Ed25519PrivateKey.generate()
        .private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption())
        .decode()
    )
    masker = Masker(Secret("deploy", SecretKind.GIT_SSH, {"private_key": key}).masked_values())
    body = key.splitlines()[1:-1]
    assert len(body) >= 3
    for line in body:
        assert masker.mask(f"line: {line}!") == "line: ****!"
    assert masker.mask("".join(body)) == "****"


def test_a_secret_files_last_newline_survives_masking(cli):
    """`cat` of a file secret, then the next line: the newline that ends the file is no
    part of what is masked (issue 22: it was swallowed, `****NEXT`)."""
    (cli.cwd / "cred").write_text("file-secret-value-9\n")
    r = cli("secret", "create", "file", "cred", "--from", str(cli.cwd / "cred"), "--mount-path", "/secrets/cred")
    assert r.returncode == 0, r.stderr
    spec = cli.spec("cat", 'name: cat\ncommand: |\n  cat "$SECRET_PATH_CRED"; echo NEXT\n')
    assert cli("run", "-f", str(spec), "--follow").returncode == 0
    assert "\n****\nNEXT\n" in cli("logs", "cat").stdout


# ---------------------------------------------------------------- item 1: the property
# Random secret values: a JSON credentials document (strings, PEM keys and nested objects
# in it), a PEM-like block, random bytes as the store takes a file (UTF-8 text: invalid
# sequences replaced). No value of 4 or more characters, nor any line of one, nor its
# JSON-escaped form, may survive the masker. No generated text holds "*": a value made of
# the mask's own characters would be found in the masked output without having leaked.

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from launcher.secrets.mask import PUBLIC_JSON_FIELDS

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
UNMASKABLE = "*+*+*+*+*"  # no value can be part of it: the program's output lies between two


def texts(**size) -> st.SearchStrategy[str]:
    return st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="*"), **size)


@st.composite
def pem_blocks(draw) -> tuple[str, list[str]]:
    """(the block, what it holds): its text and its base64 body as one line."""
    label = draw(st.sampled_from(["PRIVATE KEY", "RSA PRIVATE KEY", "OPENSSH PRIVATE KEY", "EC PRIVATE KEY"]))
    body = base64.b64encode(draw(st.binary(min_size=1, max_size=700))).decode()
    width = draw(st.sampled_from([64, 70, 76]))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    text = (
        f"-----BEGIN {label}-----{newline}"
        + "".join(body[i : i + width] + newline for i in range(0, len(body), width))
        + f"-----END {label}-----{newline}"
    )
    return text, [text, body]


def strings_in(doc) -> list[str]:
    if isinstance(doc, dict):
        return [s for v in doc.values() for s in strings_in(v)]
    return [doc] if isinstance(doc, str) else []


@st.composite
def credentials_documents(draw) -> tuple[str, list[str]]:
    """(the document, what it holds): its text and every string in it."""
    keys = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz_"), min_size=1, max_size=16).filter(
        lambda k: k not in PUBLIC_JSON_FIELDS
    )  # Google's public fields are not secret
    leaf = st.one_of(texts(max_size=60), pem_blocks().map(lambda p: p[0]))
    doc = draw(st.dictionaries(keys, st.one_of(leaf, st.dictionaries(keys, leaf, max_size=3)), min_size=1, max_size=6))
    text = json.dumps(doc, indent=draw(st.sampled_from([None, 2])), ensure_ascii=draw(st.booleans()))
    return text, [text, *strings_in(doc)]


binary_values = st.binary(min_size=1, max_size=300).map(
    lambda b: (lambda text: (text, [text]))(b.decode("utf-8", "replace").replace("*", ""))
)

secret_values = st.one_of(credentials_documents(), pem_blocks(), binary_values)


def must_not_appear(held: list[str]) -> set[str]:
    """Each value of 4 or more characters (stripped), each such line of it, its JSON-escaped form."""
    out = set()
    for value in held:
        for piece in [value, *value.split("\n"), *value.splitlines()]:
            if len(piece.strip()) >= MIN_MASK_LEN:
                out.add(piece.strip())
                out.add(json.dumps(piece.strip())[1:-1])
    return out


def printed(held: list[str], noise: str) -> str:
    """What a program prints of these values: each whole, line by line, JSON-escaped,
    between other text."""
    parts = []
    for value in held:
        parts += [noise, value, "\n", json.dumps(value), noise, json.dumps(value, ensure_ascii=False), "\n"]
        parts += [f"{noise}{line}{noise}\n" for line in value.split("\n")]
    return "".join(parts)


@settings(max_examples=250, deadline=None, database=None)
@given(
    secrets=st.lists(secret_values, min_size=1, max_size=3),
    noise=texts(max_size=8),
    cuts=st.lists(st.integers(1, 4096), max_size=30),
)
def test_item1_property_no_value_nor_line_of_it_survives_the_masker(secrets, noise, cuts):
    masker = Masker(c for text, _ in secrets for c in mask_candidates(text))
    held = [v for _, values in secrets for v in values]
    data = printed(held, noise).encode()
    stream, out, at = MaskingStream(masker), b"", 0
    for n in cuts:  # the pipe cuts the output anywhere, inside a UTF-8 character too
        out += stream.feed(data[at : at + n])
        at += n
    out += stream.feed(data[at:]) + stream.flush()
    masked = out.decode()
    assert masked == masker.mask(data.decode())
    assert [v for v in must_not_appear(held) if v in masked] == []


# End to end, a few examples per backend (a run each): the three values as file secrets,
# printed by the run whole, line by line, JSON-escaped, and each string of the document.
PROPERTY_PRINTER = r"""
import json, os
def strings(doc):
    if isinstance(doc, dict):
        for v in doc.values():
            yield from strings(v)
    elif isinstance(doc, str):
        yield doc
def read(name):
    with open(os.environ["SECRET_PATH_" + name], encoding="utf-8", newline="") as f:
        return f.read()
doc, pem, raw = read("PDOC"), read("PPEM"), read("PBIN")
print("%(marker)s")
for text in (doc, pem, raw, "".join(pem.splitlines()[1:-1]), *strings(json.loads(doc))):
    print(text)
    print(json.dumps(text), json.dumps(text, ensure_ascii=False))
    for line in text.split("\n"):
        print(line)
print("%(marker)s")
""" % {"marker": UNMASKABLE}  # noqa: UP031 - the program's own braces stay literal

e2e_examples = st.tuples(credentials_documents(), pem_blocks(), binary_values)
# No shrinking: a failing example is reported as it is (shrinking would take a run per try).
E2E = settings(
    max_examples=3,
    deadline=None,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def create_file_secrets(run, directory: Path, example, *cluster: str) -> list[str]:
    held = []
    for name, (text, values) in zip(("pdoc", "ppem", "pbin"), example):
        path = directory / name
        path.write_bytes(text.encode())
        r = run(
            "secret",
            "create",
            "file",
            name,
            "--from",
            str(path),
            "--mount-path",
            f"/secrets/{name}",
            "--replace",
            *cluster,
        )
        assert r.returncode == 0, r.stderr
        held += values
    return held


def program_output(text: str) -> str:
    """What the program printed: the text between its two markers, which it printed."""
    assert text.count(UNMASKABLE) == 2, text
    return text.split(UNMASKABLE)[1]


def property_spec(directory: Path, name: str, image: str = "") -> Path:
    path = directory / f"{name}.yaml"
    path.write_text(
        f"name: {name}\n{image}command: |\n  python - <<'EOF'\n"
        + "".join(f"  {line}\n" for line in PROPERTY_PRINTER.strip().splitlines())
        + "  EOF\n"
    )
    return path


def test_item1_property_end_to_end_on_the_local_backend(cli):
    runs = iter(range(1000))

    @E2E
    @given(example=e2e_examples)
    def check(example):
        held = create_file_secrets(cli, cli.cwd, example)
        name = f"prop-{next(runs)}"
        r = cli("run", "-f", str(property_spec(cli.cwd, name)), "--follow")
        assert r.returncode == 0, r.stderr
        hidden = must_not_appear(held)
        (log,) = (cli.home / "runs" / cli.describe()["name"]).rglob("rank-0.log")
        for what, text in (("rank-0.log", log.read_text()), ("launcher logs", cli("logs", name).stdout)):
            assert [v[:20] for v in hidden if v in program_output(text)] == [], what

    check()


def test_item1_property_end_to_end_on_the_fake_cluster(fake_kube_factory, launcher_home, tmp_path):
    fake_kube = fake_kube_factory(profile={"entrypoint_mode": "zipapp"})
    env = {**os.environ, "LAUNCHER_HOME": str(launcher_home)}
    runs = iter(range(1000))

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*launcher_command(env), *args],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )

    @E2E
    @given(example=e2e_examples)
    def check(example):
        held = create_file_secrets(run, tmp_path, example, "--cluster", "fake")
        name = f"prop-{next(runs)}"
        before = set(fake_kube.containers)
        r = run(
            "run", "-f", str(property_spec(tmp_path, name, "image: python:3.11\n")), "--cluster", "fake", "--follow"
        )
        assert r.returncode == 0, r.stderr
        hidden = must_not_appear(held)
        pods = wait_until(lambda: set(fake_kube.containers) - before, 30, message="the run's pod to have run")
        pod_log = "\n".join(text for uid in pods for _, text in fake_kube.containers[uid].lines)
        for what, text in (("the pod's log", pod_log), ("launcher logs", run("logs", name).stdout)):
            assert [v[:20] for v in hidden if v in program_output(text)] == [], what

    check()


def test_item1_a_file_secret_with_a_carriage_return_is_masked_as_the_run_prints_it(tmp_path):
    """Found by the end-to-end property test: the entrypoint read secret files with universal
    newlines, so a '\\r' became '\\n' and the JSON-escaped form the run printed ("...\\r...")
    was not among the strings masked."""
    from launcher.entrypoint.supervise import masker_from_env
    from launcher.pod import contract

    value = "\x7f\ufffd\r$\ufffd-tail"
    secret = tmp_path / "secret"
    secret.write_bytes(value.encode())
    masker = masker_from_env({contract.MASK_FILES: str(secret)})
    for printed_form in (json.dumps(value), json.dumps(value, ensure_ascii=False), value):
        assert masker.mask(printed_form).strip('"') == "****", printed_form
