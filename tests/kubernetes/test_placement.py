"""Placement across clusters and failover (launcher.sdk.placement), against two fake
clusters run as programs, each a profile of its own, as a user runs `launcher run`:
a run placed on the second because the first has no free GPUs, one that fails over
after placement.max_queue, and one that goes to the second because the first cannot be
reached (a closed port) or does not answer (a socket that accepts and never replies).
And the ClusterQueue arithmetic, on ClusterQueue-shaped objects."""

from __future__ import annotations

import json
import re
import socket
import threading
from pathlib import Path

import pytest
import yaml

from launcher.backends.kubernetes.kueue import cluster_queue_gpus
from tests.cli.conftest import CLI
from tests.conftest import wait_until
from tests.fakes.kube.fixtures import KubeProgram

H100 = "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3"
SPEC = """\
name: placed
image: ghcr.io/example/launcher:test
command: echo placed-and-done
compute:
  gpus: 8
  gpu_type: h100_80gb
"""


@pytest.fixture
def cli(launcher_home: Path, tmp_path: Path) -> CLI:
    work = tmp_path / "work"
    work.mkdir()
    return CLI(launcher_home, work)


class Clusters:
    """Fake clusters as programs, one profile each (gke-a, gke-b, ...), of one 8-GPU H100
    node; and profiles that point at a closed port or a socket that never answers."""

    def __init__(self, home: Path, tmp_path: Path):
        self.home, self.tmp = home, tmp_path
        self.programs: dict[str, KubeProgram] = {}
        self.silent: list[socket.socket] = []

    def start(self, name: str) -> KubeProgram:
        work = self.tmp / f"fake-{name}"
        work.mkdir()
        prog = KubeProgram(work, "--nodes", "1", "--gpus-per-node", "8", "--node-label", H100)
        self.programs[name] = prog
        self._profile(name, prog.kubeconfig)
        return prog

    def unreachable(self, name: str) -> None:
        """A profile whose server is a port nothing listens on."""
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self._profile(name, self._kubeconfig(name, f"https://127.0.0.1:{port}"))

    def hanging(self, name: str) -> None:
        """A profile whose server takes connections and never answers."""
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        self.silent.append(s)
        held: list[socket.socket] = []

        def accept() -> None:
            while True:
                try:
                    held.append(s.accept()[0])
                except OSError:
                    return

        threading.Thread(target=accept, daemon=True).start()
        self._profile(name, self._kubeconfig(name, f"https://127.0.0.1:{s.getsockname()[1]}"))

    def _kubeconfig(self, name: str, server: str) -> Path:
        any_program = next(iter(self.programs.values()))
        config = json.loads(any_program.kubeconfig.read_text())
        config["clusters"][0]["cluster"]["server"] = server
        path = self.tmp / f"kubeconfig-{name}"
        path.write_text(json.dumps(config))
        return path

    def _profile(self, name: str, kubeconfig: Path) -> None:
        path = self.home / "config.yaml"
        config = (yaml.safe_load(path.read_text()) if path.exists() else {}) or {}
        config.setdefault("current", "local")
        config.setdefault("clusters", {})[name] = {
            "backend": "kubernetes",
            "kubeconfig": str(kubeconfig),
            "context": "fake",
            "namespace": "default",
            "image": "ghcr.io/example/launcher:test",
            "entrypoint_mode": "image",
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))

    def close(self) -> None:
        for s in self.silent:
            s.close()
        for prog in self.programs.values():
            prog.stop()


@pytest.fixture
def clusters(launcher_home: Path, tmp_path: Path):
    made = Clusters(launcher_home, tmp_path)
    try:
        yield made
    finally:
        made.close()


def hold_gpus(cli: CLI, cluster: str) -> str:
    """Another run that takes every GPU of `cluster` (RUNNING); its name."""
    holder = cli.spec(
        "holder", SPEC.replace("name: placed", "name: holder").replace("echo placed-and-done", "sleep 600")
    )
    r = cli("run", "-f", str(holder), "--cluster", cluster)
    assert r.returncode == 0, r.stderr
    name = re.search(r"Run (holder-\w+) submitted", r.stdout + r.stderr).group(1)
    cli.wait_status(name, {"RUNNING"}, timeout=60)
    return name


def both_clusters_full(cli: CLI, clusters) -> str:
    """gke-a and gke-b started, every GPU of each held by another run; gke-b's holder."""
    clusters.start("gke-a")
    clusters.start("gke-b")
    hold_gpus(cli, "gke-a")
    holder_b = hold_gpus(cli, "gke-b")
    wait_until(lambda: free_h100(cli, "gke-a") == free_h100(cli, "gke-b") == 0, 30, interval=0.2)
    return holder_b


def free_h100(cli: CLI, cluster: str) -> int:
    r = cli("util", "--cluster", cluster, "-o", "json")
    assert r.returncode == 0, r.stderr
    return next(u["free"] for u in json.loads(r.stdout) if u["gpu_type"] == "h100_80gb")


def listed(cli: CLI) -> list[dict]:
    """`get runs -o json`, which must succeed each time it is asked."""
    r = cli("get", "runs", "-o", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def describe_text(cli: CLI, name: str) -> str:
    r = cli("describe", name, "--no-yaml")
    assert r.returncode == 0, r.stderr
    return r.stdout


def submitted_name(r) -> str:
    return re.search(r"Run (placed-\w+)", r.stdout + r.stderr).group(1)


def test_a_run_is_placed_on_the_second_cluster_when_the_first_has_no_free_gpus(cli, clusters):
    clusters.start("gke-a")
    clusters.start("gke-b")
    hold_gpus(cli, "gke-a")
    wait_until(lambda: free_h100(cli, "gke-a") == 0, 30, interval=0.2)
    spec = cli.spec("placed", SPEC)
    r = cli("run", "-f", str(spec), "--cluster", "gke-a,gke-b", "--follow")
    assert r.returncode == 0, r.stderr
    assert (
        "i placement: gke-a has 0 of 8 free h100_80gb, gke-b has 8 of 8 free h100_80gb: placed on gke-b"
        in r.stderr.splitlines()
    ), r.stderr
    assert "placed-and-done" in r.stdout
    name = submitted_name(r)
    assert cli.describe(name)["cluster"] == "gke-b"
    text = describe_text(cli, name)
    assert "Placement:  gke-a, gke-b" in text and "now: attempt 1 on gke-b" in text, text


def test_a_run_queued_past_max_queue_fails_over_to_the_next_cluster(cli, clusters):
    holder_b = both_clusters_full(cli, clusters)
    spec = cli.spec("placed", SPEC + "placement:\n  max_queue: 2s\n")
    r = cli("run", "-f", str(spec), "--cluster", "gke-a,gke-b")  # not followed: the watcher moves it
    assert r.returncode == 0, r.stderr
    assert "none has 8 free; placed on gke-a" in r.stderr, r.stderr
    name = submitted_name(r)
    assert cli.wait_status(name, {"QUEUED"})["cluster"] == "gke-a"
    assert cli("stop", holder_b, "-y").returncode == 0  # gke-b frees its GPUs while the run waits on gke-a

    wait_until(
        lambda: cli.describe(name)["cluster"] == "gke-b",
        60,
        interval=0.3,
        message=lambda: f"the run to move to gke-b: {describe_text(cli, name)}",
    )
    done = cli("logs", name, "-f")
    assert done.returncode == 0 and "placed-and-done" in done.stdout, done.stderr
    text = describe_text(cli, name)
    moves = [line for line in text.splitlines() if "withdrawn there" in line]
    assert len(moves) == 1, text  # moved once, though the watcher looked many times
    assert re.search(
        r"attempt 1 on gke-a: withdrawn there \(QUEUED on gke-a for \d+ s, past "
        r"placement.max_queue \(2 s\)\); moved to gke-b",
        moves[0],
    ), text
    assert "now: attempt 2 on gke-b" in text, text
    assert [r["cluster"] for r in listed(cli) if r["name"] == name] == ["gke-b"]
    # The withdrawn copy keeps its record on gke-a, stopped.
    kept = clusters.programs["gke-a"].get("ConfigMap", "default", name)
    assert kept is not None


def test_a_followed_run_fails_over_and_each_move_is_a_line(cli, clusters):
    holder_b = both_clusters_full(cli, clusters)
    spec = cli.spec("placed", SPEC + "placement:\n  max_queue: 2s\n")
    follow = cli.popen("run", "-f", str(spec), "--cluster", "gke-a,gke-b", "--follow")
    try:
        wait_until(
            lambda: any(r["name"].startswith("placed-") and r["status"] == "QUEUED" for r in listed(cli)),
            60,
            interval=0.3,
        )
        assert cli("stop", holder_b, "-y").returncode == 0
        out, err = follow.communicate(timeout=120)
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.communicate()
    assert follow.returncode == 0, err
    assert "placed-and-done" in out
    lines = err.splitlines()
    assert any(
        re.fullmatch(
            r"i placement: QUEUED on gke-a for \d+ s, past placement.max_queue \(2 s\): withdrawn "
            r"there, attempt 2 submitted to gke-b",
            line,
        )
        for line in lines
    ), err


def test_a_cluster_that_cannot_be_reached_passes_the_run_to_the_next(cli, clusters):
    clusters.start("gke-b")
    clusters.unreachable("gke-a")
    clusters.hanging("gke-h")
    spec = cli.spec("placed", SPEC)
    r = cli("run", "-f", str(spec), "--cluster", "gke-a,gke-h,gke-b")
    assert r.returncode == 0, r.stderr
    line = next(line for line in r.stderr.splitlines() if "placement:" in line)
    assert re.fullmatch(
        r"i placement: gke-a could not be asked \(cannot reach the API server: "
        r"connection refused \(https://127.0.0.1:\d+\)\), gke-h could not be asked \(no answer "
        r"within 3 s\), gke-b has 8 of 8 free h100_80gb: placed on gke-b",
        line,
    ), line
    name = submitted_name(r)
    assert cli.describe(name)["cluster"] == "gke-b"
    done = cli("logs", name, "-f")
    assert done.returncode == 0 and "placed-and-done" in done.stdout, done.stderr


def test_auto_is_every_cluster_profile_in_order_and_a_dry_run_asks_none(cli, clusters):
    clusters.start("gke-a")
    clusters.hanging("gke-h")
    spec = cli.spec("placed", SPEC.replace("compute:", "compute:\n  cluster: auto"))
    r = cli("run", "-f", str(spec), "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "placement: decided at submit among gke-a, gke-h by their free GPUs; checked for gke-a" in r.stderr
    unknown = cli("run", "-f", str(spec), "--cluster", "gke-a,nope")
    assert unknown.returncode == 2 and "'nope' names no cluster profile" in unknown.stderr, unknown.stderr
    assert "Traceback" not in unknown.stderr


def test_a_cluster_queues_free_quota_is_its_nominal_quota_less_its_usage():
    cluster_queue = {
        "metadata": {"name": "team-a-cq"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "h100",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "512"},
                                {"name": "nvidia.com/gpu", "nominalQuota": 16},
                            ],
                        },
                        {"name": "h100-spot", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}]},
                    ],
                }
            ]
        },
        "status": {
            "flavorsUsage": [
                {
                    "name": "h100",
                    "resources": [{"name": "nvidia.com/gpu", "total": "12"}, {"name": "cpu", "total": "100"}],
                }
            ]
        },
    }
    assert cluster_queue_gpus(cluster_queue, {"nvidia.com/gpu"}) == (24, 12)
    assert cluster_queue_gpus({"metadata": {"name": "new"}, "spec": {}}, {"nvidia.com/gpu"}) == (0, 0)
