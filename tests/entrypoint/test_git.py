"""The git_repo integration, against real repositories served as local paths,
file:// URLs, a `git daemon` and git's smart HTTP (with a token)."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from launcher.pod import contract
from tests.entrypoint.conftest import HOSTILE_BRANCH, commit_file, git, read_until

SHOW = "cat repo/which.txt; git -C repo rev-parse HEAD"


def git_spec(repo: str, **fields) -> dict:
    return {"command": SHOW, "integrations": [{"integration_type": "git_repo", "git_repo": repo, **fields}]}


def shown(out: str) -> tuple[str, str]:
    """(which.txt, HEAD) as the command printed them."""
    lines = [line for line in out.splitlines() if not line.startswith("[launcher]")]
    return lines[-2], lines[-1]


@pytest.mark.parametrize(
    "fields, expect",
    [
        ({}, ("main", "main")),
        ({"git_branch": "feature"}, ("feature-2", "feature_2")),
        ({"git_branch": "v1"}, ("v1", "v1")),
        ({"git_commit": "FEATURE_1"}, ("feature-1", "feature_1")),
        # git_commit wins over git_branch
        ({"git_commit": "FEATURE_1", "git_branch": "main"}, ("feature-1", "feature_1")),
        ({"git_commit": "FEATURE_1_SHORT", "git_branch": "v1"}, ("feature-1", "feature_1")),
    ],
    ids=["default", "branch", "tag", "commit", "commit-beats-branch", "short-commit"],
)
def test_checks_out_default_branch_tag_or_commit(entry, origin, fields, expect):
    fields = dict(fields)
    if fields.get("git_commit") == "FEATURE_1":
        fields["git_commit"] = origin.feature_1
    elif fields.get("git_commit") == "FEATURE_1_SHORT":
        fields["git_commit"] = origin.feature_1[:10]
    r = entry.run(git_spec(str(origin.bare), path="repo", **fields))
    assert r.code == 0, r.out
    assert shown(r.out) == (expect[0], getattr(origin, expect[1]))
    assert "[launcher] integration 1/1: git_repo" in r.out
    assert f"[launcher] git_repo: {entry.workdir / 'repo'} is at {getattr(origin, expect[1])} (" in r.out


def test_clones_file_url_and_git_daemon(entry, origin, git_daemon):
    r = entry.run(git_spec(f"file://{origin.bare}", path="repo", git_branch="feature"))
    assert r.code == 0, r.out
    assert shown(r.out) == ("feature-2", origin.feature_2)

    shutil.rmtree(entry.workdir / "repo")
    (entry.config_dir / ".integrations-done").unlink()
    r = entry.run(git_spec(f"{git_daemon}/org/repo.git", path="repo", git_commit=origin.v1))
    assert r.code == 0, r.out
    assert shown(r.out) == ("v1", origin.v1)
    assert git("remote", "get-url", "origin", cwd=entry.workdir / "repo") == f"{git_daemon}/org/repo.git"


def test_default_path_is_the_repo_name_under_the_workdir(entry, origin):
    r = entry.run(
        {
            "command": "cat repo/which.txt && pwd",
            "integrations": [{"integration_type": "git_repo", "git_repo": str(origin.bare)}],
        }
    )
    assert r.code == 0, r.out
    assert r.out.splitlines()[-3:-1] == ["main", str(entry.workdir)]


def test_existing_branch_with_shell_syntax_in_its_name_is_just_a_name(entry, origin):
    r = entry.run(git_spec(str(origin.bare), path="repo", git_branch=HOSTILE_BRANCH))
    assert r.code == 0, r.out
    assert shown(r.out)[0] == "hostile"
    for where in (entry.workdir, entry.workdir / "repo", entry.home, entry.run_dir):
        assert not (where / "pwned").exists() and not (where / "pwned2").exists()


def test_hostile_missing_branch_fails_cleanly_and_runs_nothing(entry, origin):
    sentinel = entry.home / "keep-me"
    sentinel.write_text("still here")
    spec = git_spec(str(origin.bare), path="repo", git_branch="x; rm -rf ~")
    spec["command"] = "touch command-ran"
    r = entry.run(spec)
    assert r.code == contract.EXIT_INTEGRATION, r.out
    assert sentinel.read_text() == "still here"
    assert "[launcher] error: integration 1/1: git_repo" in r.out
    assert "git clone failed with exit code 128" in r.out
    # git's own explanation is among the output lines quoted in the failure message
    assert "[launcher]   | fatal: Remote branch x; rm -rf ~ not found in upstream origin" in r.out
    assert not (entry.workdir / "repo").exists()  # no half clone left behind
    assert not (entry.workdir / "command-ran").exists()


def test_missing_commit_names_the_commit(entry, origin):
    r = entry.run(git_spec(str(origin.bare), path="repo", git_commit="deadbeef12"))
    assert r.code == contract.EXIT_INTEGRATION, r.out
    assert "commit deadbeef12 is not on any branch or tag" in r.out


def test_refuses_to_clone_over_an_existing_directory(entry, origin):
    (entry.workdir / "repo").mkdir()
    (entry.workdir / "repo" / "mine.txt").write_text("user data")
    r = entry.run(git_spec(str(origin.bare), path="repo"))
    assert r.code == contract.EXIT_INTEGRATION
    assert "already exists and is not empty" in r.out
    assert (entry.workdir / "repo" / "mine.txt").read_text() == "user data"


def test_submodules_with_git_clone_recursive(entry, tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    git("init", "-q", "-b", "main", cwd=lib)
    commit_file(lib, "lib.txt", "from the submodule\n", "lib")
    parent = tmp_path / "parent"
    parent.mkdir()
    git("init", "-q", "-b", "main", cwd=parent)
    git("-c", "protocol.file.allow=always", "submodule", "-q", "add", str(lib), "lib", cwd=parent)
    git("commit", "-q", "-m", "with submodule", cwd=parent)
    # git refuses file:// submodules unless allowed; the entrypoint adds its own
    # GIT_CONFIG_* entries after this one rather than replacing it.
    allow = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "protocol.file.allow", "GIT_CONFIG_VALUE_0": "always"}
    spec = {
        "command": "cat parent/lib/lib.txt",
        "integrations": [{"integration_type": "git_repo", "git_repo": str(parent), "git_clone_recursive": True}],
    }
    r = entry.run(spec, extra=allow)
    assert r.code == 0, r.out
    assert "from the submodule" in r.out


def test_https_token_goes_in_a_header_never_argv_config_or_log(entry, origin, git_http, tmp_path):
    token = "tok_Zq8s7d6f5g4h3j2k1l0"
    server = git_http(token=token)
    # Record every git invocation's arguments (a wrapper ahead of the real git on PATH).
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    argv_log = tmp_path / "git-argv.log"
    (bin_dir / "git").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{argv_log}"\nexec {shutil.which("git")} "$@"\n')
    (bin_dir / "git").chmod(0o755)
    spec = git_spec(f"{server.url}/org/repo.git", path="repo", git_branch="feature")
    spec["command"] = (
        'echo "command sees a token of ${#GIT_TOKEN} characters, GIT_CONFIG_COUNT=${GIT_CONFIG_COUNT:-unset}"; ' + SHOW
    )
    extra = {"GIT_TOKEN": token, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    r = entry.run(spec, extra=extra)
    assert r.code == 0, r.out
    assert f"command sees a token of {len(token)} characters, GIT_CONFIG_COUNT=unset" in r.out
    assert "[launcher] git_repo: authenticating to 127.0.0.1" in r.out and "$GIT_TOKEN" in r.out
    assert shown(r.out)[0] == "feature-2"
    # The server saw the token on every request.
    assert server.requests and all(ok and auth for _m, _p, auth, ok in server.requests)
    # ... and it is nowhere else: not in the log, not in any git argv, not in the clone.
    assert token not in r.out
    recorded = argv_log.read_text()
    assert "clone" in recorded
    assert token not in recorded and "authorization" not in recorded.lower() and "extraheader" not in recorded.lower()
    for f in (entry.workdir / "repo" / ".git").rglob("*"):
        if f.is_file():
            assert token.encode() not in f.read_bytes(), f
    assert git("remote", "get-url", "origin", cwd=entry.workdir / "repo") == f"{server.url}/org/repo.git"


def test_https_without_the_token_fails_without_hanging(entry, origin, git_http):
    server = git_http(token="tok_required_by_the_server")
    r = entry.run(git_spec(f"{server.url}/org/repo.git", path="repo"), timeout=30)
    assert r.code == contract.EXIT_INTEGRATION, r.out
    assert "git clone failed with exit code 128" in r.out
    assert "terminal prompts disabled" in r.out
    assert server.requests and not any(ok for *_, ok in server.requests)


def test_ssh_clone_uses_git_ssh_command_and_git_at_host(entry, origin, tmp_path):
    # A stand-in for ssh that serves the repository locally, as sshd + git-upload-pack would.
    args_log = tmp_path / "ssh-args.log"
    fake_ssh = tmp_path / "fake-ssh"
    fake_ssh.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{args_log}"\n'
        f'for last; do :; done\ncd "{origin.root}" && exec sh -c "$last"\n'
    )
    fake_ssh.chmod(0o755)
    spec = {
        "command": "cat repo/which.txt",
        "integrations": [
            {
                "integration_type": "git_repo",
                "git_repo": "org/repo",
                "host": "git.example.invalid",
                "ssh_clone": True,
                "git_branch": "feature",
                "path": "repo",
            }
        ],
    }
    extra = {"GIT_SSH_COMMAND": str(fake_ssh), "GIT_SSH_VARIANT": "simple", "GITHUB_TOKEN": "tok_unused_for_ssh"}
    r = entry.run(spec, extra=extra)
    assert r.code == 0, r.out
    assert r.out.splitlines()[-2] == "feature-2"
    assert "git@git.example.invalid git-upload-pack 'org/repo.git'" in args_log.read_text()
    assert git("remote", "get-url", "origin", cwd=entry.workdir / "repo") == "git@git.example.invalid:org/repo.git"
    assert "authenticating" not in r.out


def test_url_password_is_not_logged(entry, origin):
    r = entry.run(git_spec("https://user:hunter2pass@git.example.invalid/org/repo.git", path="repo"), timeout=30)
    assert r.code == contract.EXIT_INTEGRATION
    assert "https://user:****@git.example.invalid/org/repo.git" in r.out


@pytest.fixture(autouse=True)
def _no_stray_pwned_files():
    yield
    assert not Path("pwned").exists() and not Path("pwned2").exists()


def test_sigterm_during_a_clone_stops_it_and_the_run(entry, tmp_path):
    slow_ssh = tmp_path / "slow-ssh"
    slow_ssh.write_text('#!/bin/sh\necho "ssh connecting" >&2\nexec sleep 60\n')
    slow_ssh.chmod(0o755)
    spec = {
        "command": "touch command-ran",
        "integrations": [
            {
                "integration_type": "git_repo",
                "git_repo": "org/repo",
                "ssh_clone": True,
                "host": "git.example.invalid",
                "path": "repo",
            }
        ],
    }
    proc = entry.start(spec, extra={"GIT_SSH_COMMAND": str(slow_ssh), "GIT_SSH_VARIANT": "simple"})
    read_until(proc, "ssh connecting")
    proc.send_signal(signal.SIGTERM)
    rest = proc.communicate(timeout=20)[0]
    assert proc.returncode == 128 + signal.SIGTERM, rest
    assert "stopped by SIGTERM before the command started" in rest
    assert not (entry.workdir / "repo").exists() and not (entry.workdir / "command-ran").exists()
