"""Shared fixtures. Each fake server lives in tests/fakes/ and registers its fixtures here."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")

# The suite runs as four pytest-xdist workers on 2 cores (README), and many tests
# start trainers: each process gets one torch/OpenMP thread, as torchrun gives each rank.
# With torch's default (a thread per core) the processes oversubscribe the cores and
# OpenMP's spinning threads made a tiny-MPT step 2-3x slower on 2 busy cores.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# The suite starts thousands of Python processes (ranks, supervisors, fake clusters,
# trainers) that import the launcher's modules. Where the environment says to write no
# bytecode (PYTHONDONTWRITEBYTECODE, as CI's image does) each one compiled them again from
# source: about 5 % of the suite's CPU. The caches go to __pycache__/ (git-ignored).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


def pytest_configure(config: pytest.Config) -> None:
    """Under --dist loadfile, pytest-xdist by default hands out the files with the most tests
    first, which leaves the trainings (files of one to three tests, each a minute or more)
    for the end: two of them queued on one worker while the other idles made the tail of the
    run minutes long. Without that reordering the workers take files in the collection's
    order, which pytest_collection_modifyitems below makes longest first."""
    if hasattr(config.option, "loadscopereorder") and "--loadscope-reorder" not in config.invocation_params.args:
        config.option.loadscopereorder = False


HEAVY_MARKS = ("slow", "train")
"""A file with a test of these marks starts processes that import torch and Composer, or a
browser, or Spark: a minute or more where most files take seconds."""


HEAVY_SPREAD = 0.5
"""The heavy files are handed out over this first share of the light ones."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The heavy files (`slow` ones, then `train` ones) spread over the first half of the
    run, each followed by a few of the light files, in their collected order (and every
    file's tests in theirs). A heavy file is CPU (torch, Composer, Spark); most light files
    wait on subprocesses and fake servers: three trainings at once on 2 cores slowed each
    other while later the workers waited with the cores idle. Starting every heavy file in
    the first half leaves the many short files to even out the workers at the end."""
    rank: dict[str, int] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        marks = {m.name for m in item.iter_markers()}
        level = next((i for i, mark in enumerate(HEAVY_MARKS) if mark in marks), len(HEAVY_MARKS))
        rank[path] = min(rank.get(path, level), level)
    heavy = sorted((p for p in rank if rank[p] < len(HEAVY_MARKS)), key=lambda p: rank[p])
    light = [p for p in dict.fromkeys(item.nodeid.split("::", 1)[0] for item in items) if p not in heavy]
    gap = int(len(light) * HEAVY_SPREAD / max(len(heavy), 1))
    order: list[str] = []
    for i, path in enumerate(heavy):
        order += [path, *light[i * gap : (i + 1) * gap]]
    order += light[len(heavy) * gap :]
    position = {path: i for i, path in enumerate(order)}
    items.sort(key=lambda item: position[item.nodeid.split("::", 1)[0]])


pytest_plugins: list[str] = [
    # "tests.fakes.<module>" lines are added as fakes land.
    "tests.fakes.databricks_files",
    "tests.fakes.kube_api",
    "tests.fakes.moto_s3",
]


def needs(module: str, reason: str | None = None) -> None:
    """Skip the calling test module where `module` is not installed, without importing it:
    pytest.importorskip imports it, and torch, Composer or Spark at collection cost each
    pytest-xdist worker seconds before any test runs."""
    import importlib.util

    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        pytest.skip(reason or f"could not import {module!r}", allow_module_level=True)


def wait_until(
    predicate: Callable[[], T],
    timeout: float,
    *,
    interval: float = 0.05,
    message: str | Callable[[], str] = "the condition",
) -> T:
    """Calls `predicate` until it returns something truthy, and returns that. Past `timeout`
    seconds the test fails, saying what it waited for (`message`, or what it returns when
    it is a function: the state at the deadline) and what `predicate` returned last.
    Tests poll with this instead of sleeping a fixed time: a fast machine does not wait for
    nothing, and a slow one gets until the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            last = repr(value)
            last = last if len(last) <= 500 else last[:500] + "..."
            what = message() if callable(message) else message
            pytest.fail(f"timed out after {timeout}s waiting for {what}; last value: {last}")
        time.sleep(interval)


def read_terminal(master: int) -> bytes:
    """What a program wrote to the other side of the pseudo-terminal `master` (pty.openpty),
    until its last writer closed that side; closes `master`."""
    shown = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: no writer is left
            break
        if not chunk:
            break
        shown.append(chunk)
    os.close(master)
    return b"".join(shown)


@pytest.fixture(scope="session", autouse=True)
def _fork_server() -> Iterator[None]:
    """The CLI's fork server (tests/forked_cli.py), started by the first call that uses it,
    is stopped with the session."""
    from tests.forked_cli import stop_server

    yield
    stop_server()


@pytest.fixture
def launcher_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private LAUNCHER_HOME, so tests never touch ~/.launcher. At teardown, whatever is
    still running with it (a run that a failing test never stopped) is killed: nothing a
    test starts outlives it."""
    home = tmp_path / "launcher-home"
    home.mkdir()
    monkeypatch.setenv("LAUNCHER_HOME", str(home))
    yield home
    kill_processes_of_home(home)


def pids_with_env(entry: str) -> list[int]:
    """Every process (this one aside) whose environment holds `entry` ("NAME=value")."""
    needle = entry.encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            if needle in Path(f"/proc/{name}/environ").read_bytes().split(b"\0"):
                found.append(int(name))
        except OSError:
            continue
    return found


def kill_processes_of_home(home: Path) -> list[int]:
    """SIGKILL every process started with LAUNCHER_HOME=home (the supervisors and ranks
    of its local runs inherit it); the pids killed."""
    killed = []
    for pid in pids_with_env(f"LAUNCHER_HOME={home}"):
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except OSError:
            continue
    return killed


@pytest.fixture(autouse=True)
def _no_user_launcher_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    if "LAUNCHER_HOME" not in os.environ:
        monkeypatch.setenv("LAUNCHER_HOME", str(tmp_path_factory.mktemp("default-home")))


def _image_mode(launcher_home) -> None:
    """The fake's unmapped images run the host's Python, which has the launcher: the
    `image` entrypoint mode. (Inject mode, with the runtime and a user's image mapped to
    directories, is what tests/kubernetes/test_jobset.py runs.)"""
    import yaml

    path = launcher_home / "config.yaml"
    config = yaml.safe_load(path.read_text())
    for settings in (config.get("clusters") or {}).values():
        settings.setdefault("entrypoint_mode", "image")
    path.write_text(yaml.safe_dump(config, sort_keys=False))


@pytest.fixture
def fake_kube(fake_kube, launcher_home):
    _image_mode(launcher_home)
    return fake_kube


@pytest.fixture
def fake_kube_factory(fake_kube_factory, launcher_home):
    def make(**options):
        kube = fake_kube_factory(**options)
        _image_mode(launcher_home)
        return kube

    return make


@pytest.fixture
def fake_kube_program(fake_kube_program, launcher_home):
    def start(*args, **options):
        kube = fake_kube_program(*args, **options)
        _image_mode(launcher_home)
        return kube

    return start
