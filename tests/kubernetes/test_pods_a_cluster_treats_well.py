"""Pods a cluster treats well: Burstable by default (requests from the profile when the spec
names no cpus or memory), the kubeconfig context's namespace, and mcli's `priority: auto`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.backends.kubernetes.profiles import ClusterProfile
from launcher.backends.kubernetes.render import plan_run
from launcher.config import load_config
from tests.cli.conftest import cli  # noqa: F401 - the fixture: the real command in a subprocess
from tests.conftest import wait_until
from tests.fakes.kube.fixtures import write_profile
from tests.fakes.kube.scheduler import default_nodes
from tests.fakes.kube.validation import qos_class
from tests.kubernetes.specs import PROFILE, spec
from tests.kubernetes.test_backend import run_spec, worker


def pod_of(manifests: list[dict]) -> dict:
    return manifests[-1]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def resources(manifests: list[dict]) -> dict:
    return pod_of(manifests)["containers"][0]["resources"]


def test_qos_class_follows_the_documented_rules():
    """The rules the tests below rely on, on the examples of the Kubernetes docs."""
    assert qos_class({"containers": [{"name": "a"}]}) == "BestEffort"
    assert (
        qos_class(
            {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "8"}, "requests": {"nvidia.com/gpu": "8"}}}]}
        )
        == "BestEffort"
    )
    assert qos_class({"containers": [{"resources": {"requests": {"memory": "1Gi"}}}]}) == "Burstable"
    assert qos_class({"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}) == "Guaranteed"
    assert (
        qos_class(
            {
                "containers": [
                    {
                        "resources": {
                            "limits": {"cpu": "1", "memory": "1Gi"},
                            "requests": {"cpu": "1000m", "memory": "1Gi"},
                        }
                    }
                ]
            }
        )
        == "Guaranteed"
    )
    assert (
        qos_class(
            {
                "containers": [
                    {"resources": {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}}
                ]
            }
        )
        == "Burstable"
    )
    assert (
        qos_class(
            {
                "initContainers": [{"name": "init"}],
                "containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}],
            }
        )
        == "Burstable"
    )


@pytest.mark.parametrize(
    ("compute", "profile", "cpu", "memory"),
    [
        ({"gpus": 8, "gpu_type": "h100_80gb"}, PROFILE, "64", "512Gi"),  # 8 CPUs and 64Gi per GPU
        ({"gpus": 32, "gpu_type": "a100_80gb"}, PROFILE, "64", "512Gi"),  # per node
        ({"gpus": 1, "gpu_type": "l4"}, PROFILE, "2", "8Gi"),  # L4s come on 4-vCPU, 16 GB nodes
        ({"gpus": 4, "gpu_type": "t4"}, PROFILE, "8", "32Gi"),
        ({"gpu_type": "none"}, PROFILE, "1", "2Gi"),  # a CPU-only run
        ({"gpu_type": "none", "nodes": 2}, PROFILE, "1", "2Gi"),
    ],
)
def test_the_rendered_pod_is_burstable_by_default(compute, profile, cpu, memory):
    manifests = plan_run(spec(compute=compute), profile, []).manifests
    res = resources(manifests)
    assert res["requests"]["cpu"] == cpu and res["requests"]["memory"] == memory
    # Requests only for cpu and memory (no limit caps a training process); GPUs as requested = limits.
    assert "cpu" not in res.get("limits", {}) and "memory" not in res.get("limits", {})
    gpu = {k: v for k, v in res["requests"].items() if k not in ("cpu", "memory")}
    assert gpu == {k: v for k, v in res.get("limits", {}).items()}
    assert qos_class(pod_of(manifests)) == "Burstable"


def test_a_spec_value_wins_and_the_profile_sets_the_share():
    both = resources(
        plan_run(
            spec(compute={"gpus": 8, "gpu_type": "h100_80gb", "cpus": 12, "memory": "100Gi"}), PROFILE, []
        ).manifests
    )
    assert both["requests"] == {"nvidia.com/gpu": "8", "cpu": "12", "memory": "100Gi"}
    assert both["limits"] == {"nvidia.com/gpu": "8", "memory": "100Gi"}  # a spec's memory is also its limit
    cpus_only = resources(plan_run(spec(compute={"gpu_type": "none", "cpus": 0.5}), PROFILE, []).manifests)
    assert cpus_only["requests"] == {"cpu": "500m", "memory": "2Gi"}

    shaped = PROFILE.model_copy(
        update={"cpus_per_gpu": 12.0, "memory_per_gpu": "96Gi", "default_cpus": 2.0, "default_memory": "4Gi"}
    )
    assert resources(plan_run(spec(compute={"gpus": 2, "gpu_type": "h100_80gb"}), shaped, []).manifests)[
        "requests"
    ] == {"nvidia.com/gpu": "2", "cpu": "24", "memory": "192Gi"}
    assert resources(plan_run(spec(compute={"gpu_type": "none"}), shaped, []).manifests)["requests"] == {
        "cpu": "2",
        "memory": "4Gi",
    }

    # A gpu_type of the profile's own: its share beats the profile's; without one, 8 and 64Gi per GPU.
    own = ClusterProfile.model_validate(
        {
            "name": "own",
            "image": "x",
            "cpus_per_gpu": 4,
            "gpu_types": {
                "b200": {"gpus_per_node": 8, "cpus_per_gpu": 24, "memory_per_gpu": "240Gi"},
                "mi300x": {"gpus_per_node": 8, "resource": "amd.com/gpu"},
            },
        }
    )
    assert resources(plan_run(spec(compute={"gpus": 8, "gpu_type": "b200"}), own, []).manifests)["requests"] == {
        "nvidia.com/gpu": "8",
        "cpu": "192",
        "memory": "1920Gi",
    }
    assert resources(plan_run(spec(compute={"gpus": 8, "gpu_type": "mi300x"}), own, []).manifests)["requests"] == {
        "amd.com/gpu": "8",
        "cpu": "32",
        "memory": "512Gi",
    }


def test_a_bad_share_in_the_profile_is_an_error_naming_it(launcher_home, fake_kube):
    from launcher.errors import InputError

    write_profile(launcher_home, fake_kube, memory_per_gpu="lots")
    with pytest.raises(
        InputError,
        match=r"config.yaml: clusters.fake.memory_per_gpu: .*must be a Kubernetes "
        r"quantity such as 64Gi or 512Mi, got 'lots'",
    ):
        KubernetesBackend(load_config().profile("fake"))


def test_the_clusters_pods_are_burstable(launcher_home, fake_kube_factory):
    """What the API server itself says of the pods (status.qosClass), a GPU run and a CPU run."""
    kube = fake_kube_factory(nodes=default_nodes(2, gpus=8), profile={"gpu_types": {"fake-gpu": {"gpus_per_node": 8}}})
    backend = KubernetesBackend(load_config().profile("fake"))
    try:
        for name, compute in (("gpu-abc123", {"gpus": 16, "gpu_type": "fake-gpu"}), ("cpu-abc123", {"nodes": 2})):
            backend.submit(run_spec(name, worker("--lines", "1"), compute=compute), [])
            pods = wait_until(
                lambda name=name: len(p := kube.pods(labels=f"launcher.dev/run={name}")) == 2 and p,
                30,
                message=f"the two pods of {name}",
            )
            assert [p["status"]["qosClass"] for p in pods] == ["Burstable", "Burstable"], name
    finally:
        backend.close()


# ------------------------------------------------------------------ namespaces


def context_kubeconfig(kube, path: Path, namespace: str) -> Path:
    """The fake's kubeconfig with its one context in `namespace`."""
    config = json.loads(kube.write_kubeconfig(path).read_text())
    config["contexts"][0]["context"]["namespace"] = namespace
    path.write_text(json.dumps(config))
    return path


def test_a_context_namespace_is_honoured(cli, launcher_home, fake_kube):
    kubeconfig = context_kubeconfig(fake_kube, launcher_home / "kubeconfig-ml", "ml-team")
    add = cli(
        "cluster",
        "add",
        "ml",
        "--kubeconfig",
        str(kubeconfig),
        "--entrypoint-mode",
        "image",
        "--image",
        "ghcr.io/example/launcher:test",
    )
    assert add.returncode == 0, add.stderr
    assert "Added cluster ml (namespace ml-team)" in add.stdout
    # Stored as it was resolved: the current context and its namespace (pinned).
    stored = yaml.safe_load((launcher_home / "config.yaml").read_text())["clusters"]["ml"]
    assert (stored["context"], stored["namespace"]) == ("fake", "ml-team")
    listed = cli("cluster", "list")
    assert re.search(r"ml\s+kubernetes\s+fake\s+ml-team\s", listed.stdout), listed.stdout

    spec_file = cli.spec(
        "hello",
        """
        name: hello
        command: "echo hi"
    """,
    )
    dry = cli("run", "-f", str(spec_file), "--cluster", "ml", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    items = yaml.safe_load(dry.stdout)["items"]
    assert {m["metadata"]["namespace"] for m in items} == {"ml-team"}

    submitted = cli("run", "-f", str(spec_file), "--cluster", "ml")
    assert submitted.returncode == 0, submitted.stderr
    [name] = re.findall(r"Run (hello-[a-z0-9]{6}) submitted", submitted.stdout)
    assert [o["metadata"]["name"] for o in fake_kube.list("ConfigMap", "ml-team", f"launcher.dev/run={name}")[0]] == [
        name
    ]
    assert fake_kube.list("ConfigMap", "default", f"launcher.dev/run={name}")[0] == []
    assert cli("get", "runs", "--cluster", "ml", "-o", "name").stdout.split() == [name]

    # A namespace in the profile still wins.
    assert cli("cluster", "add", "pinned", "--kubeconfig", str(kubeconfig), "--namespace", "other").returncode == 0
    pinned = cli("run", "-f", str(spec_file), "--cluster", "pinned", "--dry-run", "--image", "x:1")
    assert {m["metadata"]["namespace"] for m in yaml.safe_load(pinned.stdout)["items"]} == {"other"}


def test_a_merged_kubeconfig_list_takes_the_first_current_context_and_its_namespace(
    launcher_home, fake_kube, monkeypatch
):
    from launcher.backends.kubernetes.reach import context_namespace

    first = launcher_home / "first"
    first.write_text(yaml.safe_dump({"current-context": "b", "contexts": []}))
    second = launcher_home / "second"
    second.write_text(
        yaml.safe_dump(
            {
                "current-context": "a",
                "contexts": [
                    {"name": "a", "context": {"cluster": "c", "namespace": "from-a"}},
                    {"name": "b", "context": {"cluster": "c", "namespace": "from-b"}},
                ],
            }
        )
    )
    monkeypatch.setenv("KUBECONFIG", f"{first}:{second}")
    assert context_namespace(None, None) == "from-b"
    assert context_namespace(None, "a") == "from-a"
    assert context_namespace(None, "missing") is None


# ------------------------------------------------------------------ priority


@pytest.mark.parametrize("target", [["--cluster", "fake"], ["--backend", "local"]])
def test_priority_auto_is_accepted(cli, fake_kube, target):
    spec_file = cli.spec(
        "auto",
        """
        name: auto
        image: python:3.11-slim
        command: "true"
        scheduling: {priority: auto}
    """,
    )
    for command in (["validate"], ["run", "--dry-run"]):
        r = cli(*command, "-f", str(spec_file), *target)
        assert r.returncode == 0, (command, r.stderr)
        assert "priority" not in r.stderr, r.stderr  # the cluster's default: nothing to warn about
        assert "kueue.x-k8s.io/priority-class" not in r.stdout and "priorityClassName" not in r.stdout
    r = cli("run", "-f", str(spec_file), "--priority", "auto", *target, "--follow")
    assert r.returncode == 0, r.stderr
    assert "priority" not in r.stderr
