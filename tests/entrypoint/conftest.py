"""Helpers for the entrypoint tests: real git repositories in temporary
directories, and the entrypoint run as a subprocess with the backend contract's
environment, exactly as a user's run starts it."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.fakes.git_http import GitHTTPServer

HOSTILE_BRANCH = "x;touch${IFS}pwned$(touch${IFS}pwned2)"
HERMETIC_GIT = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}
# Prefixes of variables from the developer's shell that would change what the entrypoint does.
DROPPED = (
    "LAUNCHER_",
    "GIT_",
    "PIP_",
    "PET_",
    "NODE_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_",
    "JOB_COMPLETION_INDEX",
    "VIRTUAL_ENV",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GITLAB_TOKEN",
)


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **HERMETIC_GIT}, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def commit_file(repo: Path, name: str, text: str, message: str) -> str:
    (repo / name).write_text(text)
    git("add", name, cwd=repo)
    git("commit", "-q", "-m", message, cwd=repo)
    return git("rev-parse", "HEAD", cwd=repo)


@dataclass
class Origin:
    """A repository with commits on two branches, a tag and an oddly named branch,
    published as a bare repository at <root>/org/repo.git."""

    root: Path
    bare: Path
    v1: str
    main: str
    feature_1: str
    feature_2: str


@pytest.fixture(scope="session")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Origin:
    base = tmp_path_factory.mktemp("origin")
    work = base / "work"
    work.mkdir()
    git("init", "-q", "-b", "main", cwd=work)
    v1 = commit_file(work, "which.txt", "v1\n", "first")
    git("tag", "v1", cwd=work)
    main = commit_file(work, "which.txt", "main\n", "second")
    git("checkout", "-q", "-b", "feature", cwd=work)
    feature_1 = commit_file(work, "which.txt", "feature-1\n", "feature one")
    feature_2 = commit_file(work, "which.txt", "feature-2\n", "feature two")
    git("checkout", "-q", "-b", HOSTILE_BRANCH, main, cwd=work)
    commit_file(work, "which.txt", "hostile\n", "odd branch")
    git("checkout", "-q", "main", cwd=work)
    root = base / "served"
    bare = root / "org" / "repo.git"
    bare.parent.mkdir(parents=True)
    git("clone", "-q", "--bare", str(work), str(bare), cwd=base)
    return Origin(root, bare, v1, main, feature_1, feature_2)


@pytest.fixture(scope="session")
def pkg_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository holding a tiny installable package whose build needs nothing
    from the network (an in-tree PEP 517 backend)."""
    repo = tmp_path_factory.mktemp("pkg") / "tinyrepo"
    (repo / "tinypkg").mkdir(parents=True)
    (repo / "tinypkg" / "__init__.py").write_text('GREETING = "hello from tinypkg"\n')
    (repo / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "tinybackend"\nbackend-path = ["."]\n'
    )
    shutil.copy(Path(__file__).with_name("tinybackend.py"), repo / "tinybackend.py")
    git("init", "-q", "-b", "main", cwd=repo)
    git("add", ".", cwd=repo)
    git("commit", "-q", "-m", "tiny package", cwd=repo)
    return repo


@pytest.fixture
def git_http(origin: Origin):
    servers: list[GitHTTPServer] = []

    def start(token: str | None = None) -> GitHTTPServer:
        servers.append(GitHTTPServer(origin.root, token=token).start())
        return servers[-1]

    yield start
    for s in servers:
        s.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def git_daemon(origin: Origin):
    port = free_port()
    proc = subprocess.Popen(
        [
            "git",
            "daemon",
            "--reuseaddr",
            "--export-all",
            f"--base-path={origin.root}",
            "--listen=127.0.0.1",
            f"--port={port}",
            str(origin.root),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: listening(port), 10, message=f"git daemon to listen on port {port}")
        yield f"git://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def read_until(proc: subprocess.Popen, text: str, timeout: float = 20) -> str:
    """Read a running entrypoint's output until a line contains `text`."""
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if text in line:
            return "".join(seen)
    raise AssertionError(f"{text!r} never appeared in:\n{''.join(seen)}")


@dataclass
class Result:
    code: int
    out: str


class Entrypoint:
    """One run's directories; `run` and `start` launch `python -m launcher.entrypoint`
    for one node rank with the contract's environment."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.workdir = tmp / "work"
        self.run_dir = tmp / "run"
        self.home = tmp / "home"
        for d in (self.workdir, self.run_dir, self.home):
            d.mkdir(exist_ok=True)
        self.config_dir = self.run_dir / "config"
        self.venv = self.run_dir / "venv"
        self.started: list[subprocess.Popen] = []

    def env(
        self,
        spec: dict,
        *,
        rank: int | None = 0,
        nodes: int = 1,
        port: int | None = None,
        extra: dict[str, str] | None = None,
    ) -> dict[str, str]:
        spec = {"name": "test-run", **spec}
        spec_file = self.run_dir / f"spec-{rank}.json"
        spec_file.write_text(json.dumps(spec))
        env = {k: v for k, v in os.environ.items() if not k.startswith(DROPPED)}
        env.update(
            {
                "HOME": str(self.home),
                "GIT_CONFIG_NOSYSTEM": "1",
                "LAUNCHER_SPEC": str(spec_file),
                "LAUNCHER_BACKEND": "local",
                "LAUNCHER_ON_HOST": "1",
                "LAUNCHER_CONFIG_DIR": str(self.config_dir),
                "LAUNCHER_WORKDIR": str(self.workdir),
                "LAUNCHER_NODES": str(nodes),
                "LAUNCHER_GPUS_PER_NODE": "0",
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port or 29500),
            }
        )
        if rank is not None:
            env["NODE_RANK"] = str(rank)
        env.update(extra or {})
        return env

    def start(self, spec: dict, prefix: tuple[str, ...] = (), **kw) -> subprocess.Popen:
        proc = subprocess.Popen(
            [*prefix, sys.executable, "-m", "launcher.entrypoint"],
            env=self.env(spec, **kw),
            cwd=self.workdir,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # like a backend: a signal to the test run does not reach it
        )
        self.started.append(proc)
        return proc

    def kill_all(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait()

    def run(self, spec: dict, timeout: float = 90, prefix: tuple[str, ...] = (), **kw) -> Result:
        proc = self.start(spec, prefix=prefix, **kw)
        out, _ = proc.communicate(timeout=timeout)
        return Result(proc.returncode, out)


@pytest.fixture
def entry(tmp_path: Path):
    e = Entrypoint(tmp_path)
    yield e
    e.kill_all()  # a failed test leaves no entrypoint (or command) running
