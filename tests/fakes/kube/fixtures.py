"""pytest fixtures: the fake in this process (fake_kube, fake_kube_factory, fake_kueue) or
run as a program (fake_kube_program), and write_profile for a launcher cluster profile."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until
from tests.fakes.kube.client import RemoteKube
from tests.fakes.kube.cluster import FakeKube

REPO = Path(__file__).resolve().parents[3]
PROGRAM = REPO / "tests" / "fakes" / "kube_api.py"
STARTUP_SECONDS = 30
RUNTIME_ENV = "LAUNCHER_TEST_RUNTIME"
"""The kubelet runtime every fixture's fake uses: `process` (the default) or `runc` (.ci/run sets
it where runc and root are available; a test may still pass runtime= itself)."""


def test_runtime() -> str:
    return os.environ.get(RUNTIME_ENV) or "process"


test_runtime.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


class KubeProgram(RemoteKube):
    """The fake running as `python tests/fakes/kube_api.py`: its process, URL and kubeconfig,
    with the RemoteKube helpers (faults, count, evict, compact)."""

    def __init__(self, workdir: Path, *args: str):
        self.kubeconfig = workdir / "kubeconfig"
        self.log = workdir / "fake-kube.log"
        self._log = open(self.log, "wb")
        # --exit-with-parent: a test process that dies leaves no fake (nor its pods) behind.
        # A test that maps images to directories (process mode's PATH=DIR/bin) keeps process mode.
        if "--runtime" not in args and "--image" not in args and test_runtime() != "process":
            args = ("--runtime", test_runtime(), *args)
        self.proc = subprocess.Popen(
            [sys.executable, str(PROGRAM), "--kubeconfig", str(self.kubeconfig), "--exit-with-parent", *args],
            cwd=REPO,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            url = self._wait_ready()
        except BaseException:
            self.stop()
            raise
        super().__init__(url)

    def _wait_ready(self) -> str:
        import json

        def listening() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the fake exited with {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            return self.kubeconfig.exists()  # written once it listens

        wait_until(listening, STARTUP_SECONDS, message=lambda: f"the fake to listen: {self.log.read_text()[-2000:]}")
        return json.loads(self.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]

    def write_kubeconfig(self, path: Path, context: str = "fake") -> Path:
        shutil.copyfile(self.kubeconfig, path)
        return path

    def stop(self, timeout: float = 10) -> int:
        """SIGTERM, then SIGKILL of the whole process group if it lingers; the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


def write_profile(home: Path, kube: Any, *, name: str = "fake", **settings: Any) -> None:
    """Write $LAUNCHER_HOME/config.yaml with a Kubernetes profile that points at the fake
    (a FakeKube or a KubeProgram)."""
    import yaml

    kubeconfig = kube.write_kubeconfig(home / "kubeconfig")
    path = home / "config.yaml"
    config = (yaml.safe_load(path.read_text()) if path.exists() else {}) or {}
    config.setdefault("current", "local")
    config.setdefault("clusters", {})[name] = {
        "backend": "kubernetes",
        "kubeconfig": str(kubeconfig),
        "context": "fake",
        "namespace": "default",
        "image": "ghcr.io/example/launcher:test",
        **settings,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))


@pytest.fixture
def fake_kube(launcher_home: Path):
    """A running fake API server with its control plane, and a `fake` cluster profile in
    the test's LAUNCHER_HOME. Yields the FakeKube (faults, requests, pods, evict)."""
    kube = FakeKube(runtime=test_runtime()).start()
    write_profile(launcher_home, kube)
    try:
        yield kube
    finally:
        kube.close()


@pytest.fixture
def fake_kube_factory(launcher_home: Path):
    """Like fake_kube, with options: fake_kube_factory(nodes=[...], run_controllers=False,
    jobset=True, images={...}, runtime="runc", profile={...})."""
    made: list[FakeKube] = []

    def make(*, profile: dict | None = None, **options: Any) -> FakeKube:
        if "images" not in options:  # directories for process mode's PATH=DIR/bin
            options.setdefault("runtime", test_runtime())
        kube = FakeKube(**options).start()
        made.append(kube)
        write_profile(launcher_home, kube, **(profile or {}))
        return kube

    try:
        yield make
    finally:
        for kube in made:
            kube.close()


@pytest.fixture
def fake_kube_program(launcher_home: Path, tmp_path: Path):
    """Start the fake as a program: fake_kube_program("--nodes", "2", profile={...}).
    Writes the `fake` profile; the program is stopped (and its pods killed) at teardown."""
    made: list[KubeProgram] = []

    def start(*args: str, profile: dict | None = None) -> KubeProgram:
        workdir = tmp_path / f"fake-kube-{len(made)}"
        workdir.mkdir()
        prog = KubeProgram(workdir, *args)
        made.append(prog)
        write_profile(launcher_home, prog, **(profile or {}))
        return prog

    try:
        yield start
    finally:
        for prog in made:
            prog.stop()


@pytest.fixture
def fake_kueue(fake_kube_factory):
    """A factory for an in-process fake with JobSet and Kueue and a profile:
    fake_kueue(queues={"team": 8}, preempt=True, priority_classes={"high": 1000, "low": 10},
    topology={"rack": ["r1", "r2"]}, nodes=4, gpus_per_node=4, profile={...}, **FakeKube options).
    Each queue name is a ClusterQueue (its GPUs' nominalQuota, the nodes' cpu and memory)
    and a LocalQueue in namespace default; topology spreads the nodes over the values in
    blocks and makes Topology `default` for flavor `default` (kueue.configure)."""
    from tests.fakes.kube.kueue import configure, topology_nodes

    def make(
        *,
        queues: dict[str, int] | None = None,
        preempt: bool | set[str] = False,
        priority_classes: dict[str, int] | None = None,
        topology: dict[str, list[str]] | None = None,
        nodes: int = 4,
        gpus_per_node: int = 4,
        profile: dict | None = None,
        **options: Any,
    ) -> FakeKube:
        options.setdefault("jobset", True)
        kube = fake_kube_factory(
            nodes=topology_nodes(nodes, gpus_per_node, topology), kueue=True, profile=profile, **options
        )
        configure(
            kube.kueue,
            queues={"team": 8} if queues is None else queues,
            preempt=preempt,
            priority_classes=priority_classes,
            topology=list(topology or {}),
        )
        return kube

    return make
