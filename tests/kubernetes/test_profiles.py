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
