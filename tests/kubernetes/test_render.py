"""The rendered manifests: valid against the Kubernetes schemas, and what the issue asks."""

from __future__ import annotations

import base64
import io
import json
import zipfile

import kubernetes_validate
import pytest
import yaml

import launcher
from launcher.backends.kubernetes.profiles import ClusterProfile
from launcher.backends.kubernetes.render import plan_run
from launcher.errors import FieldError, InputError
from launcher.pod import zipapp
from tests.fakes.kube import crd, podsecurity
from tests.fakes.kube.common import ApiError
from tests.kubernetes.specs import (
    CASES,
    GKE_SPOT_PROFILE,
    INJECT_PROFILE,
    KARPENTER_PROFILE,
    KUEUE_PROFILE,
    PROFILE,
    SECRET_VALUES,
    assert_golden,
    spec,
)

NEWEST = kubernetes_validate.utils.latest_version()  # the newest schema it ships

VERSIONS = ["1.30", NEWEST]
# The JobSet project's published CRD, vendored once for the fake cluster (tests/fakes/kube/crds).
JOBSET_SCHEMA = crd.schema_of("jobset.x-k8s.io_jobsets.yaml", "v1alpha2")


def by_kind(manifests: list[dict]) -> dict[str, dict]:
    return {m["kind"]: m for m in manifests}


def job_of(manifests: list[dict]) -> dict:
    """The Job template of the JobSet's one replicated job."""
    return by_kind(manifests)["JobSet"]["spec"]["replicatedJobs"][0]["template"]


def pod_spec(manifests: list[dict]) -> dict:
    return job_of(manifests)["spec"]["template"]["spec"]


def env_of(manifests: list[dict]) -> dict[str, dict]:
    return {e["name"]: e for e in pod_spec(manifests)["containers"][0]["env"]}


def validate_jobset(jobset: dict) -> None:
    """Strictly against the CRD's schema: no field it does not know (what fieldValidation=Strict
    rejects), and its types, enums and required fields."""
    unknown = crd.unknown_fields(jobset, JOBSET_SCHEMA)
    assert not unknown, f"fields the JobSet CRD does not know: {unknown}"
    crd.validate(jobset, JOBSET_SCHEMA, kind="JobSet", group="jobset.x-k8s.io")


def validate(manifest: dict, version: str) -> None:
    if manifest["kind"] != "JobSet":
        kubernetes_validate.validate(manifest, version, strict=True)
        return
    validate_jobset(manifest)
    # Its Job template is a batch/v1 Job spec: the core schema checks the pod template too.
    template = manifest["spec"]["replicatedJobs"][0]["template"]
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "x", **template.get("metadata", {})},
        "spec": template["spec"],
    }
    kubernetes_validate.validate(job, version, strict=True)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_manifests_validate_strictly(case, version):
    for m in plan_run(*CASES[case]()).manifests:
        validate(m, version)


def test_a_run_is_its_record_and_its_jobset():
    assert [m["kind"] for m in plan_run(*CASES["4x8"]()).manifests] == ["ConfigMap", "JobSet"]


def test_strict_validation_would_catch_a_typo():
    template = job_of(plan_run(*CASES["cpu-image"]()).manifests)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"}, "spec": template["spec"]}
    job["spec"]["template"]["spec"]["subdomian"] = "x"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, "1.30", strict=True)
    jobset = by_kind(plan_run(*CASES["kueue"]()).manifests)["JobSet"]
    jobset["spec"]["failurePolicy"]["maxRestart"] = 2
    with pytest.raises(AssertionError, match="spec.failurePolicy.maxRestart"):
        validate_jobset(jobset)
    jobset = by_kind(plan_run(*CASES["kueue"]()).manifests)["JobSet"]
    jobset["spec"]["failurePolicy"]["rules"][0]["action"] = "RestartJobSetIgnoringMaxRestarts"
    with pytest.raises(ApiError, match="action"):
        validate_jobset(jobset)


def test_jobset_shape_for_4x8():
    ms = plan_run(*CASES["4x8"]()).manifests
    js = by_kind(ms)["JobSet"]
    assert js["apiVersion"] == "jobset.x-k8s.io/v1alpha2" and js["metadata"]["name"] == "four-node-abc123"
    s = js["spec"]
    assert s["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    assert s["successPolicy"] == {"operator": "All"}
    # max_duration is set: an attempt past it ends the run (a deadline is not retried).
    assert s["failurePolicy"] == {
        "maxRestarts": 0,
        "rules": [{"name": "deadline", "action": "FailJobSet", "onJobFailureReasons": ["DeadlineExceeded"]}],
    }
    [rj] = s["replicatedJobs"]
    assert (rj["name"], rj["replicas"]) == ("node", 1)
    job = rj["template"]["spec"]
    assert (job["completionMode"], job["completions"], job["parallelism"], job["backoffLimit"]) == ("Indexed", 4, 4, 0)
    assert job["activeDeadlineSeconds"] == 7200
    pod = job["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and "subdomain" not in pod  # JobSet's network sets it
    env = env_of(ms)
    # Rank 0 by DNS: <jobset>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain = the JobSet's name>
    assert env["MASTER_ADDR"]["value"] == "four-node-abc123-node-0-0.four-node-abc123"
    assert (
        env["NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"]
        == "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    )
    assert (
        env["LAUNCHER_RESTART_ATTEMPT"]["valueFrom"]["fieldRef"]["fieldPath"]
        == "metadata.labels['jobset.sigs.k8s.io/restart-attempt']"
    )
    assert env["LAUNCHER_ATTEMPT"]["value"] == "1"  # the entrypoint adds the restart count
    rules = job["podFailurePolicy"]["rules"]
    assert rules == [
        {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        # The entrypoint's codes for a hang, a hardware fault, a collective's failure, a straggler.
        {
            "action": "FailJob",
            "onExitCodes": {"containerName": "main", "operator": "In", "values": [69, 70, 71, 72, 74]},
        },
        {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "NotIn", "values": [0]}},
    ]


def test_jobset_retries_map_onto_its_failure_policy():
    js = by_kind(plan_run(*CASES["kueue"]()).manifests)["JobSet"]
    policy = js["spec"]["failurePolicy"]
    assert policy["maxRestarts"] == 2
    # A disruption (the DisruptionTarget podFailurePolicy rule fails the Job, reason PodFailurePolicy)
    # or an exit code of a system class (the rule at index 1) restarts for free; a user's exit code
    # fails the Job by the last rule, whose message differs.
    assert policy["rules"] == [
        {
            "name": "disruption",
            "action": "RestartJobSetAndIgnoreMaxRestarts",
            "onJobFailureReasons": ["PodFailurePolicy"],
            "onJobFailureMessagePatterns": [
                "condition DisruptionTarget",
                "with exit code (69|70|71|72|74) matching FailJob rule at index 1",
            ],
        }
    ]
    assert js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert js["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "batch-low"
    # Created suspended: a namespace Kueue does not manage would otherwise start it at once.
    assert js["spec"]["suspend"] is True


def test_zipapp_mode_needs_nothing_but_the_images_python():
    """The default: no init container, no runtime image; the ConfigMap carries the plan and
    the entrypoint as a zipapp, and a sh shim runs it with the image's python3."""
    ms = plan_run(*CASES["1x8"]()).manifests
    pod = pod_spec(ms)
    assert "initContainers" not in pod
    assert all("launcher-runtime" not in json.dumps(v) for v in pod["volumes"])
    main = pod["containers"][0]
    assert main["image"] == "ghcr.io/example/trainer:2.0"
    assert main["command"][:2] == ["/bin/sh", "-c"] and len(main["command"]) == 3
    assert '"$python" -I -S "$LAUNCHER_CONFIG_DIR/entrypoint.pyz"' in main["command"][2]
    assert "$(" not in main["command"][2]  # the kubelet would expand it
    env = env_of(ms)
    assert env["LAUNCHER_PLAN"]["value"] == "/mnt/config/plan.json"
    assert env["LAUNCHER_IMAGE"]["value"] == "ghcr.io/example/trainer:2.0"
    cm = by_kind(ms)["ConfigMap"]
    archive = base64.b64decode(cm["binaryData"]["entrypoint.pyz"])
    assert archive == zipapp.build() and len(archive) < 200_000  # well under the ConfigMap's 1 MiB
    names = zipfile.ZipFile(io.BytesIO(archive)).namelist()
    assert "__main__.py" in names and "launcher/entrypoint/main.py" in names and "launcher/secrets/mask.py" in names
    assert not [n for n in names if n.startswith(("launcher/spec", "launcher/backends")) or n.endswith("bundle.py")]
    plan = json.loads(cm["data"]["plan.json"])
    assert plan["command"] == "composer train.py" and plan["nodes"] == 1 and plan["gpus"] == 8
    assert plan["parameters"] is None and cm["data"]["parameters.yaml"] == "model:\n  d_model: 768\n"  # not twice
    assert plan["env"]["RUN_NAME"] == "one-node-abc123"
    # Other modes carry no zipapp, but the same plan.
    inject = by_kind(plan_run(*CASES["1x8-inject"]()).manifests)["ConfigMap"]
    assert "binaryData" not in inject and json.loads(inject["data"]["plan.json"]) == plan


def test_the_zipapp_is_the_same_bytes_every_time():
    assert zipapp.build() == zipapp.build.__wrapped__()


def test_the_plan_holds_no_secret_value():
    ms = plan_run(*CASES["secrets"]()).manifests
    text = by_kind(ms)["ConfigMap"]["data"]["plan.json"]
    for value in SECRET_VALUES.values():
        assert value.strip() not in text


def test_inject_mode_copies_the_runtime_into_the_users_image():
    ms = plan_run(*CASES["1x8-inject"]()).manifests
    pod = pod_spec(ms)
    [init] = pod["initContainers"]
    assert init["image"] == f"ghcr.io/launcher-dev/launcher-runtime:{launcher.__version__}"
    assert init["imagePullPolicy"] == "IfNotPresent"
    assert init["command"] == ["launcher-runtime-install", "/launcher"]
    assert init["volumeMounts"] == [{"name": "launcher-runtime", "mountPath": "/launcher"}]
    assert {"name": "launcher-runtime", "emptyDir": {"sizeLimit": "2Gi"}} in pod["volumes"]
    main = pod["containers"][0]
    assert main["image"] == "ghcr.io/example/trainer:2.0"  # the user's image, unchanged
    assert main["command"] == ["/launcher/python/bin/python3", "-I", "-m", "launcher.entrypoint"]
    assert {"name": "launcher-runtime", "mountPath": "/launcher", "readOnly": True} in main["volumeMounts"]
    env = env_of(ms)
    assert env["LAUNCHER_RUNTIME"]["value"] == "/launcher"
    assert env["LAUNCHER_IMAGE"]["value"] == "ghcr.io/example/trainer:2.0"
    for leak in ("PYTHONHOME", "PYTHONPATH", "LD_LIBRARY_PATH", "PATH"):
        assert leak not in env
    custom = INJECT_PROFILE.model_copy(
        update={"runtime_image": "registry.local/rt:dev", "runtime_image_pull_policy": "Always"}
    )
    [init] = pod_spec(plan_run(spec(), custom, []).manifests)["initContainers"]
    assert (init["image"], init["imagePullPolicy"]) == ("registry.local/rt:dev", "Always")


def test_image_mode_runs_the_launcher_of_the_image():
    pod = pod_spec(plan_run(*CASES["1x8-image"]()).manifests)
    assert "initContainers" not in pod
    assert pod["containers"][0]["command"] == ["python", "-m", "launcher.entrypoint"]
    assert all(v["name"] != "launcher-runtime" for v in pod["volumes"])


def test_the_job_template_and_pods_for_4x8():
    ms = plan_run(*CASES["4x8"]()).manifests
    s = job_of(ms)["spec"]
    assert (s["completionMode"], s["completions"], s["parallelism"], s["backoffLimit"]) == ("Indexed", 4, 4, 0)
    assert s["activeDeadlineSeconds"] == 7200
    rules = s["podFailurePolicy"]["rules"]
    assert rules[0] == {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    pod = s["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and "subdomain" not in pod  # JobSet's network sets it
    c = pod["containers"][0]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "8" == c["resources"]["requests"]["nvidia.com/gpu"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"} in pod["tolerations"]
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    assert anti["labelSelector"]["matchLabels"] == {"launcher.dev/run": "four-node-abc123"}
    # /dev/shm may take what the pod asked for: 8 GPUs x 64Gi.
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "512Gi"}} in pod["volumes"]
    # The run's streaming cache goes to a pod-local emptyDir under /tmp, named to the trainer by env.
    assert {"name": "launcher-cache", "emptyDir": {"sizeLimit": "100Gi"}} in pod["volumes"]
    assert {"name": "launcher-cache", "mountPath": "/tmp/launcher-cache"} in c["volumeMounts"]
    env = env_of(ms)
    assert env["LAUNCHER_CACHE_DIR"]["value"] == "/tmp/launcher-cache"
    # The first attempt of this JobSet, plus its restart count: attempt 1, 2, ... of the run.
    assert env["LAUNCHER_ATTEMPT"]["value"] == "1"
    assert env["LAUNCHER_NODES"]["value"] == "4" and env["LAUNCHER_GPUS_PER_NODE"]["value"] == "8"
    assert env["LAUNCHER_SPEC"]["value"] == "/mnt/config/spec.json"
    assert env["NCCL_DEBUG"]["value"] == "INFO"
    assert "NVIDIA_VISIBLE_DEVICES" not in env
    for m in ms:
        assert m["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "launcher"
        assert m["metadata"]["labels"]["launcher.dev/run"] == "four-node-abc123"


def test_a_restart_numbers_its_jobsets_attempts_on():
    """The JobSet a `run -r` creates after attempt 3: its Jobs, pods and LAUNCHER_ATTEMPT say 4,
    to which the JobSet controller's restart count adds."""
    run, profile, secrets = CASES["4x8"]()
    ms = plan_run(run, profile, secrets, attempt=4).manifests
    jobset = by_kind(ms)["JobSet"]
    assert jobset["metadata"]["labels"]["launcher.dev/attempt"] == "4"
    assert job_of(ms)["metadata"]["labels"]["launcher.dev/attempt"] == "4"
    assert job_of(ms)["spec"]["template"]["metadata"]["labels"]["launcher.dev/attempt"] == "4"
    assert env_of(ms)["LAUNCHER_ATTEMPT"]["value"] == "4"
    for m in ms:
        validate(m, NEWEST)


def test_every_placement_field_reaches_the_pods():
    ms = plan_run(*CASES["placement-gke-spot"]()).manifests
    pod = pod_spec(ms)
    assert pod["nodeSelector"] == {
        "cloud.google.com/gke-accelerator": "nvidia-h100-80gb",
        "node.kubernetes.io/instance-type": "a3-highgpu-8g",
        "cloud.google.com/gke-spot": "true",
    }
    assert {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]
    [term] = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": "kubernetes.io/hostname", "operator": "In", "values": ["gke-a-1", "gke-a-2"]} in term[
        "matchExpressions"
    ]
    assert pod["priorityClassName"] == "highest"  # priority_class_kind PriorityClass: the pods' own
    js = by_kind(ms)["JobSet"]
    assert "kueue.x-k8s.io/priority-class" not in js["metadata"]["labels"]
    notes = {"metadata.launcher.dev/team": "nlp", "metadata.launcher.dev/cost-center": "42"}
    assert js["metadata"]["annotations"] == notes
    assert job_of(ms)["spec"]["template"]["metadata"]["annotations"] == notes


def test_not_preemptible_keeps_pods_off_spot_nodes():
    pod = pod_spec(plan_run(*CASES["off-spot-karpenter"]()).manifests)
    [term] = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": "karpenter.sh/capacity-type", "operator": "NotIn", "values": ["spot"]} in term["matchExpressions"]
    assert "karpenter.sh/capacity-type" not in pod.get("nodeSelector", {})
    gke = pod_spec(plan_run(spec(scheduling={"preemptible": False}), GKE_SPOT_PROFILE, []).manifests)
    [term] = gke["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": "cloud.google.com/gke-spot", "operator": "NotIn", "values": ["true"]}]
    assert not any(t["key"] == "cloud.google.com/gke-spot" for t in gke.get("tolerations", []))


def test_priorities_the_profile_does_not_list_are_errors():
    for priority in ("lowest", "low", "medium", "high", "highest"):  # mcli's, known to the shipped defaults
        js = by_kind(plan_run(spec(scheduling={"priority": priority}), PROFILE, []).manifests)["JobSet"]
        assert js["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == priority
    with pytest.raises(
        InputError,
        match=r"unknown priority 'urgent' on cluster gpu-cluster "
        r"\(known: lowest, low, medium, high, highest, auto",
    ):
        plan_run(spec(scheduling={"priority": "urgent"}), PROFILE, [])
    with pytest.raises(InputError, match=r"known: low, high, auto"):
        plan_run(spec(scheduling={"priority": "urgent"}), KUEUE_PROFILE, [])


@pytest.mark.parametrize("profile", [PROFILE, KUEUE_PROFILE, GKE_SPOT_PROFILE, KARPENTER_PROFILE], ids=lambda p: p.name)
def test_priority_auto_is_accepted_on_every_profile_as_the_clusters_default(profile):
    """mcli's default priority: no class, no Kueue priority label, no warning."""
    rendered = plan_run(spec(scheduling={"priority": "auto"}), profile, [])
    workload = rendered.manifests[-1]  # the JobSet or the Job
    assert workload["kind"] == "JobSet"
    assert "kueue.x-k8s.io/priority-class" not in workload["metadata"]["labels"]
    assert "priorityClassName" not in pod_spec(rendered.manifests)
    assert not [w for w in rendered.warnings if w.startswith("scheduling.priority")]


def test_an_mcli_priority_the_profile_does_not_map_is_the_clusters_default_with_a_warning():
    rendered = plan_run(spec(scheduling={"priority": "medium"}), KUEUE_PROFILE, [])
    assert "kueue.x-k8s.io/priority-class" not in by_kind(rendered.manifests)["JobSet"]["metadata"]["labels"]
    assert (
        "scheduling.priority: cluster kueue-cluster maps no class to medium (clusters.kueue-cluster."
        "priority_classes: low, high): the run gets the cluster's default priority"
    ) in rendered.warnings


def test_fields_the_cluster_cannot_honour_are_named_warnings():
    warned = plan_run(spec(scheduling={"preemptible": True, "priority": "low"}), PROFILE, []).warnings
    assert any(w.startswith("scheduling.preemptible: cluster gpu-cluster has no spot scheme") for w in warned)
    assert any(w.startswith("scheduling.priority: low becomes the Kueue label") for w in warned)
    assert plan_run(spec(scheduling={"max_retries": 1}), PROFILE, []).warnings == []
    [uncapped] = plan_run(spec(scheduling={"retry_on_system_failure": True}), PROFILE, []).warnings
    assert uncapped.startswith(
        "scheduling.retry_on_system_failure: the JobSet controller restarts a disrupted run without limit; "
        "a hang, a hardware fault or a collective's failure counts against max_retries once the JobSet has "
        "restarted 20 times (max_retries + 20)"
    )
    with pytest.raises(InputError, match=r"metadata.bad key: not usable as a Kubernetes annotation name"):
        plan_run(spec(metadata={"bad key": 1}), PROFILE, [])


def test_cpu_run_hides_gpus_and_skips_anti_affinity():
    ms = plan_run(*CASES["cpu"]()).manifests
    env = env_of(ms)
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "void"
    pod = pod_spec(ms)
    assert "affinity" not in pod and "tolerations" not in pod
    assert pod["containers"][0]["resources"] == {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "4Gi"}}


def test_configmap_holds_spec_and_parameters():
    cm = by_kind(plan_run(*CASES["1x8"]()).manifests)["ConfigMap"]
    assert yaml.safe_load(cm["data"]["parameters.yaml"]) == {"model": {"d_model": 768}}
    assert json.loads(cm["data"]["spec.json"])["name"] == "one-node-abc123"
    mount = pod_spec(plan_run(*CASES["1x8"]()).manifests)["containers"][0]["volumeMounts"][0]
    assert mount == {"name": "config", "mountPath": "/mnt/config", "readOnly": True}


def test_secrets_are_references_never_values():
    ms = plan_run(*CASES["secrets"]()).manifests
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
    assert vols["secret-ssh-key"]["secret"] == {
        "secretName": "ssh-key",
        "defaultMode": 0o444,
        "items": [{"key": "value", "path": "secret"}],
    }
    mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["secret-ssh-key"] == {"name": "secret-ssh-key", "mountPath": "/etc/ssh-key", "readOnly": True}
    assert pod["imagePullSecrets"] == [{"name": "registry"}]
    assert pod["serviceAccountName"] == "trainer"


def test_kueue_labels_and_priority():
    protected = by_kind(plan_run(*CASES["kueue-non-preemptible"]()).manifests)["JobSet"]
    assert protected["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "no-preempt"
    assert pod_spec(plan_run(*CASES["kueue"]()).manifests)["nodeSelector"] == {
        "cloud.google.com/gke-accelerator": "nvidia-h100-80gb"
    }
    queued = by_kind(plan_run(*CASES["kueue"]()[:2], []).manifests)["JobSet"]
    assert queued["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert queued["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "batch-low"
    plain = by_kind(plan_run(*CASES["1x8"]()).manifests)["JobSet"]
    assert not any(k.startswith("kueue.x-k8s.io/") for k in plain["metadata"]["labels"])


def test_a_queued_run_is_created_suspended_with_its_topology_on_the_pod_template():
    """With a queue, the JobSet is created suspended (Kueue admits it) and compute.topology is
    Kueue's pod-set annotation, required by default, preferred when asked."""
    run, profile, _ = CASES["kueue"]()
    ms = plan_run(run, profile, []).manifests
    for m in ms:
        validate(m, NEWEST)
    assert by_kind(ms)["JobSet"]["spec"]["suspend"] is True
    assert job_of(ms)["spec"]["template"]["metadata"]["annotations"] == {
        "kueue.x-k8s.io/podset-required-topology": "cloud.google.com/gce-topology-block"
    }
    preferred = spec(
        "near-abc123", compute={"gpus": 16, "gpu_type": "h100_80gb", "topology": {"level": "rack", "mode": "preferred"}}
    )
    ms = plan_run(preferred, KUEUE_PROFILE, []).manifests
    assert job_of(ms)["spec"]["template"]["metadata"]["annotations"] == {
        "kueue.x-k8s.io/podset-preferred-topology": "rack"
    }
    assert not [w for w in plan_run(preferred, KUEUE_PROFILE, []).warnings if "topology" in w]


def test_topology_without_a_queue_is_a_named_warning_and_renders_nothing():
    placed = spec("near-abc123", compute={"gpus": 16, "gpu_type": "h100_80gb", "topology": {"level": "rack"}})
    rendered = plan_run(placed, PROFILE, [])
    assert "annotations" not in job_of(rendered.manifests)["spec"]["template"]["metadata"]
    assert "suspend" not in by_kind(rendered.manifests)["JobSet"]["spec"]
    assert (
        "compute.topology: Kueue's topology-aware scheduling places the nodes, and cluster gpu-cluster names "
        "no queue (set clusters.gpu-cluster.queue to a Kueue LocalQueue): the nodes are placed without regard "
        "to rack"
    ) in rendered.warnings
    from launcher.backends.local.backend import unhonoured

    assert "compute.topology: ignored by the local backend (this machine runs every rank)" in unhonoured(placed)


def test_object_count_is_constant_in_nodes():
    for gpus in (8, 64, 512 * 8):
        ms = plan_run(spec(compute={"gpus": gpus, "gpu_type": "h100_80gb"}), PROFILE, []).manifests
        assert len(ms) == 2
        assert job_of(ms)["spec"]["completions"] == gpus // 8


def test_render_errors():
    with pytest.raises(InputError, match="needs an image"):
        plan_run(spec(image=None), PROFILE.model_copy(update={"image": None}), [])
    # JobSet's webhook counts the pods' 5 random characters too.
    with pytest.raises(
        InputError,
        match=r"too long for 512 nodes: pod name \(with its 5 random characters\) "
        r"'x{47}-node-0-511-abcde' exceeds 63",
    ):
        plan_run(spec("x" * 47, compute={"gpus": 4096, "gpu_type": "h100_80gb"}), PROFILE, [])
    plan_run(spec("x" * 46, compute={"gpus": 4096, "gpu_type": "h100_80gb"}), PROFILE, [])
    with pytest.raises(InputError, match="ConfigMap holds at most"):
        plan_run(spec(parameters={"blob": "x" * 600_000}), PROFILE, [])


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_yaml(case):
    """What `launcher run --dry-run -o yaml` prints: the manifests as a YAML stream.
    Regenerate with UPDATE_GOLDEN=1 after an intended change, and review the diff."""
    text = yaml.safe_dump_all(plan_run(*CASES[case]()).manifests, sort_keys=False)
    assert_golden(case, text)


def test_a_profiles_log_store_and_ttl_reach_the_pods_and_the_record():
    profile = PROFILE
    logged = profile.model_copy(
        update={"log_store": "s3://bucket/launcher/", "log_store_secret": "logs-s3", "ttl_seconds_after_finished": 3600}
    )
    ms = plan_run(spec(), logged, []).manifests
    for m in ms:
        validate(m, NEWEST)
    assert by_kind(ms)["JobSet"]["spec"]["ttlSecondsAfterFinished"] == 3600
    # On the JobSet, which deletes its Jobs with it; not on its Job template.
    assert "ttlSecondsAfterFinished" not in job_of(ms)["spec"]
    assert env_of(ms)["LAUNCHER_LOG_ARCHIVE"] == {
        "name": "LAUNCHER_LOG_ARCHIVE",
        "value": "s3://bucket/launcher/train-abc123",
    }
    notes = by_kind(ms)["ConfigMap"]["metadata"]["annotations"]
    assert notes["launcher.dev/log-archive"] == "s3://bucket/launcher/train-abc123"
    assert notes["launcher.dev/log-archive-secret"] == "logs-s3"

    plain = plan_run(spec(), profile, []).manifests  # without them: nothing of either
    assert "LAUNCHER_LOG_ARCHIVE" not in env_of(plain)
    assert "ttlSecondsAfterFinished" not in by_kind(plain)["JobSet"]["spec"]
    assert "launcher.dev/log-archive" not in by_kind(plain)["ConfigMap"]["metadata"]["annotations"]


# --- Pod Security Standards -------------------------------------------------------------------
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_pod_meets_baseline_with_no_token_and_bounded_emptydirs(case):
    template = job_of(plan_run(*CASES[case]()).manifests)["spec"]["template"]
    pod = template["spec"]
    assert podsecurity.violations("baseline", template["metadata"], pod) == []
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert all(v["emptyDir"].get("sizeLimit") for v in pod["volumes"] if "emptyDir" in v)


def test_pod_security_restricted_renders_pods_a_restricted_namespace_admits():
    template = job_of(plan_run(*CASES["restricted-inject"]()).manifests)["spec"]["template"]
    pod = template["spec"]
    assert podsecurity.violations("restricted", template["metadata"], pod) == []
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    for container in [*pod["initContainers"], *pod["containers"]]:
        assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    sizes = {v["name"]: v["emptyDir"]["sizeLimit"] for v in pod["volumes"] if "emptyDir" in v}
    assert sizes == {"dshm": "16Gi", "launcher-cache": "500Gi", "launcher-runtime": "2Gi"}


def test_the_default_profile_leaves_the_image_its_user_and_capabilities():
    """The default (pod_security: baseline) keeps a root image's apt-get working: what a
    restricted namespace would refuse is named, as the API server would name it."""
    template = job_of(plan_run(*CASES["1x8"]()).manifests)["spec"]["template"]
    assert [v.split(" (")[0] for v in podsecurity.violations("restricted", template["metadata"], template["spec"])] == [
        "allowPrivilegeEscalation != false",
        "unrestricted capabilities",
        "runAsNonRoot != true",
    ]
    assert "runAsUser" not in template["spec"]["securityContext"]


def test_apt_packages_under_restricted_is_a_field_error():
    restricted = PROFILE.model_copy(update={"pod_security": "restricted"})
    run = spec(
        "apt-abc123",
        integrations=[
            {"integration_type": "pip_packages", "packages": ["x"]},
            {"integration_type": "apt_packages", "packages": ["curl"]},
        ],
    )
    with pytest.raises(FieldError) as e:
        plan_run(run, restricted, [])
    assert e.value.field == "integrations.1"
    assert "apt-get needs root" in str(e.value) and "clusters.gpu-cluster.pod_security: restricted" in str(e.value)
    plan_run(run, PROFILE.model_copy(update={"pod_security": "baseline"}), [])  # and fine under baseline


def test_run_as_root_under_restricted_is_a_profile_error():
    from launcher.config import Profile, validate_profile

    bad = Profile("prod", "kubernetes", {"pod_security": "restricted", "run_as_user": 0})
    with pytest.raises(
        InputError, match=r"clusters.prod.run_as_user: 0 is root, which pod_security: restricted refuses"
    ):
        validate_profile(ClusterProfile, bad)
    bad = Profile("prod", "kubernetes", {"shm_size": "lots"})
    with pytest.raises(InputError, match=r"clusters.prod.shm_size: .*must be a Kubernetes quantity"):
        validate_profile(ClusterProfile, bad)
