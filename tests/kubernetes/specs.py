"""Specs, profiles and secrets shared by the Kubernetes tests."""

from __future__ import annotations

import re
from pathlib import Path

from launcher.backends.kubernetes.profiles import ClusterProfile
from launcher.secrets.kinds import Secret, SecretKind
from launcher.spec.models import RunSpec

WORKER = Path(__file__).with_name("worker.py")

# The shipped defaults: the entrypoint as a zipapp run by the image's python3.
PROFILE = ClusterProfile(
    name="gpu-cluster", namespace="training", service_account="trainer", image="ghcr.io/example/launcher:1.0"
)
# Images without Python: the runtime injected by an init container.
INJECT_PROFILE = PROFILE.model_copy(update={"entrypoint_mode": "inject"})
# The image already has the launcher: no init container.
IMAGE_PROFILE = PROFILE.model_copy(update={"entrypoint_mode": "image"})
KUEUE_PROFILE = ClusterProfile(
    name="kueue-cluster",
    namespace="training",
    queue="team-a",
    priority_classes={"low": "batch-low", "high": "batch-high"},
    non_preemptible_priority_class="no-preempt",
    gpu_labels="gke",
)
GKE_SPOT_PROFILE = ClusterProfile(name="gke", gpu_labels="gke", spot="gke", priority_class_kind="PriorityClass")
# A namespace that enforces the restricted Pod Security Standard, inject mode (two containers).
RESTRICTED_PROFILE = INJECT_PROFILE.model_copy(
    update={"pod_security": "restricted", "run_as_user": 1000, "shm_size": "16Gi", "cache_size": "500Gi"}
)
KARPENTER_PROFILE = ClusterProfile(name="eks", gpu_labels="karpenter", spot="karpenter", entrypoint_mode="image")

SECRET_VALUES = {
    "hf": "hf_Sup3rS3cretTokenValue",
    "aws": "[default]\naws_access_key_id=AKIASECRETKEY123\n",
    "token": "tok-Very-Secret-987",
    "docker": "dockerpass-Secret-55",
}


def secrets() -> list[Secret]:
    return [
        Secret("hf-token", SecretKind.HF, {"token": SECRET_VALUES["hf"]}),
        Secret("aws", SecretKind.S3, {"credentials": SECRET_VALUES["aws"]}),
        Secret("api-token", SecretKind.ENV, {"value": SECRET_VALUES["token"]}, {"env_key": "API_TOKEN"}),
        Secret(
            "ssh-key",
            SecretKind.FILE,
            {"value": "-----BEGIN KEY-----\nabcdefgh12345678\n-----END KEY-----"},
            {"mount_path": "/etc/ssh-key"},
        ),
        Secret(
            "registry",
            SecretKind.DOCKER_REGISTRY,
            {"username": "bot", "password": SECRET_VALUES["docker"], "server": "ghcr.io"},
        ),
    ]


def spec(name: str = "train-abc123", **fields) -> RunSpec:
    base = {
        "name": name,
        "image": "ghcr.io/example/trainer:2.0",
        "command": "composer train.py",
        "parameters": {"model": {"d_model": 768}, "_private": 1},
    }
    base.update(fields)
    return RunSpec.model_validate(base)


# name -> (spec, profile, secrets): the range the schema and golden tests cover. Both forms
# (JobSet, Indexed Job) and the three entrypoint modes (zipapp, inject, image) appear.
CASES = {
    "cpu": lambda: (spec("cpu-abc123", compute={"gpu_type": "none", "cpus": 2, "memory": "4Gi"}), PROFILE, []),
    "1x8": lambda: (spec("one-node-abc123", compute={"gpus": 8, "gpu_type": "h100_80gb"}), PROFILE, []),
    "4x8": lambda: (
        spec(
            "four-node-abc123",
            compute={"gpus": 32, "gpu_type": "a100_80gb"},
            env_variables={"NCCL_DEBUG": "INFO"},
            scheduling={"max_duration": 2},
        ),
        PROFILE,
        [],
    ),
    "1x8-inject": lambda: (spec("one-node-abc123", compute={"gpus": 8, "gpu_type": "h100_80gb"}), INJECT_PROFILE, []),
    "1x8-image": lambda: (spec("one-node-abc123", compute={"gpus": 8, "gpu_type": "h100_80gb"}), IMAGE_PROFILE, []),
    "cpu-image": lambda: (
        spec("cpu-abc123", compute={"gpu_type": "none", "cpus": 0.5}),
        IMAGE_PROFILE,
        [],
    ),
    "secrets": lambda: (spec("with-secrets-abc123", compute={"gpus": 8, "gpu_type": "h100_80gb"}), PROFILE, secrets()),
    "kueue": lambda: (
        spec(
            "queued-abc123",
            compute={"gpus": 16, "gpu_type": "h100_80gb", "topology": {"level": "cloud.google.com/gce-topology-block"}},
            scheduling={"priority": "low", "max_retries": 2, "retry_on_system_failure": True},
        ),
        KUEUE_PROFILE,
        [],
    ),
    "kueue-non-preemptible": lambda: (
        spec(
            "protected-abc123",
            compute={"gpus": 8, "gpu_type": "l4"},
            scheduling={"priority": "high", "preemptible": False},
        ),
        KUEUE_PROFILE,
        [],
    ),
    "placement-gke-spot": lambda: (
        spec(
            "placed-abc123",
            compute={
                "gpus": 16,
                "gpu_type": "h100_80gb",
                "instance": "a3-highgpu-8g",
                "node_names": ["gke-a-1", "gke-a-2"],
            },
            scheduling={"preemptible": True, "priority": "highest"},
            metadata={"team": "nlp", "cost-center": 42},
        ),
        GKE_SPOT_PROFILE,
        [],
    ),
    "restricted-inject": lambda: (
        spec("restricted-abc123", compute={"gpus": 8, "gpu_type": "h100_80gb"}),
        RESTRICTED_PROFILE,
        [],
    ),
    "off-spot-karpenter": lambda: (
        spec("on-demand-abc123", compute={"gpus": 8, "gpu_type": "h100"}, scheduling={"preemptible": False}),
        KARPENTER_PROFILE,
        [],
    ),
}


GOLDEN = Path(__file__).with_name("golden")
# The zipapp's bytes change with every edit of the entrypoint: the golden files show where it
# goes, and test_render checks what it holds.
ZIPAPP_VALUE = re.compile(r"(entrypoint\.pyz:\s*)[A-Za-z0-9+/=]{200,}")
ZIPAPP_PLACEHOLDER = r"\1<launcher.pod.zipapp.build(), base64>"


def assert_golden(case: str, text: str) -> None:
    """Compare with golden/<case>.yaml; UPDATE_GOLDEN=1 rewrites it (review the diff)."""
    import os

    import pytest

    text = ZIPAPP_VALUE.sub(ZIPAPP_PLACEHOLDER, text)
    path = GOLDEN / f"{case}.yaml"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(text)
    if not path.exists():
        pytest.fail(f"golden file {path} is missing: run with UPDATE_GOLDEN=1 and review it")
    assert text == path.read_text()
