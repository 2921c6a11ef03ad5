"""The rendered manifests: valid against the Kubernetes schemas, and what the issue asks."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest
import yaml

from launcher.backends.kubernetes.render import render_run
from launcher.errors import InputError
from tests.kubernetes.specs import CASES, PROFILE, SECRET_VALUES, assert_golden, spec

VERSIONS = ["1.30", "1.33"]


def by_kind(manifests: list[dict]) -> dict[str, dict]:
    return {m["kind"]: m for m in manifests}


def pod_spec(manifests: list[dict]) -> dict:
    return by_kind(manifests)["Job"]["spec"]["template"]["spec"]


def env_of(manifests: list[dict]) -> dict[str, dict]:
    return {e["name"]: e for e in pod_spec(manifests)["containers"][0]["env"]}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_manifests_validate_strictly(case, version):
    manifests = render_run(*CASES[case]())
    assert [m["kind"] for m in manifests] == ["ConfigMap", "Service", "Job"]
    for m in manifests:
        kubernetes_validate.validate(m, version, strict=True)


def test_strict_validation_would_catch_a_typo():
    job = by_kind(render_run(*CASES["cpu"]()))["Job"]
    job["spec"]["template"]["spec"]["subdomian"] = "x"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, "1.30", strict=True)


def test_indexed_job_shape_for_4x8():
    ms = render_run(*CASES["4x8"]())
    job = by_kind(ms)["Job"]
    s = job["spec"]
    assert (s["completionMode"], s["completions"], s["parallelism"], s["backoffLimit"]) == ("Indexed", 4, 4, 0)
    assert s["activeDeadlineSeconds"] == 7200
    rules = s["podFailurePolicy"]["rules"]
    assert rules[0] == {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    pod = s["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["subdomain"] == "four-node-abc123"
    c = pod["containers"][0]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "8" == c["resources"]["requests"]["nvidia.com/gpu"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"} in pod["tolerations"]
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    assert anti["labelSelector"]["matchLabels"] == {"launcher.dev/run": "four-node-abc123"}
    assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in pod["volumes"]
    env = env_of(ms)
    assert env["NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"] == \
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    assert env["MASTER_ADDR"]["value"] == "four-node-abc123-0.four-node-abc123"
    assert env["LAUNCHER_NODES"]["value"] == "4" and env["LAUNCHER_GPUS_PER_NODE"]["value"] == "8"
    assert env["LAUNCHER_SPEC"]["value"] == "/mnt/config/spec.json"
    assert env["NCCL_DEBUG"]["value"] == "INFO"
    assert "NVIDIA_VISIBLE_DEVICES" not in env
    svc = by_kind(ms)["Service"]["spec"]
    assert svc["clusterIP"] == "None" and svc["publishNotReadyAddresses"] is True
    assert svc["selector"] == {"launcher.dev/run": "four-node-abc123"}
    for m in ms:
        assert m["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "launcher"
        assert m["metadata"]["labels"]["launcher.dev/run"] == "four-node-abc123"


def test_cpu_run_hides_gpus_and_skips_anti_affinity():
    ms = render_run(*CASES["cpu"]())
    env = env_of(ms)
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "void"
    pod = pod_spec(ms)
    assert "affinity" not in pod and "tolerations" not in pod
    assert pod["containers"][0]["resources"] == {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "4Gi"}}


def test_configmap_holds_spec_and_parameters():
    cm = by_kind(render_run(*CASES["1x8"]()))["ConfigMap"]
    assert yaml.safe_load(cm["data"]["parameters.yaml"]) == {"model": {"d_model": 768}}
    assert json.loads(cm["data"]["spec.json"])["name"] == "one-node-abc123"
    mount = pod_spec(render_run(*CASES["1x8"]()))["containers"][0]["volumeMounts"][0]
    assert mount == {"name": "config", "mountPath": "/mnt/config", "readOnly": True}


def test_secrets_are_references_never_values():
    ms = render_run(*CASES["secrets"]())
    text = json.dumps(ms)
    for value in SECRET_VALUES.values():
        assert value.strip() not in text
        for line in value.splitlines():
            if len(line) > 6:
                assert line not in text
    assert "abcdefgh12345678" not in text
    env = env_of(ms)
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "hf-token", "key": "token"}
    assert env["API_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "api-token", "key": "value"}
    assert env["AWS_SHARED_CREDENTIALS_FILE"]["value"] == "/secrets/aws/credentials"
    assert env["SECRET_PATH_SSH_KEY"]["value"] == "/etc/ssh-key/secret"
    assert env["LAUNCHER_MASK_ENV"]["value"] == "API_TOKEN,HF_TOKEN"
    assert env["LAUNCHER_MASK_FILES"]["value"] == "/secrets/aws/credentials:/etc/ssh-key/secret"
    pod = pod_spec(ms)
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols["secret-ssh-key"]["secret"] == {"secretName": "ssh-key", "defaultMode": 0o400,
                                                "items": [{"key": "value", "path": "secret"}]}
    mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["secret-ssh-key"] == {"name": "secret-ssh-key", "mountPath": "/etc/ssh-key", "readOnly": True}
    assert pod["imagePullSecrets"] == [{"name": "registry"}]
    assert pod["serviceAccountName"] == "trainer"


def test_kueue_labels_and_priority():
    job = by_kind(render_run(*CASES["kueue"]()))["Job"]
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "batch-low"
    assert "suspend" not in job["spec"]  # Kueue's webhook suspends it itself
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    protected = by_kind(render_run(*CASES["kueue-non-preemptible"]()))["Job"]
    assert protected["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "no-preempt"
    plain = by_kind(render_run(*CASES["1x8"]()))["Job"]
    assert not any(k.startswith("kueue.x-k8s.io/") for k in plain["metadata"]["labels"])


def test_object_count_is_constant_in_nodes():
    for gpus in (8, 64, 512 * 8):
        ms = render_run(spec(compute={"gpus": gpus, "gpu_type": "h100_80gb"}), PROFILE, [])
        assert len(ms) == 3
        assert by_kind(ms)["Job"]["spec"]["completions"] == gpus // 8


def test_render_errors():
    with pytest.raises(InputError, match="needs an image"):
        render_run(spec(image=None), PROFILE.model_copy(update={"image": None}), [])
    long = "x" * 59 + "a"
    with pytest.raises(InputError, match="too long for 512 nodes"):
        render_run(spec(long, compute={"gpus": 4096, "gpu_type": "h100_80gb"}), PROFILE, [])
    with pytest.raises(InputError, match="ConfigMap holds at most"):
        render_run(spec(parameters={"blob": "x" * 600_000}), PROFILE, [])


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_yaml(case):
    """What `launcher run --dry-run -o yaml` prints: the manifests as a YAML stream.
    Regenerate with UPDATE_GOLDEN=1 after an intended change, and review the diff."""
    text = yaml.safe_dump_all(render_run(*CASES[case]()), sort_keys=False)
    assert_golden(case, text)
