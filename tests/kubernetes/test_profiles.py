"""gpu_type tables and how a spec's compute section becomes nodes x GPUs."""

from __future__ import annotations

import pytest

from launcher.backends.kubernetes.profiles import ClusterProfile, load_profile, resolve_placement, shipped_gpu_types
from launcher.config import Profile
from launcher.errors import InputError
from tests.kubernetes.specs import spec

MCLI_NAMES = {"a100_40gb", "a100_80gb", "h100_80gb", "h200_141gb", "l4", "t4", "none"}


@pytest.mark.parametrize("scheme", ["gfd", "gke", "karpenter"])
def test_every_scheme_ships_mcli_names(scheme):
    table = shipped_gpu_types(scheme)
    assert set(table) >= MCLI_NAMES
    assert table["none"].gpus_per_node == 0
    assert table["h100_80gb"].gpus_per_node == 8


def test_label_schemes_select_the_right_labels():
    assert shipped_gpu_types("gfd")["h100_80gb"].node_affinity == {
        "nvidia.com/gpu.product": ["NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-PCIe"]
    }
    assert shipped_gpu_types("gke")["a100_80gb"].node_selector == {
        "cloud.google.com/gke-accelerator": "nvidia-a100-80gb"
    }
    karp = shipped_gpu_types("karpenter")["a100_40gb"].node_affinity
    assert karp["karpenter.k8s.aws/instance-gpu-name"] == ["a100"]
    assert karp["karpenter.k8s.aws/instance-gpu-memory"] == ["40960"]
    # A scheme's own label values work as gpu_type names too.
    assert "NVIDIA-A100-SXM4-80GB" in shipped_gpu_types("gfd")
    assert "nvidia-l4" in shipped_gpu_types("gke")


@pytest.mark.parametrize(
    ("compute", "nodes", "per_node"),
    [
        ({"gpus": 8, "gpu_type": "h100_80gb"}, 1, 8),
        ({"gpus": 2, "gpu_type": "h100_80gb"}, 1, 2),
        ({"gpus": 32, "gpu_type": "a100_80gb"}, 4, 8),
        ({"gpus": 8, "gpu_type": "t4"}, 2, 4),
        ({"gpus": 16, "gpu_type": "h100_80gb", "nodes": 4}, 4, 4),
        ({"gpu_type": "h100_80gb", "nodes": 2}, 2, 8),
        ({"gpu_type": "none", "nodes": 3}, 3, 0),
        ({}, 1, 0),
    ],
)
def test_placement(compute, nodes, per_node):
    p = resolve_placement(spec(compute=compute), ClusterProfile(name="c"))
    assert (p.nodes, p.gpus_per_node) == (nodes, per_node)


@pytest.mark.parametrize(
    ("compute", "message"),
    [
        ({"gpus": 8, "gpu_type": "v100_99gb"}, "unknown gpu_type 'v100_99gb' on cluster c (known: "),
        (
            {"gpus": 12, "gpu_type": "h100_80gb"},
            "12 GPUs do not fit h100_80gb nodes of 8 GPUs: use at most 8, or a multiple of 8",
        ),
        ({"gpus": 24, "gpu_type": "h100_80gb", "nodes": 2}, "24 GPUs do not fit 2 nodes of 8 h100_80gb GPUs"),
        ({"gpus": 8}, "8 GPUs asked without a gpu_type"),
        ({"gpus": 2, "gpu_type": "none"}, "gpu_type 'none' has no GPUs"),
    ],
)
def test_placement_errors_are_clear(compute, message):
    with pytest.raises(InputError) as e:
        resolve_placement(spec(compute=compute), ClusterProfile(name="c"))
    assert message in str(e.value)
    if "unknown gpu_type" in message:
        assert "a100_80gb" in str(e.value) and "h200_141gb" in str(e.value)


def test_profile_overrides_and_default_gpu_type():
    cp = load_profile(
        Profile(
            "mine",
            "kubernetes",
            {
                "backend": "kubernetes",
                "namespace": "ml",
                "default_gpu_type": "b200",
                "gpu_types": {
                    "b200": {
                        "node_selector": {"node.kubernetes.io/instance-type": "p6-b200.48xlarge"},
                        "gpus_per_node": 8,
                        "tolerations": [{"key": "dedicated", "operator": "Exists"}],
                    }
                },
            },
        )
    )
    p = resolve_placement(spec(compute={"gpus": 16}), cp)
    assert (p.nodes, p.gpus_per_node, p.gpu_type_name) == (2, 8, "b200")


def test_bad_profile_field_names_the_field():
    with pytest.raises(InputError, match=r"clusters\.mine\.gpu_labels"):
        load_profile(Profile("mine", "kubernetes", {"backend": "kubernetes", "gpu_labels": "azure"}))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "ttl_seconds_after_finished",
            -1,
            r"clusters\.mine\.ttl_seconds_after_finished: Input should be greater than or equal to 0",
        ),
        ("log_store", " ", r"clusters\.mine\.log_store: Value error, must be a URL"),
    ],
)
def test_bad_log_store_or_ttl_names_the_field(field, value, message):
    with pytest.raises(InputError, match=message):
        load_profile(Profile("mine", "kubernetes", {"backend": "kubernetes", field: value}))


# --- a profile is pinned to its kubeconfig context and namespace ---------------------------


def launcher(*args: str) -> int:
    from launcher.cli.error_report import run_cli
    from launcher.cli.main import cli

    try:
        return run_cli(cli, list(args))
    except SystemExit as e:
        return int(e.code or 0)


def two_contexts(kube, path) -> str:
    """A kubeconfig whose current context `fake` (namespace team-x) and context `other`
    (namespace default) both point at the fake; its path."""
    import yaml

    from tests.fakes.kube.cluster import kubeconfig

    config = kubeconfig(kube.url, "fake", namespace="team-x")
    config["contexts"].append({"name": "other", "context": {"cluster": "fake", "user": "tester"}})
    path.write_text(yaml.safe_dump(config))
    return str(path)


def use_context(kubeconfig: str, context: str) -> None:
    import subprocess

    subprocess.run(["kubectl", "--kubeconfig", kubeconfig, "config", "use-context", context], check=True)


def hello_spec(tmp_path) -> str:
    import yaml

    path = tmp_path / "hello.yaml"
    path.write_text(yaml.safe_dump({"name": "hello", "image": "ghcr.io/example/launcher:test", "command": "echo hi"}))
    return str(path)


def test_cluster_add_pins_the_context_and_namespace_it_resolved(fake_kube, tmp_path, monkeypatch, capsys):
    """`cluster add prod` with neither --context nor --namespace stores the kubeconfig's
    current context and its namespace: after `kubectl config use-context other` the profile
    still renders into team-x and lists the run it started there."""
    import json

    import yaml

    from launcher.config import load_config

    kubeconfig = two_contexts(fake_kube, tmp_path / "kubeconfig")
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    assert launcher("cluster", "add", "prod", "--entrypoint-mode", "image") == 0
    assert "(namespace team-x)" in capsys.readouterr().out
    stored = load_config().clusters["prod"]
    assert (stored["context"], stored["namespace"]) == ("fake", "team-x")
    assert launcher("run", "-f", hello_spec(tmp_path), "--cluster", "prod") == 0
    capsys.readouterr()

    use_context(kubeconfig, "other")
    assert launcher("run", "-f", hello_spec(tmp_path), "--cluster", "prod", "--dry-run", "-o", "yaml") == 0
    rendered = yaml.safe_load(capsys.readouterr().out)
    assert {m["metadata"]["namespace"] for m in rendered["items"]} == {"team-x"}
    assert launcher("get", "runs", "--cluster", "prod", "-o", "json") == 0
    out, err = capsys.readouterr()
    assert [r["name"].split("-")[0] for r in json.loads(out)] == ["hello"], err


def test_a_profile_without_a_context_says_how_to_pin_it(fake_kube, tmp_path, monkeypatch, capsys):
    """A profile written before `cluster add` pinned contexts (no context, no namespace)
    still follows the current context, and `cluster list` and `cluster check` say, once
    each, how to pin it where it points now."""
    import yaml

    from launcher.config import config_path

    kubeconfig = two_contexts(fake_kube, tmp_path / "kubeconfig")
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    path = config_path()
    config = yaml.safe_load(path.read_text())
    config["clusters"]["old"] = {"backend": "kubernetes", "entrypoint_mode": "image"}
    path.write_text(yaml.safe_dump(config))
    use_context(kubeconfig, "other")

    assert launcher("run", "-f", hello_spec(tmp_path), "--cluster", "old", "--dry-run", "-o", "yaml") == 0
    rendered = yaml.safe_load(capsys.readouterr().out)
    assert {m["metadata"]["namespace"] for m in rendered["items"]} == {"default"}  # as before: it follows

    pin = "under clusters.old in config.yaml"
    assert launcher("cluster", "list") == 0
    err = capsys.readouterr().err
    assert err.count("cluster old: not pinned") == 1, err
    assert "context: other" in err and "namespace: default" in err and pin in err
    assert "cluster fake" not in err  # the fixture's profile names its context
    launcher("cluster", "check", "old")
    err = capsys.readouterr().err
    assert err.count("cluster old: not pinned") == 1 and pin in err, err


# --- two profiles on one cluster and namespace are one place -------------------------------

H100_NODE = {
    "name": "gpu-0",
    "labels": {"kubernetes.io/hostname": "gpu-0", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    "gpus": 8,
}


def gpu_spec(tmp_path, name: str) -> str:
    import yaml

    path = tmp_path / f"{name}.yaml"
    spec = {
        "name": name,
        "image": "ghcr.io/example/launcher:test",
        "command": "sleep 600",
        "compute": {"gpus": 2, "gpu_type": "h100_80gb"},
    }
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def test_two_profiles_on_one_namespace_are_asked_once(fake_kube_factory, launcher_home, tmp_path, capsys):
    """Profiles `fake` and `twin` name the same API server and namespace: `get runs` lists
    each run once (under `fake`, the first by name), `util` counts the node's 8 GPUs once,
    placement asks the place once, and stop and delete act on each run once."""
    import json
    import re

    from tests.fakes.kube.fixtures import write_profile

    kube = fake_kube_factory(nodes=[H100_NODE])
    write_profile(launcher_home, kube, name="twin", entrypoint_mode="image")
    assert launcher("run", "-f", gpu_spec(tmp_path, "holder"), "--cluster", "twin") == 0
    assert launcher("run", "-f", gpu_spec(tmp_path, "placed"), "--cluster", "auto") == 0
    err = capsys.readouterr().err
    line = next(line for line in err.splitlines() if "placement:" in line)
    assert re.fullmatch(r"i placement: fake has \d of 8 free h100_80gb: placed on fake", line), line

    assert launcher("get", "runs", "-o", "json") == 0
    listed = json.loads(capsys.readouterr().out)
    assert sorted((r["name"].split("-")[0], r["cluster"]) for r in listed) == [("holder", "fake"), ("placed", "fake")]

    assert launcher("util", "-o", "json") == 0
    out, err = capsys.readouterr()
    rows = [r for r in json.loads(out) if r.get("gpu_type") == "h100_80gb"]
    assert [(r["cluster"], r["gpus"]) for r in rows] == [("fake", 8)]
    assert "cluster twin is the same place as cluster fake" in err

    assert launcher("stop", "--all", "-y") == 0
    out = capsys.readouterr().out
    assert sorted(re.findall(r"Run (\w+)-\w+ stopped", out)) == ["holder", "placed"], out
    assert launcher("delete", "--all", "-y") == 0
    out = capsys.readouterr().out
    assert sorted(re.findall(r"Deleted run (\w+)-\w+", out)) == ["holder", "placed"], out
    assert kube.list("JobSet", "default")[0] == []
