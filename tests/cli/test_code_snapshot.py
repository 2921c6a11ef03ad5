"""`launcher run --code DIR` and `code:` in the spec on the local backend, through the real CLI:
the working tree's uncommitted files reach the run, ignored ones and credentials do not."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from launcher.errors import InputError
from launcher.sdk.code_selection import build
from launcher.spec.models import Code

SECRET = "pl4nted-s3cret-Value-7781"


def git_tree(root: Path) -> Path:
    """A checkout with one committed file, one uncommitted module and one ignored directory."""
    root.mkdir(parents=True, exist_ok=True)
    git = lambda *a: subprocess.run(["git", "-C", str(root), *a], check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    (root / "main.py").write_text("import helper\nprint('helper says', helper.WORD)\n")
    (root / ".gitignore").write_text("ignored/\n")
    git("add", "main.py", ".gitignore")
    git("-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "first")
    (root / "helper.py").write_text("WORD = 'uncommitted'\n")
    (root / "ignored").mkdir()
    (root / "ignored" / "weights.bin").write_text("not for the run\n")
    return root


def test_uncommitted_module_reaches_the_run_and_the_digest_is_recorded(cli):
    tree = git_tree(cli.cwd / "tree")
    spec = cli.spec(
        "snap",
        """\
        name: snap
        command: python main.py && ls -a
        """,
    )
    r = cli("run", "-f", str(spec), "--code", "tree", "--follow")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "helper says uncommitted" in r.stdout
    listed = set(r.stdout.split())
    assert {"main.py", "helper.py", ".gitignore"} <= listed
    assert "ignored" not in listed and ".git" not in listed
    record = cli.describe()
    digest = record["spec"]["code"]["digest"]
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest)
    assert f"Code:       {digest}" in cli("describe", "run").stdout
    assert digest == build(Code(path=str(tree))).digest  # the same tree packs to the same bytes


def test_code_in_the_spec_with_include_and_exclude_outside_git(cli):
    tree = cli.cwd / "plain"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "__init__.py").write_text("WORD = 'from the include'\n")
    (tree / "pkg" / "__pycache__").mkdir()
    (tree / "pkg" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (tree / "notes.txt").write_text("left out\n")
    (tree / "venv").mkdir()
    (tree / "venv" / "pyvenv.cfg").write_text("home = /usr\n")
    (tree / "venv" / "lib.py").write_text("\n")
    spec = cli.spec(
        "plain",
        """\
        name: plain
        command: find . -type f | sort && python -c "import pkg; print(pkg.WORD)"
        code: {path: plain, include: ["*.py", "*.cfg"], exclude: [notes.txt]}
        """,
    )
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "from the include" in r.stdout
    files = [line for line in r.stdout.splitlines() if line.startswith("./")]
    assert files == ["./pkg/__init__.py"], r.stdout


def test_packing_twice_gives_the_same_digest(tmp_path):
    tree = git_tree(tmp_path / "tree")
    (tree / "keys.py").write_text('HEADER = "-----BEGIN PRIVATE KEY-----"\n')  # code about keys is no key
    first = build(Code(path=str(tree)))
    (tree / "helper.py").touch()  # a new mtime: the same tree
    assert build(Code(path=str(tree))).data == first.data
    (tree / "helper.py").write_text("WORD = 'changed'\n")
    assert build(Code(path=str(tree))).digest != first.digest
    assert first.files == 4


def test_a_file_holding_a_secret_value_is_refused_naming_it(cli):
    assert cli("secret", "create", "env", "API_TOKEN", input=SECRET).returncode == 0
    tree = git_tree(cli.cwd / "tree")
    (tree / "config.py").write_text(f"TOKEN = '{SECRET}'\n")
    spec = cli.spec("s", "name: s\ncommand: 'true'\n")
    r = cli("run", "-f", str(spec), "--code", "tree")
    assert r.returncode == 2, r.stderr
    assert "config.py holds the value of the secret" in r.stderr and "Traceback" not in r.stderr
    assert SECRET not in r.stdout + r.stderr
    assert "--allow-file" in r.stderr
    assert "submitted" not in r.stdout + r.stderr
    assert cli("get", "runs", "-o", "json").stdout.strip() in ("[]", "")


@pytest.mark.parametrize(
    "name, body",
    [
        (".env", "A=1\n"),
        (
            "id_deploy",
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAE\n"
            "-----END OPENSSH PRIVATE KEY-----\n",
        ),
        ("credentials", "[default]\naws_access_key_id = AKIA0\naws_secret_access_key = x\n"),
    ],
)
def test_credentials_files_are_refused_unless_allowed(cli, name, body):
    tree = git_tree(cli.cwd / "tree")
    (tree / name).write_text(body)
    spec = cli.spec("c", f"name: c\ncommand: cat {name}\n")
    r = cli("run", "-f", str(spec), "--code", "tree")
    assert r.returncode == 2, r.stderr
    assert f"tree/{name}" in r.stderr and "never packs a secret" in r.stderr
    r = cli("run", "-f", str(spec), "--code", "tree", "--allow-file", f"tree/{name}", "--follow")
    assert r.returncode == 0, r.stdout + r.stderr
    assert body.splitlines()[0] in r.stdout


def test_a_tree_past_the_limit_is_refused_with_its_largest_files(tmp_path):
    import os

    tree = tmp_path / "big"
    (tree / "data").mkdir(parents=True)
    (tree / "data" / "blob.bin").write_bytes(os.urandom(300_000))
    (tree / "small.py").write_text("x = 1\n")
    with pytest.raises(InputError) as e:
        build(Code(path=str(tree)), limit=100_000, where="a test run")
    message = str(e.value) + (e.value.hint or "")
    assert "over the 97.7 KiB a test run takes" in message
    assert "data/blob.bin (293.0 KiB)" in message and "exclude: [data]" in message
    assert build(Code(path=str(tree), exclude=["data"]), limit=100_000).files == 1


def test_run_r_takes_no_code(cli):
    r = cli("run", "-r", "nothing", "--code", ".")
    assert r.returncode == 2 and "--code" in r.stderr


def test_dry_run_shows_the_snapshot(cli):
    git_tree(cli.cwd / "tree")
    spec = cli.spec("d", "name: d\ncommand: 'true'\n")
    r = cli("run", "-f", str(spec), "--code", "tree", "--dry-run", "-o", "json", "--backend", "local")
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["code"]["files"] == 3 and plan["code"]["digest"] == plan["run"]["code"]["digest"]


def test_a_bad_code_field_is_placed_in_the_spec(cli):
    spec = cli.spec("bad", "name: bad\ncommand: 'true'\ncode:\n  path: no-such-dir\n")
    r = cli("run", "-f", str(spec))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert re.search(r"bad\.yaml:\d+(:\d+)?: code\.path: \S+/no-such-dir is not a directory", r.stderr), r.stderr
    spec = cli.spec("typo", "name: typo\ncommand: 'true'\ncode: {paht: .}\n")
    r = cli("run", "-f", str(spec))
    assert r.returncode == 2 and "typo.yaml:3" in r.stderr and "paht" in r.stderr, r.stderr
