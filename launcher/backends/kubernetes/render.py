"""What a run becomes on Kubernetes: a pure function from spec + profile to manifests.

    ConfigMap <run>   spec.json, parameters.yaml and run_config.yaml, mounted at /mnt/config;
                      also the run's durable record (annotations, see backend.py)
    Service   <run>   headless, publishNotReadyAddresses, selecting the run's pods
    Job       <run>   Indexed, completions = parallelism = nodes, backoffLimit 0

Three objects, whatever the number of nodes. Secrets are referenced by name only
(secretKeyRef, a Secret volume, imagePullSecrets): no value reaches a manifest.
The backend adds owner references (Service and ConfigMap -> Job) once the Job has a uid.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import yaml

from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.profiles import ClusterProfile, Placement, load_profile, resolve_placement
from launcher.entrypoint import contract
from launcher.errors import InputError
from launcher.secrets.kinds import project

if TYPE_CHECKING:
    from launcher.config import Profile
    from launcher.secrets.kinds import Secret
    from launcher.spec.models import RunSpec

ENTRYPOINT = ["python", "-m", "launcher.entrypoint"]
TERMINATION_GRACE_SECONDS = 45
CONFIGMAP_LIMIT = 1_000_000  # the API server refuses ConfigMaps over 1 MiB
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
# Exit codes that mean "the user's program failed": everything but success.
USER_EXIT_RULE = {"containerName": keys.CONTAINER, "operator": "NotIn", "values": [0]}


def parameters_text(spec: RunSpec) -> str:
    # Byte-for-byte what the entrypoint would write, so it accepts the read-only mount as is.
    return yaml.safe_dump(spec.parameters_for_file(), sort_keys=False)


def _quantity_cpu(cpus: float) -> str:
    return str(int(cpus)) if float(cpus).is_integer() else f"{round(cpus * 1000)}m"


def _label_value(value: str, what: str) -> str:
    if len(value) > 63 or not LABEL_VALUE.match(value):
        raise InputError(f"{what}: {value!r} is not a valid Kubernetes label value "
                         "(at most 63 letters, digits, '-', '_' or '.')")
    return value


def run_labels(name: str) -> dict[str, str]:
    return {keys.MANAGED_BY: keys.MANAGER, keys.RUN: name}


def master_addr(name: str) -> str:
    # The Indexed Job names rank 0's hostname <job>-0; the Service <run> is its subdomain.
    return f"{name}-0.{name}"


def _as_cluster_profile(profile: Profile | ClusterProfile) -> ClusterProfile:
    return profile if isinstance(profile, ClusterProfile) else load_profile(profile)


def render_run(spec: RunSpec, profile: Profile | ClusterProfile, secrets: list[Secret], *,
               attempt: int = 1) -> list[dict[str, Any]]:
    """The manifests of a run: [ConfigMap, Service, Job]. Pure: no I/O, no secret value read."""
    cp = _as_cluster_profile(profile)
    placement = resolve_placement(spec, cp)
    name = spec.name
    last_host = f"{name}-{placement.nodes - 1}"
    if len(last_host) > 63:
        raise InputError(f"name: the run name {name!r} is too long for {placement.nodes} nodes: "
                         f"pod hostname {last_host!r} exceeds 63 characters")
    # The record says what the run got: nodes and GPUs resolved from gpus and gpus_per_node.
    compute = spec.compute.model_copy(update={"nodes": placement.nodes, "gpus": placement.gpus,
                                               "gpu_type": placement.gpu_type_name})
    spec = spec.model_copy(update={"compute": compute})
    return [render_configmap(spec, cp, secrets), render_service(spec, cp),
            render_job(spec, cp, secrets, placement, attempt=attempt)]


def render_configmap(spec: RunSpec, profile: ClusterProfile, secrets: list[Secret]) -> dict[str, Any]:
    submitted = spec.to_submitted()
    data = {
        keys.SPEC_FILE: json.dumps(submitted, sort_keys=True),
        keys.PARAMETERS_FILE: parameters_text(spec),
        keys.RUN_CONFIG_FILE: yaml.safe_dump(submitted, sort_keys=False),
    }
    size = sum(len(k) + len(v.encode()) for k, v in data.items())
    if size > CONFIGMAP_LIMIT:
        raise InputError(f"parameters: the spec and parameters take {size} bytes; a Kubernetes ConfigMap "
                         f"holds at most {CONFIGMAP_LIMIT} (move large values into files the command reads)")
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": spec.name,
            "namespace": profile.namespace,
            "labels": run_labels(spec.name),
            "annotations": {keys.RECORD_SECRETS: json.dumps(secret_refs(secrets))},
        },
        "data": data,
    }


def secret_refs(secrets: list[Secret]) -> list[dict[str, Any]]:
    """What a retry needs to render the Job again: names, kinds, options and key names, no values."""
    return [{"name": s.name, "kind": s.kind.value, "options": dict(s.options), "keys": sorted(s.data)}
            for s in sorted(secrets, key=lambda s: s.name)]


def secrets_from_refs(refs: list[dict[str, Any]]) -> list[Secret]:
    from launcher.secrets.kinds import Secret, SecretKind

    return [Secret(name=r["name"], kind=SecretKind(r["kind"]), data=dict.fromkeys(r.get("keys", []), ""),
                   options=r.get("options", {})) for r in refs]


def render_service(spec: RunSpec, profile: ClusterProfile) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": spec.name, "namespace": profile.namespace, "labels": run_labels(spec.name)},
        "spec": {
            "clusterIP": "None",
            # DNS records exist before pods are Ready: rank 0 must be resolvable while starting.
            "publishNotReadyAddresses": True,
            "selector": {keys.RUN: spec.name},
            "ports": [{"name": "rendezvous", "port": profile.master_port, "targetPort": profile.master_port}],
        },
    }


def _secret_parts(secrets: list[Secret]) -> tuple[list[dict], list[dict], list[dict], list[dict], list[str], list[str]]:
    """env, volumes, mounts, imagePullSecrets, masked env names, masked file paths."""
    env: list[dict] = []
    volumes: list[dict] = []
    mounts: list[dict] = []
    pulls: list[dict] = []
    mask_env: list[str] = []
    mask_files: list[str] = []
    for s in sorted(secrets, key=lambda s: s.name):
        p = project(s)
        for var, key in p.env.items():
            env.append({"name": var, "valueFrom": {"secretKeyRef": {"name": s.name, "key": key}}})
            mask_env.append(var)
        if p.files:
            vol = f"secret-{s.name}"[:63].rstrip("-")
            volumes.append({"name": vol, "secret": {
                "secretName": s.name,
                "defaultMode": 0o400,
                "items": [{"key": key, "path": fname} for fname, key in sorted(p.files.items())],
            }})
            mounts.append({"name": vol, "mountPath": p.mount_path, "readOnly": True})
            mask_files.extend(f"{p.mount_path}/{fname}" for fname in sorted(p.files))
        for var, value in p.plain_env.items():
            env.append({"name": var, "value": value.replace("{mount}", p.mount_path or "")})
        if p.image_pull:
            pulls.append({"name": s.name})
    return env, volumes, mounts, pulls, mask_env, mask_files


def _resources(spec: RunSpec, placement: Placement) -> dict[str, Any]:
    limits: dict[str, Any] = {}
    requests: dict[str, Any] = {}
    if placement.gpus_per_node:
        limits[placement.gpu_type.resource] = str(placement.gpus_per_node)
        requests[placement.gpu_type.resource] = str(placement.gpus_per_node)
    if spec.compute.cpus:
        requests["cpu"] = _quantity_cpu(spec.compute.cpus)
    if spec.compute.memory:
        requests["memory"] = limits["memory"] = spec.compute.memory
    out = {}
    if limits:
        out["limits"] = limits
    if requests:
        out["requests"] = requests
    return out


def _affinity(name: str, placement: Placement) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if placement.gpu_type.node_affinity:
        exprs = [{"key": k, "operator": "In", "values": list(v)} for k, v in sorted(placement.gpu_type.node_affinity.items())]
        out["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": exprs}]}}
    if placement.nodes > 1:
        # One rank per node: two ranks on one node would fight over its GPUs.
        out["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {keys.RUN: name}},
            "topologyKey": "kubernetes.io/hostname",
        }]}
    return out


def _tolerations(placement: Placement) -> list[dict[str, Any]]:
    out = list(placement.gpu_type.tolerations)
    if placement.gpus_per_node:
        for effect in ("NoSchedule", "NoExecute"):
            out.append({"key": placement.gpu_type.resource, "operator": "Exists", "effect": effect})
    return out


def kueue_labels(spec: RunSpec, profile: ClusterProfile) -> dict[str, str]:
    out: dict[str, str] = {}
    if profile.queue:
        out[keys.KUEUE_QUEUE] = _label_value(profile.queue, f"clusters.{profile.name}.queue")
    s = spec.scheduling
    priority = None
    if s.preemptible is False and profile.non_preemptible_priority_class:
        priority = profile.non_preemptible_priority_class
    elif s.priority:
        priority = profile.priority_classes.get(s.priority, s.priority)
    if priority:
        out[keys.KUEUE_PRIORITY] = _label_value(priority, "scheduling.priority")
    return out


def render_job(spec: RunSpec, profile: ClusterProfile, secrets: list[Secret], placement: Placement, *,
               attempt: int = 1) -> dict[str, Any]:
    name = spec.name
    image = spec.image or profile.image
    if not image:
        raise InputError(f"image: a Kubernetes run needs an image; set image in the spec, "
                         f"or image in the profile of cluster {profile.name}")
    s_env, s_volumes, s_mounts, pulls, mask_env, mask_files = _secret_parts(secrets)
    env: list[dict[str, Any]] = [
        {"name": contract.SPEC, "value": f"{keys.CONFIG_MOUNT}/{keys.SPEC_FILE}"},
        {"name": contract.BACKEND, "value": "kubernetes"},
        {"name": contract.CONFIG_DIR, "value": keys.CONFIG_MOUNT},
        {"name": "NODE_RANK", "valueFrom": {"fieldRef": {
            "fieldPath": f"metadata.annotations['{keys.COMPLETION_INDEX}']"}}},
        {"name": contract.NODES, "value": str(placement.nodes)},
        {"name": contract.GPUS_PER_NODE, "value": str(placement.gpus_per_node)},
        {"name": "MASTER_ADDR", "value": master_addr(name)},
        {"name": "MASTER_PORT", "value": str(profile.master_port)},
        {"name": "LAUNCHER_ATTEMPT", "value": str(attempt)},
    ]
    taken = {e["name"] for e in env} | {e["name"] for e in s_env}
    env += [{"name": k, "value": v} for k, v in spec.env_for_run(name).items() if k not in taken]
    env += s_env
    if not placement.gpus_per_node:
        env.append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"})
    env.append({"name": contract.MASK_ENV, "value": ",".join(mask_env)})
    env.append({"name": contract.MASK_FILES, "value": ":".join(mask_files)})

    shm: dict[str, Any] = {"medium": "Memory"}
    if profile.shm_size:
        shm["sizeLimit"] = profile.shm_size
    container: dict[str, Any] = {
        "name": keys.CONTAINER,
        "image": image,
        "command": list(ENTRYPOINT),
        "env": env,
        "volumeMounts": [
            {"name": "config", "mountPath": keys.CONFIG_MOUNT, "readOnly": True},
            {"name": "dshm", "mountPath": "/dev/shm"},
            *s_mounts,
        ],
    }
    resources = _resources(spec, placement)
    if resources:
        container["resources"] = resources
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "subdomain": name,
        # Longer than the entrypoint's LAUNCHER_GRACE_SECONDS (30): it can pass SIGTERM on and reap.
        "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
        "enableServiceLinks": False,
        "containers": [container],
        "volumes": [
            {"name": "config", "configMap": {"name": name}},
            {"name": "dshm", "emptyDir": shm},
            *s_volumes,
        ],
    }
    if profile.service_account:
        pod_spec["serviceAccountName"] = profile.service_account
    if placement.gpu_type.node_selector:
        pod_spec["nodeSelector"] = dict(placement.gpu_type.node_selector)
    affinity = _affinity(name, placement)
    if affinity:
        pod_spec["affinity"] = affinity
    tolerations = _tolerations(placement)
    if tolerations:
        pod_spec["tolerations"] = tolerations
    if pulls:
        pod_spec["imagePullSecrets"] = pulls

    job_spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": placement.nodes,
        "parallelism": placement.nodes,
        # A static rendezvous cannot take a replacement rank: the launcher restarts the group.
        "backoffLimit": 0,
        "podFailurePolicy": {"rules": [
            # Preemption or a node drain: a system failure (the launcher may retry it for free).
            {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            {"action": "FailJob", "onExitCodes": dict(USER_EXIT_RULE)},
        ]},
        "template": {
            "metadata": {"labels": {**run_labels(name), keys.ATTEMPT: str(attempt)}},
            "spec": pod_spec,
        },
    }
    if spec.scheduling.max_duration:
        job_spec["activeDeadlineSeconds"] = max(1, int(spec.scheduling.max_duration * 3600))
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": profile.namespace,
            "labels": {**run_labels(name), **kueue_labels(spec, profile)},
            "annotations": {keys.ATTEMPT: str(attempt)},
        },
        "spec": job_spec,
    }


def owner_reference(job: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "name": job["metadata"]["name"],
            "uid": job["metadata"]["uid"], "controller": False}
