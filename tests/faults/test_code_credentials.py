"""Issue 36, item 1: `--code .` ships code, not credentials. Each credentials file the audit
found shipped from a working tree is refused by name or by content, naming the file and
why (exit 2, nothing submitted); a `.launcherignore` leaves files out as `.gitignore` does;
`--code` says what it ships and `--dry-run` lists it."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import pytest

from launcher.errors import InputError
from launcher.sdk.code_selection import build
from launcher.spec.models import Code
from tests.faults.conftest import refused

PEM = (
    "-----BEGIN PRIVATE KEY-----\n"
    + "".join("MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7" + "\n" for _ in range(4))
    + "-----END PRIVATE KEY-----\n"
)
SERVICE_ACCOUNT = json.dumps(
    {
        "type": "service_account",
        "project_id": "leak-4711",
        "private_key_id": "0123456789abcdef0123456789abcdef01234567",
        "private_key": PEM,
        "client_email": "trainer@leak-4711.iam.gserviceaccount.com",
        "token_uri": "https://oauth2.googleapis.com/token",
    },
    indent=2,
)
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYLEAKTEST4711"
PUTTY = (
    "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: deploy\nPublic-Lines: 2\n"
    "AAAAC3NzaC1lZDI1NTE5AAAAIOdnEo5Q8pyWdzN3hHT+d9v0CxWmd8U0Oa5c7m9JzxUp\nAAAA\n"
    "Private-Lines: 1\nAAAAIBrJgP1k0L8oEXAMPLEkeyPRIVATEl1nE4711abcdefgh\nPrivate-MAC: 00ff\n"
)
KUBECONFIG = (
    "apiVersion: v1\nkind: Config\nclusters:\n- cluster: {server: 'https://k8s.example.com'}\n  name: c\n"
    "users:\n- name: u\n  user:\n    client-key-data: " + base64.b64encode(PEM.encode()).decode() + "\n"
)

# (path in the tree, its text, what the refusal says)
CREDENTIALS = [
    ("sa.json", SERVICE_ACCOUNT, "private key"),  # the key is JSON-escaped: \n, not newlines
    (
        ".aws/credentials",
        f"[default]\naws_access_key_id: AKIALEAKTEST4711ABCD\naws_secret_access_key: {AWS_SECRET}\n",
        "AWS",
    ),
    ("deploy/creds.ini", f"[prod]\naws_secret_access_key = {AWS_SECRET}\n", "AWS"),
    (".envrc", "export WANDB_API_KEY=0123456789abcdef\n", ".envrc"),
    (".git-credentials", "https://user:ghp_leaktest4711@github.com\n", ".git-credentials"),
    (".kube/config", KUBECONFIG, "kubeconfig"),
    ("ops/cluster.yaml", KUBECONFIG, "kubeconfig"),
    (".docker/config.json", '{"auths": {"reg.example.com": {"auth": "cm9ib3Q6aHVudGVyMg=="}}}', "docker"),
    (".pypirc", "[pypi]\nusername = __token__\npassword = pypi-leaktest4711\n", ".pypirc"),
    (".npmrc", "//registry.npmjs.org/:_authToken=npm_leaktest4711\n", ".npmrc"),
    ("prod.env", "DB_PASSWORD=hunter2hunter2\n", "prod.env"),
    ("keys/deploy.ppk", PUTTY, "PuTTY"),
    ("notes/old-key.txt", PUTTY, "PuTTY"),
    ("infra/terraform.tfstate", '{"version": 4, "resources": []}\n', "terraform.tfstate"),
    ("escaped.txt", "KEY = " + json.dumps(PEM) + "\n", "private key"),
    ("secrets.json", '{"version": 1, "secrets": {}}\n', "secrets.json"),
]


def tree_with(root: Path, rel: str, text: str) -> Path:
    (root / "train.py").parent.mkdir(parents=True, exist_ok=True)
    (root / "train.py").write_text("print('training')\n")
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return root


@pytest.mark.parametrize("rel, text, why", CREDENTIALS, ids=[c[0] for c in CREDENTIALS])
def test_item1_a_credentials_file_is_refused_naming_it_and_why(tmp_path, rel, text, why):
    root = tree_with(tmp_path / "tree", rel, text)
    with pytest.raises(InputError) as e:
        build(Code(path=str(root)))
    message = e.value.message
    assert f"{root / rel} " in message and why in message and "never packs a secret" in message, message
    assert AWS_SECRET not in message and "hunter2" not in message
    # --allow-file lets one such file through, as before.
    assert build(Code(path=str(root)), allow_files=(str(root / rel),)).files == 2


def test_item1_code_that_handles_keys_is_no_credentials_file(tmp_path):
    root = tree_with(tmp_path / "tree", "auth.py", 'HEADER = "-----BEGIN PRIVATE KEY-----"\n')
    (root / "s3.py").write_text('boto3.client("s3", aws_secret_access_key=os.environ["AWS_SECRET"])\n')
    (root / "README.env.md").write_text("Put your keys in prod.env\n")
    assert build(Code(path=str(root))).files == 4


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_item1_the_launcher_home_inside_the_tree_is_refused_and_a_launcherignore_is_honoured(cli):
    tree = cli.cwd
    git(tree, "init", "-q")
    (tree / "train.py").write_text("print('trained')\n")
    (tree / "data").mkdir()
    (tree / "data" / "big.bin").write_bytes(b"\0" * 5000)
    (tree / "scratch.txt").write_text("not for the run\n")
    cli.env["LAUNCHER_HOME"] = str(tree / ".launcher")  # a home inside the working tree
    assert cli("secret", "create", "env", "API_TOKEN", input="leak-value-in-home-4711").returncode == 0
    spec = cli.spec("c", "name: c\ncommand: ls -a\nsecrets: []\n")
    r = cli("run", "-f", str(spec), "--code", ".", "--dry-run")
    refused(r, ".launcher/secrets/secrets.json", "launcher home")
    assert "leak-value-in-home-4711" not in r.stdout + r.stderr
    # A .launcherignore leaves out what it names, as a .gitignore does.
    (tree / ".launcherignore").write_text("# not shipped\n.launcher/\nscratch.txt\n")
    r = cli("run", "-f", str(spec), "--code", ".", "--dry-run", "-o", "json")
    assert r.returncode == 0, r.stderr
    # --code says what it ships: the count, the size, the largest files; --dry-run lists them.
    assert "code: ships 4 files" in r.stderr, r.stderr
    assert "largest: data/big.bin (4.9 KiB)" in r.stderr, r.stderr
    listed = [line.split()[1] for line in r.stderr.splitlines() if line.startswith("code:   ")]
    assert sorted(listed) == [".launcherignore", "c.yaml", "data/big.bin", "train.py"], r.stderr
    assert json.loads(r.stdout)["code"]["files"] == 4
    r = cli("run", "-f", str(spec), "--code", ".", "--follow")
    assert r.returncode == 0, r.stderr
    assert "code: ships 4 files" in r.stderr and "code:   " not in r.stderr  # listed by --dry-run only
    assert "scratch.txt" not in r.stdout and ".launcher" not in r.stdout.split()


def test_item1_any_stored_secrets_value_is_refused_not_only_the_runs(cli):
    assert cli("secret", "create", "env", "OTHER_TOKEN", input="stored-elsewhere-value-4711").returncode == 0
    tree = tree_with(cli.cwd / "tree", "config.py", "TOKEN = 'stored-elsewhere-value-4711'\n")
    spec = cli.spec("s", "name: s\ncommand: 'true'\nsecrets: []\n")
    r = cli("run", "-f", str(spec), "--code", str(tree))
    refused(r, "config.py holds the value of the secret other-token")
    assert "stored-elsewhere-value-4711" not in r.stdout + r.stderr
