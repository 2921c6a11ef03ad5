"""What a run becomes on Kubernetes: a pure function from spec + profile to manifests.

Two objects (the cluster must serve JobSet, jobset.x-k8s.io/v1alpha2):

    ConfigMap <run>   spec.json, parameters.yaml and run_config.yaml, mounted at /mnt/config;
                      also the run's durable record (annotations, see backend.py)
    JobSet    <run>   one replicated job "node" of one Indexed Job, completions = parallelism
                      = nodes, backoffLimit 0; the JobSet controller restarts the whole group
                      (failurePolicy), and its headless Service <run> (network) gives rank 0
                      the name <run>-node-0-0.<run>

The count does not depend on the number of nodes. A restart (`run -r`) renders a new
JobSet from the spec its record keeps, re-validated, with the restarting user's profile;
its first attempt is numbered on (the `launcher.dev/attempt` label, LAUNCHER_ATTEMPT). Secrets are referenced by
name only (secretKeyRef, a Secret volume, imagePullSecrets): no value reaches a manifest.

The entrypoint reads the run's plan, /mnt/config/plan.json (launcher.pod.plan), in every
mode. In `zipapp` mode (the default) the ConfigMap also carries the entrypoint as a zipapp
(launcher.pod.zipapp, some 67 kB), and a POSIX sh shim runs it with the image's own
python3 (3.8 or newer, `-I -S`): any image with a Python runs, with nothing of ours to
pull. In `inject` mode, for images without Python, an init container from the runtime image
copies a self-contained Python with the launcher into the emptyDir /launcher, and the
user's image runs /launcher/python/bin/python3 -I -m launcher.entrypoint. Either way the
command runs with the image's own bash, python and pip. In `image` mode the image already
has the launcher: `python -m launcher.entrypoint`.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml

from launcher.backends.base import Plan
from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.profiles import (
    ClusterProfile,
    Placement,
    default_requests,
    load_profile,
    resolve_placement,
)
from launcher.errors import FieldError, InputError
from launcher.pod import contract, zipapp
from launcher.pod.code_archive import ARCHIVE_NAME
from launcher.pod.logarchive import LOG_ARCHIVE, archive_url, pod_store_problem
from launcher.pod.plan import PLAN_FILE, ZIPAPP_FILE
from launcher.secrets.kinds import project
from launcher.spec.models import AUTO_PRIORITY, MCLI_PRIORITIES
from launcher.spec.plan import parameters_text, plan_text
from launcher.spec.retry import JOBSET_NO_BACKOFF, RetryPolicy

if TYPE_CHECKING:
    from launcher.config import Profile
    from launcher.secrets.kinds import Secret
    from launcher.spec.models import RunSpec

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
REPLICATED_JOB = "node"
IMAGE_ENTRYPOINT = ["python", "-m", "launcher.entrypoint"]
RUNTIME_VOLUME = "launcher-runtime"
RUNTIME_MOUNT = "/launcher"
# -I: our interpreter ignores PYTHON* variables and the user's site; nothing of it leaks to the command.
INJECTED_ENTRYPOINT = [f"{RUNTIME_MOUNT}/python/bin/python3", "-I", "-m", "launcher.entrypoint"]
# On the runtime image's PATH (images/runtime/Dockerfile): copies the runtime into the volume.
RUNTIME_INSTALL = ["launcher-runtime-install", RUNTIME_MOUNT]
# The injected runtime (a standalone CPython with the launcher) is some 150 MB: room to spare.
RUNTIME_SIZE = "2Gi"
HOSTNAME_LABEL = "kubernetes.io/hostname"
# What the Job controller writes when the DisruptionTarget podFailurePolicy rule fails a Job:
# "Pod <ns>/<pod> has condition DisruptionTarget matching FailJob rule at index 0".
DISRUPTION_MESSAGE = "condition DisruptionTarget"
TERMINATION_GRACE_SECONDS = 45
CONFIGMAP_LIMIT = 1_000_000  # the API server refuses ConfigMaps over 1 MiB
# A snapshot travels base64-encoded in one object: 700 KiB packed is some 956 kB, under CONFIGMAP_LIMIT.
CODE_LIMIT = 700 * 1024
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
ANNOTATION_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
# The entrypoint's exit codes for a failure of a system class (a hang, a hardware fault, a
# collective's failure): the Job's failure message names the code and this rule's index.
SYSTEM_EXIT_CODES = sorted(contract.SYSTEM_EXIT_CODES)  # the API wants them ordered
# What the Job controller writes when that rule (at index 1) fails a Job: "Container main for
# pod <ns>/<pod> failed with exit code 70 matching FailJob rule at index 1".
SYSTEM_EXIT_MESSAGE = f"with exit code ({'|'.join(map(str, SYSTEM_EXIT_CODES))}) matching FailJob rule at index 1"
# Exit codes that mean "the user's program failed": everything else but success.
USER_EXIT_RULE = {"containerName": keys.CONTAINER, "operator": "NotIn", "values": [0]}
MAX_INDEXED_COMPLETIONS = 100_000  # the API server refuses an Indexed Job of more
INT64_MAX = 2**63 - 1  # activeDeadlineSeconds is an int64


@dataclass
class Rendered:
    """The manifests of a run (its record, then its JobSet), and the named warnings about
    fields the cluster cannot fully honour."""

    manifests: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)


def _quantity_cpu(cpus: float) -> str:
    return str(int(cpus)) if float(cpus).is_integer() else f"{round(cpus * 1000)}m"


def _label_value(value: str, what: str) -> str:
    if len(value) > 63 or not LABEL_VALUE.match(value):
        raise InputError(
            f"{what}: {value!r} is not a valid Kubernetes label value (at most 63 letters, digits, '-', '_' or '.')"
        )
    return value


def run_labels(name: str) -> dict[str, str]:
    return {keys.MANAGED_BY: keys.MANAGER, keys.RUN: name}


def rank_hosts(name: str) -> str:
    """Each node rank's DNS name under the JobSet's headless Service <run>, `{rank}` for its
    index: JobSet names its pods' hostnames <jobset>-<replicatedJob>-<jobIndex>-<podIndex>."""
    return f"{name}-{REPLICATED_JOB}-0-{{rank}}.{name}"


def master_addr(name: str) -> str:
    """Rank 0's DNS name."""
    return rank_hosts(name).replace("{rank}", "0")


PROGRESS_PORT = 29470
"""Where rank 0's entrypoint hears the other ranks' progress (launcher.entrypoint.progress),
in its own pod: not MASTER_PORT, which the command's rendezvous takes for the whole run,
nor torchrun's c10d default (29400), and below the ephemeral ports (32768 on) that NCCL,
gloo and outgoing connections are given."""


def _progress_env(spec: RunSpec, profile: ClusterProfile, placement: Placement) -> list[dict[str, Any]]:
    """Where the ranks are on different nodes: the progress channel's port, the ranks' host
    names (rank 0 takes reports from their addresses only), and each rank's node."""
    if placement.nodes < 2:
        return []
    taken = {profile.master_port, *(p.port for p in spec.ports or [])}
    port = next(p for p in range(PROGRESS_PORT, 65536) if p not in taken)
    return [
        {"name": contract.PROGRESS_PORT, "value": str(port)},
        {"name": contract.RANK_HOSTS, "value": rank_hosts(spec.name)},
        {"name": contract.NODE_NAME, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
    ]


def _as_cluster_profile(profile: Profile | ClusterProfile) -> ClusterProfile:
    return profile if isinstance(profile, ClusterProfile) else load_profile(profile)


def check_hostnames(name: str, nodes: int) -> None:
    """Refuse a run name whose pods' names would exceed a DNS label (63 characters): the
    longest pod name as JobSet's webhook checks it (<run>-node-0-<index> and the pod's 5
    random characters). Run names are cut to fit up to 10,000 nodes (launcher.spec.names),
    so only more nodes meet this."""
    longest, what = f"{name}-{REPLICATED_JOB}-0-{nodes - 1}-abcde", "pod name (with its 5 random characters)"
    if len(longest) > 63:
        raise InputError(
            f"name: the run name {name!r} is too long for {nodes} nodes: {what} {longest!r} exceeds 63 characters"
        )


def plan_run(
    spec: RunSpec,
    profile: Profile | ClusterProfile,
    secrets: list[Secret],
    *,
    placement: Placement | None = None,
    attempt: int = 1,
    run_secret: bool = False,
    exclude_nodes: tuple[str, ...] = (),
) -> Rendered:
    """The manifests of a run and the warnings about it. Pure: no I/O, no secret value read.
    `placement` None resolves it here (the backend passes the one its check resolved);
    `attempt` numbers the JobSet's first attempt (a restart's is N+1); `run_secret`: the
    pods take their secrets from the run's own Secret (keys.run_secret_name), whose kinds
    the render does not know (an offline dry-run's); `exclude_nodes` are the nodes its pods
    must keep off (a restart's, after a hardware or collective failure)."""
    cp = _as_cluster_profile(profile)
    if placement is None:
        placement = resolve_placement(spec, cp)
    if placement.nodes > MAX_INDEXED_COMPLETIONS:
        raise FieldError(
            "compute.nodes" if spec.compute.nodes else "compute.gpus",
            f"{placement.nodes:,} nodes is more than Kubernetes runs in one Indexed Job "
            f"(at most {MAX_INDEXED_COMPLETIONS:,} pods)",
        )
    check_hostnames(spec.name, placement.nodes)
    check_pod_security(spec, cp)
    # The record says what the run got: nodes and GPUs resolved from gpus and gpus_per_node.
    compute = spec.compute.model_copy(
        update={"nodes": placement.nodes, "gpus": placement.gpus, "gpu_type": placement.gpu_type_name}
    )
    spec = spec.model_copy(update={"compute": compute})
    configmap = render_configmap(spec, cp, secrets)
    manifests = [
        configmap,
        render_jobset(
            spec, cp, secrets, placement, attempt=attempt, run_secret=run_secret, exclude_nodes=exclude_nodes
        ),
    ]
    return Rendered(manifests, plan_warnings(spec, cp))


def dry_run(
    spec: RunSpec,
    profile: ClusterProfile,
    secrets: list[Secret] | None,
    *,
    placement: Placement | None = None,
    code=None,
) -> Plan:
    """`run --dry-run`: the manifests as a List, from the profile alone. Secrets live in the
    cluster, so with `secrets` None they are not read and the note says which the run would use."""
    notes = []
    run_secret = secrets is None and spec.secrets != []
    if run_secret:
        # The kinds (which variable, which file) live in the cluster: the pods take them from
        # one Secret of the run's, which they cannot start without, never from nothing.
        which = ", ".join(spec.secrets) if spec.secrets is not None else "every secret the launcher stored there"
        command = shlex.join(
            ["launcher", "secret", "bundle", spec.name, *(spec.secrets or []), "--cluster", profile.name]
        )
        notes.append(
            f"secrets: a dry-run does not contact cluster {profile.name}, so the pods take the run's "
            f"secrets ({which}, in {profile.where}) from its Secret {keys.run_secret_name(spec.name)}, "
            f"and cannot start until it exists: `{command}` creates it (the values never print)"
        )
    rendered = plan_run(spec, profile, secrets or [], placement=placement, run_secret=run_secret)
    if code is not None:
        kind = "Secret" if profile.code_in_secret else "ConfigMap"
        where = (
            code_url(profile, spec.name)
            if code_in_store(spec, profile)
            else f"the {kind} {keys.code_object_name(spec.name)}, left out of this listing"
        )
        notes.append(f"code: the snapshot {code.digest} ({code.files} files, {code.size} bytes packed) goes to {where}")
    return Plan({"apiVersion": "v1", "kind": "List", "items": rendered.manifests}, rendered.warnings, notes)


def code_in_store(spec: RunSpec, profile: ClusterProfile) -> bool:
    """A snapshot past what a ConfigMap holds goes to the profile's code_store."""
    return bool(profile.code_store and spec.code is not None and (spec.code.size or 0) > CODE_LIMIT)


def code_url(profile: ClusterProfile, name: str) -> str:
    """Where run `name`'s snapshot goes in the profile's code_store (asked where code_in_store())."""
    if not profile.code_store:
        raise ValueError(f"profile {profile.name} has no code_store")  # a caller's bug: code_in_store() is false
    return f"{profile.code_store.rstrip('/')}/{name}/{ARCHIVE_NAME}"


def _code_plan(spec: RunSpec, profile: ClusterProfile) -> dict[str, Any] | None:
    """Where a rank finds the run's code snapshot: the digest the spec records, and the
    mounted file or the code_store's URL."""
    if spec.code is None or not spec.code.digest:
        return None
    if profile.code_store and code_in_store(spec, profile):  # code_in_store() asks for a code_store too
        problem = pod_store_problem(profile.code_store)
        if problem:
            raise InputError(f"config.yaml: clusters.{profile.name}.code_store: {problem}")
        return {"digest": spec.code.digest, "url": code_url(profile, spec.name)}
    return {"digest": spec.code.digest, "file": f"{keys.CODE_MOUNT}/{ARCHIVE_NAME}"}


def render_code_object(spec: RunSpec, profile: ClusterProfile, data: bytes) -> dict[str, Any]:
    """The ConfigMap (or, with the profile's code_in_secret, the Secret) <run>-code that
    carries the run's packed code snapshot; its digest is in the spec and the plan."""
    kind = "Secret" if profile.code_in_secret else "ConfigMap"
    encoded = base64.b64encode(data).decode()
    body: dict[str, Any] = (
        {"type": "Opaque", "data": {ARCHIVE_NAME: encoded}}
        if kind == "Secret"
        else {"binaryData": {ARCHIVE_NAME: encoded}}
    )
    return {
        "apiVersion": "v1",
        "kind": kind,
        "metadata": {
            "name": keys.code_object_name(spec.name),
            "namespace": profile.namespace,
            "labels": {keys.CODE_OF: spec.name},
        },
        **body,
    }


def render_configmap(spec: RunSpec, profile: ClusterProfile, secrets: list[Secret]) -> dict[str, Any]:
    submitted = spec.to_submitted()
    data = {
        keys.SPEC_FILE: json.dumps(submitted, sort_keys=True),
        # Byte-for-byte what the entrypoint would write, so it accepts the read-only mount as is.
        keys.PARAMETERS_FILE: parameters_text(spec),
        keys.RUN_CONFIG_FILE: yaml.safe_dump(submitted, sort_keys=False),
        PLAN_FILE: plan_text(spec, parameters_in_place=True, code=_code_plan(spec, profile)),  # beside parameters.yaml
    }
    binary = {}
    if profile.entrypoint_mode == "zipapp":
        binary[ZIPAPP_FILE] = base64.b64encode(zipapp.build()).decode()
    size = sum(len(k) + len(v.encode()) for k, v in {**data, **binary}.items())
    if size > CONFIGMAP_LIMIT:
        with_zipapp = " with the entrypoint's zipapp" if binary else ""
        raise InputError(
            f"parameters: the spec and parameters take {size} bytes{with_zipapp}; a Kubernetes "
            f"ConfigMap holds at most {CONFIGMAP_LIMIT} (move large values into files the command reads)"
        )
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": spec.name,
            "namespace": profile.namespace,
            "labels": run_labels(spec.name),
            "annotations": {
                keys.RECORD_SECRETS: json.dumps(secret_refs(secrets)),
                **_archive_annotations(spec, profile),
                **_ttl_annotation(profile),
            },
        },
        "data": data,
        **({"binaryData": binary} if binary else {}),
    }


def _ttl_annotation(profile: ClusterProfile) -> dict[str, str]:
    ttl = profile.ttl_seconds_after_finished
    return {} if ttl is None else {keys.RECORD_TTL: str(ttl)}


def _archive_annotations(spec: RunSpec, profile: ClusterProfile) -> dict[str, str]:
    """Where the record says the run's log archive is (its readers may use another profile)."""
    if not profile.log_store:
        return {}
    problem = pod_store_problem(profile.log_store)
    if problem:  # what the pods would say in their logs, before the run
        raise InputError(f"config.yaml: clusters.{profile.name}.log_store: {problem}")
    out = {keys.RECORD_LOG_ARCHIVE: archive_url(profile.log_store, spec.name)}
    if profile.log_store_secret:
        out[keys.RECORD_LOG_ARCHIVE_SECRET] = profile.log_store_secret
    return out


def secret_refs(secrets: list[Secret]) -> list[dict[str, Any]]:
    """The secrets a run used, as its record keeps them: names, kinds, options and key names,
    no values (a restart looks each one up again in the user's own store, by name)."""
    return [
        {"name": s.name, "kind": s.kind.value, "options": dict(s.options), "keys": sorted(s.data)}
        for s in sorted(secrets, key=lambda s: s.name)
    ]


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
            volumes.append(
                {
                    "name": vol,
                    "secret": {
                        "secretName": s.name,
                        # Readable by the image's user, whoever it is: the render does not know it,
                        # and a fixed fsGroup is refused where one is assigned (OpenShift's SCCs).
                        "defaultMode": 0o444,
                        "items": [{"key": key, "path": fname} for fname, key in sorted(p.files.items())],
                    },
                }
            )
            mounts.append({"name": vol, "mountPath": p.mount_path, "readOnly": True})
            mask_files.extend(f"{p.mount_path}/{fname}" for fname in sorted(p.files))
        for var, value in p.plain_env.items():
            env.append({"name": var, "value": value.replace("{mount}", p.mount_path or "")})
        if p.image_pull:
            pulls.append({"name": s.name})
    return env, volumes, mounts, pulls, mask_env, mask_files


def _run_secret_volume(run: str) -> tuple[list[dict], list[dict]]:
    """The run's own Secret as a volume (its files, keys `<secret>.<file>`), not optional."""
    volume = {"name": "run-secrets", "secret": {"secretName": keys.run_secret_name(run), "defaultMode": 0o444}}
    return [volume], [{"name": "run-secrets", "mountPath": keys.RUN_SECRET_MOUNT, "readOnly": True}]


def _resources(spec: RunSpec, profile: ClusterProfile, placement: Placement) -> dict[str, Any]:
    """GPUs requested as their limit; CPUs and memory from the spec, else a share of the node
    (default_requests), requested without a CPU limit: the pod is Burstable, never BestEffort.
    A spec's memory is also its limit."""
    limits: dict[str, Any] = {}
    requests: dict[str, Any] = {}
    if placement.gpus_per_node:
        limits[placement.gpu_type.resource] = str(placement.gpus_per_node)
        requests[placement.gpu_type.resource] = str(placement.gpus_per_node)
    cpus, memory = default_requests(profile, placement)
    requests["cpu"] = _quantity_cpu(spec.compute.cpus or cpus)
    if spec.compute.memory:
        requests["memory"] = limits["memory"] = spec.compute.memory
    else:
        requests["memory"] = memory
    out = {}
    if limits:
        out["limits"] = limits
    out["requests"] = requests
    return out


def _node_affinity_terms(spec: RunSpec, profile: ClusterProfile, placement: Placement) -> list[dict[str, Any]]:
    """Required node affinity expressions, ANDed: the gpu_type's labels, compute.node_names,
    and keeping off spot nodes when scheduling.preemptible is false."""
    exprs = [
        {"key": k, "operator": "In", "values": list(v)} for k, v in sorted(placement.gpu_type.node_affinity.items())
    ]
    if spec.compute.node_names:
        exprs.append({"key": HOSTNAME_LABEL, "operator": "In", "values": list(spec.compute.node_names)})
    scheme = profile.spot_scheme()
    if spec.scheduling.preemptible is False and scheme:
        # NotIn also matches nodes without the label: every node that is not spot.
        exprs.append({"key": scheme.label, "operator": "NotIn", "values": [scheme.value]})
    return exprs


def _affinity(
    spec: RunSpec, profile: ClusterProfile, placement: Placement, exclude_nodes: tuple[str, ...] = ()
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    exprs = _node_affinity_terms(spec, profile, placement)
    term: dict[str, Any] = {"matchExpressions": exprs} if exprs else {}
    if exclude_nodes:
        # By the node's name (a field), not its hostname label, which a node may set otherwise;
        # ANDed with the expressions of the same term.
        term["matchFields"] = [{"key": "metadata.name", "operator": "NotIn", "values": sorted(exclude_nodes)}]
    if term:
        out["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    if placement.nodes > 1:
        # One rank per node: two ranks on one node would fight over its GPUs.
        out["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {keys.RUN: spec.name}},
                    "topologyKey": HOSTNAME_LABEL,
                }
            ]
        }
    return out


def _node_selector(spec: RunSpec, profile: ClusterProfile, placement: Placement) -> dict[str, str]:
    out = dict(placement.gpu_type.node_selector)
    if spec.compute.instance:
        out[profile.instance_label] = _label_value(spec.compute.instance, "compute.instance")
    scheme = profile.spot_scheme()
    if spec.scheduling.preemptible and scheme:
        out[scheme.label] = scheme.value
    return out


def _tolerations(spec: RunSpec, profile: ClusterProfile, placement: Placement) -> list[dict[str, Any]]:
    out = list(placement.gpu_type.tolerations)
    if placement.gpus_per_node:
        for effect in ("NoSchedule", "NoExecute"):
            out.append({"key": placement.gpu_type.resource, "operator": "Exists", "effect": effect})
    scheme = profile.spot_scheme()
    if spec.scheduling.preemptible and scheme and scheme.taint:
        out.append({"key": scheme.label, "operator": "Equal", "value": scheme.value, "effect": "NoSchedule"})
    return out


def priority_class(spec: RunSpec, profile: ClusterProfile) -> str | None:
    """The class scheduling.priority names on this cluster. mcli's names that the profile does
    not map, `auto` (mcli's default) among them, are the cluster's default: no class (plan_warnings
    names the unmapped ones). Any other unknown priority is an error."""
    s = spec.scheduling
    if s.preemptible is False and profile.non_preemptible_priority_class:
        return profile.non_preemptible_priority_class
    if not s.priority:
        return None
    if s.priority in profile.priority_classes:
        return profile.priority_classes[s.priority]
    if s.priority == AUTO_PRIORITY or s.priority in MCLI_PRIORITIES:
        return None
    known = ", ".join([*profile.priority_classes, AUTO_PRIORITY])
    raise InputError(
        f"scheduling.priority: unknown priority {s.priority!r} on cluster {profile.name} "
        f"(known: {known}; map more under clusters.{profile.name}.priority_classes)"
    )


def kueue_labels(spec: RunSpec, profile: ClusterProfile) -> dict[str, str]:
    out: dict[str, str] = {}
    if profile.queue:
        out[keys.KUEUE_QUEUE] = _label_value(profile.queue, f"clusters.{profile.name}.queue")
    priority = priority_class(spec, profile)
    if priority and profile.priority_class_kind == "WorkloadPriorityClass":
        out[keys.KUEUE_PRIORITY] = _label_value(priority, "scheduling.priority")
    return out


def metadata_annotations(spec: RunSpec) -> dict[str, str]:
    """The spec's metadata keys as annotations under our prefix; values as text (JSON if not a string)."""
    out: dict[str, str] = {}
    for key, value in spec.metadata.items():
        name = str(key)
        if len(name) > 63 or not ANNOTATION_NAME.match(name):
            raise InputError(
                f"metadata.{name}: not usable as a Kubernetes annotation name "
                "(at most 63 letters, digits, '-', '_' or '.', starting and ending alphanumeric)"
            )
        out[f"{keys.METADATA_PREFIX}/{name}"] = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return out


def plan_warnings(spec: RunSpec, profile: ClusterProfile) -> list[str]:
    """Fields this cluster cannot fully honour, named: shown at dry-run and submit, never dropped in silence."""
    out: list[str] = []
    s = spec.scheduling
    if (
        s.preemptible is not None
        and profile.spot_scheme() is None
        and not (s.preemptible is False and profile.non_preemptible_priority_class)
    ):
        out.append(
            f"scheduling.preemptible: cluster {profile.name} has no spot scheme "
            f"(set clusters.{profile.name}.spot to gke, karpenter or generic): the pods may land on any node"
        )
    mapped = bool(s.priority) and s.priority in profile.priority_classes
    if s.priority and not mapped and s.priority != AUTO_PRIORITY:
        out.append(
            f"scheduling.priority: cluster {profile.name} maps no class to {s.priority} "
            f"(clusters.{profile.name}.priority_classes: {', '.join(profile.priority_classes) or 'none'}): "
            "the run gets the cluster's default priority"
        )
    if mapped and profile.priority_class_kind == "WorkloadPriorityClass" and not profile.queue:
        out.append(
            f"scheduling.priority: {s.priority} becomes the Kueue label {keys.KUEUE_PRIORITY}, which only "
            f"Kueue reads, and cluster {profile.name} names no queue (set clusters.{profile.name}.queue, "
            "or priority_class_kind: PriorityClass)"
        )
    if spec.compute.topology is not None and not profile.queue:
        out.append(
            f"compute.topology: Kueue's topology-aware scheduling places the nodes, and cluster {profile.name} "
            f"names no queue (set clusters.{profile.name}.queue to a Kueue LocalQueue): the nodes are placed "
            f"without regard to {spec.compute.topology.level}"
        )
    policy = RetryPolicy.from_spec(spec)
    if policy.retry_on_system_failure:
        out.append(
            f"scheduling.retry_on_system_failure: the JobSet controller restarts a disrupted run without limit; "
            f"a hang, a hardware fault or a collective's failure counts against max_retries once the JobSet has "
            f"restarted {policy.max_retries + policy.max_system_retries} times (max_retries + "
            f"{policy.max_system_retries}), where the local backend caps free retries at {policy.max_system_retries}"
        )
    if s.retry_backoff is not None:
        out.append(f"scheduling.retry_backoff: {JOBSET_NO_BACKOFF}; it applies on the local backend")
    if spec.resilience is not None:  # docs/resilience.md: what the pods do, what is not built here
        if spec.resilience.exclude_faulty_nodes:
            out.append(
                "resilience.exclude_faulty_nodes: a restart by the JobSet controller (max_retries) may run "
                "on a faulty node again unless the cluster taints it NoSchedule (a JobSet's pod template cannot "
                "change); `launcher run -r` keeps off the nodes a hardware or collective failure was pinned to"
            )
    return out


JOBSET_INSTALL = (
    "kubectl apply --server-side -f https://github.com/kubernetes-sigs/jobset/releases/download/v0.12.0/manifests.yaml"
)


def no_jobset_error(cluster: str) -> str:
    """What `cluster add`, `cluster check` and `run` say of a cluster that serves no JobSet."""
    return (
        f"cluster {cluster} serves no JobSet (jobset.x-k8s.io/v1alpha2), which runs every launcher run "
        f"on Kubernetes; install it: {JOBSET_INSTALL}"
    )


def _entrypoint(
    profile: ClusterProfile, image: str
) -> tuple[list[str], list[dict], list[dict], list[dict], list[dict]]:
    """command, initContainers, extra volumes, extra mounts, extra env of the main container."""
    if profile.entrypoint_mode == "image":
        return list(IMAGE_ENTRYPOINT), [], [], [], []
    if profile.entrypoint_mode == "zipapp":
        return (list(zipapp.COMMAND), [], [], [], [{"name": contract.IMAGE, "value": image}])
    mount = {"name": RUNTIME_VOLUME, "mountPath": RUNTIME_MOUNT}
    init: dict[str, Any] = {
        "name": RUNTIME_VOLUME,
        "image": profile.runtime_image,
        "imagePullPolicy": profile.runtime_image_pull_policy,
        "command": list(RUNTIME_INSTALL),
        "volumeMounts": [mount],
        **container_security(profile),
    }
    env = [{"name": contract.RUNTIME, "value": RUNTIME_MOUNT}, {"name": contract.IMAGE, "value": image}]
    return (
        list(INJECTED_ENTRYPOINT),
        [init],
        [{"name": RUNTIME_VOLUME, "emptyDir": {"sizeLimit": RUNTIME_SIZE}}],
        [{**mount, "readOnly": True}],
        env,
    )


def pod_security_context(profile: ClusterProfile) -> dict[str, Any]:
    """The pods' securityContext. Always seccompProfile RuntimeDefault: the container runtime's
    default filter, which Docker applies to every container, so an image that runs under
    `docker run` runs here. `restricted` (the Pod Security Standard) adds runAsNonRoot; the
    profile's run_as_user is the pods' user, else the image's."""
    out: dict[str, Any] = {}
    if profile.pod_security == "restricted":
        out["runAsNonRoot"] = True
    if profile.run_as_user is not None:
        out["runAsUser"] = profile.run_as_user
    out["seccompProfile"] = {"type": "RuntimeDefault"}
    return out


def container_security(profile: ClusterProfile) -> dict[str, Any]:
    """A container's securityContext under `restricted`: no privilege escalation (setuid, file
    capabilities) and no capabilities at all. Nothing under `baseline`: a root image keeps the
    runtime's default capabilities, which apt-get and chown need."""
    if profile.pod_security != "restricted":
        return {}
    return {"securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}


def check_pod_security(spec: RunSpec, profile: ClusterProfile) -> None:
    """Refuse what a `restricted` pod cannot do: apt packages need root (apt-get writes /var
    and /usr, and drops to its own user, which no capability allows)."""
    if profile.pod_security != "restricted":
        return
    for i, integration in enumerate(spec.integrations):
        if integration.integration_type == "apt_packages":
            raise FieldError(
                f"integrations.{i}",
                f"apt_packages: apt-get needs root, and cluster {profile.name} runs the pods as a non-root "
                f"user without capabilities (clusters.{profile.name}.pod_security: restricted); install "
                "the packages in the image, or run on a profile with pod_security: baseline",
            )


def pod_template(
    spec: RunSpec,
    profile: ClusterProfile,
    secrets: list[Secret],
    placement: Placement,
    *,
    attempt: int = 1,
    run_secret: bool = False,
    exclude_nodes: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The pod template of the run's one replicated job. Its attempt is the JobSet's first
    (`attempt`: 1, or N+1 after a restart, in LAUNCHER_ATTEMPT and the launcher.dev/attempt
    label) plus the JobSet controller's restart count (its restart-attempt label, read by the
    downward API into LAUNCHER_RESTART_ATTEMPT). `run_secret`: see plan_run."""
    name = spec.name
    image = spec.image or profile.image
    if not image:
        raise InputError(
            f"image: a Kubernetes run needs an image; set image in the spec, "
            f"or image in the profile of cluster {profile.name}"
        )
    s_env, s_volumes, s_mounts, pulls, mask_env, mask_files = _secret_parts(secrets)
    command, init, r_volumes, r_mounts, r_env = _entrypoint(profile, image)
    attempt_env: list[dict[str, Any]] = [
        {"name": contract.ATTEMPT, "value": str(attempt)},
        {
            "name": contract.RESTART_ATTEMPT,
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{keys.JOBSET_RESTART}']"}},
        },
    ]
    policy = RetryPolicy.from_spec(spec)
    if policy.retry_on_system_failure:
        # JobSet restarts system failures free without a cap: the entrypoint counts them past it.
        free = policy.max_retries + policy.max_system_retries
        attempt_env.append({"name": contract.FREE_RESTARTS, "value": str(free)})
    env: list[dict[str, Any]] = [
        {"name": contract.PLAN, "value": f"{keys.CONFIG_MOUNT}/{PLAN_FILE}"},
        {"name": contract.SPEC, "value": f"{keys.CONFIG_MOUNT}/{keys.SPEC_FILE}"},
        {"name": contract.BACKEND, "value": "kubernetes"},
        {"name": contract.CONFIG_DIR, "value": keys.CONFIG_MOUNT},
        {"name": contract.CACHE_DIR, "value": keys.CACHE_MOUNT},
        {
            "name": "NODE_RANK",
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{keys.COMPLETION_INDEX}']"}},
        },
        {"name": contract.NODES, "value": str(placement.nodes)},
        {"name": contract.GPUS_PER_NODE, "value": str(placement.gpus_per_node)},
        {"name": "MASTER_ADDR", "value": master_addr(name)},
        {"name": "MASTER_PORT", "value": str(profile.master_port)},
        *_progress_env(spec, profile, placement),
        *attempt_env,
        *r_env,
    ]
    taken = {e["name"] for e in env} | {e["name"] for e in s_env}
    env += [{"name": k, "value": v} for k, v in spec.env_for_run(name).items() if k not in taken]
    env += s_env
    if not placement.gpus_per_node:
        env.append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"})
    if run_secret:  # the run's Secret carries the mask lists too: an explicit value would win over envFrom
        s_volumes, s_mounts = _run_secret_volume(name)
    else:
        env.append({"name": contract.MASK_ENV, "value": ",".join(mask_env)})
        env.append({"name": contract.MASK_FILES, "value": ":".join(mask_files)})
    if profile.log_store:
        env.append({"name": LOG_ARCHIVE, "value": archive_url(profile.log_store, name)})

    resources = _resources(spec, profile, placement)
    # /dev/shm is memory the pod is charged for: by default it may take what the pod asked for.
    shm = {"medium": "Memory", "sizeLimit": profile.shm_size or resources["requests"]["memory"]}
    container: dict[str, Any] = {
        "name": keys.CONTAINER,
        "image": image,
        "command": command,
        # Not optional: without the run's Secret the container cannot start (CreateContainerConfigError).
        **({"envFrom": [{"secretRef": {"name": keys.run_secret_name(name)}}]} if run_secret else {}),
        "env": env,
        **container_security(profile),
        "volumeMounts": [
            {"name": "config", "mountPath": keys.CONFIG_MOUNT, "readOnly": True},
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": keys.CACHE_VOLUME, "mountPath": keys.CACHE_MOUNT},
            *r_mounts,
            *s_mounts,
        ],
    }
    code_volume = []
    if _code_plan(spec, profile) is not None and not code_in_store(spec, profile):
        container["volumeMounts"].append({"name": "code", "mountPath": keys.CODE_MOUNT, "readOnly": True})
        source = (
            {"secret": {"secretName": keys.code_object_name(name)}}
            if profile.code_in_secret
            else {"configMap": {"name": keys.code_object_name(name)}}
        )
        code_volume.append({"name": "code", **source})
    container["resources"] = resources
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        # Longer than the entrypoint's LAUNCHER_GRACE_SECONDS (30): it can pass SIGTERM on and reap.
        "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
        "enableServiceLinks": False,
        # Nothing in the pod calls the Kubernetes API: no token for a compromised command to use.
        "automountServiceAccountToken": False,
        "securityContext": pod_security_context(profile),
    }
    if init:
        pod_spec["initContainers"] = init
    pod_spec["containers"] = [container]
    pod_spec["volumes"] = [
        {"name": "config", "configMap": {"name": name}},
        {"name": "dshm", "emptyDir": shm},
        {"name": keys.CACHE_VOLUME, "emptyDir": {"sizeLimit": profile.cache_size}},
        *r_volumes,
        *s_volumes,
        *code_volume,
    ]
    if profile.service_account:
        pod_spec["serviceAccountName"] = profile.service_account
    selector = _node_selector(spec, profile, placement)
    if selector:
        pod_spec["nodeSelector"] = selector
    affinity = _affinity(spec, profile, placement, exclude_nodes)
    if affinity:
        pod_spec["affinity"] = affinity
    tolerations = _tolerations(spec, profile, placement)
    if tolerations:
        pod_spec["tolerations"] = tolerations
    if pulls:
        pod_spec["imagePullSecrets"] = pulls
    priority = priority_class(spec, profile)
    if priority and profile.priority_class_kind == "PriorityClass":
        pod_spec["priorityClassName"] = priority
    meta: dict[str, Any] = {"labels": {**run_labels(name), keys.ATTEMPT: str(attempt)}}
    notes = {**metadata_annotations(spec), **topology_annotations(spec, profile)}
    if notes:
        meta["annotations"] = notes
    return {"metadata": meta, "spec": pod_spec}


def topology_annotations(spec: RunSpec, profile: ClusterProfile) -> dict[str, str]:
    """compute.topology as Kueue's pod-set annotation, which Kueue's topology-aware scheduling
    reads from the pod template; only where the profile names a queue (without Kueue nothing
    reads it: plan_warnings names it)."""
    topology = spec.compute.topology
    if topology is None or not profile.queue:
        return {}
    return {keys.KUEUE_TOPOLOGY[topology.mode]: topology.level}


def kueue_suspend(profile: ClusterProfile) -> dict[str, bool]:
    """A run for a Kueue queue is created suspended: Kueue's webhook would suspend it, but in
    a namespace Kueue does not manage it would start at once, ahead of the queue. Kueue
    unsuspends it on admission; the launcher never does."""
    return {"suspend": True} if profile.queue else {}


def _job_spec(spec: RunSpec, template: dict[str, Any], placement: Placement) -> dict[str, Any]:
    job_spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": placement.nodes,
        "parallelism": placement.nodes,
        # A static rendezvous cannot take a replacement rank: the whole group restarts.
        "backoffLimit": 0,
        "podFailurePolicy": {
            "rules": [
                # Preemption or a node drain: a system failure (free with retry_on_system_failure).
                {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
                # A hang, a hardware fault, a collective's failure, as the entrypoint tells them
                # (SYSTEM_EXIT_MESSAGE depends on this rule's index): system failures too.
                {
                    "action": "FailJob",
                    "onExitCodes": {"containerName": keys.CONTAINER, "operator": "In", "values": SYSTEM_EXIT_CODES},
                },
                # The user's program failed: its exit code lands in the Job's failure message.
                {"action": "FailJob", "onExitCodes": dict(USER_EXIT_RULE)},
            ]
        },
        "template": template,
    }
    if spec.scheduling.max_duration:
        job_spec["activeDeadlineSeconds"] = max(1, int(spec.scheduling.max_duration * 3600))
        if job_spec["activeDeadlineSeconds"] > INT64_MAX:
            raise FieldError(
                "scheduling.max_duration",
                f"{spec.scheduling.max_duration:g} hours is more seconds than a Job's activeDeadlineSeconds "
                f"holds (a 64-bit integer, at most {INT64_MAX:,})",
            )
    return job_spec


def _ttl(profile: ClusterProfile) -> dict[str, int]:
    ttl = profile.ttl_seconds_after_finished
    return {} if ttl is None else {"ttlSecondsAfterFinished": ttl}


def render_jobset(
    spec: RunSpec,
    profile: ClusterProfile,
    secrets: list[Secret],
    placement: Placement,
    *,
    attempt: int = 1,
    run_secret: bool = False,
    exclude_nodes: tuple[str, ...] = (),
) -> dict[str, Any]:
    """One replicated job of one Indexed Job: the JobSet controller restarts the whole group
    on a failure, with no launcher watching. The run's RetryPolicy: max_retries is
    maxRestarts; with retry_on_system_failure a disruption restarts without counting (and
    without the policy's cap on such restarts: plan_warnings names it)."""
    template = pod_template(
        spec, profile, secrets, placement, attempt=attempt, run_secret=run_secret, exclude_nodes=exclude_nodes
    )
    policy = RetryPolicy.from_spec(spec)
    failure: dict[str, Any] = {"maxRestarts": policy.max_retries}
    rules: list[dict[str, Any]] = []
    if spec.scheduling.max_duration:
        # An attempt past max_duration ends the run: a deadline is not retried (RetryPolicy).
        rules.append({"name": "deadline", "action": "FailJobSet", "onJobFailureReasons": ["DeadlineExceeded"]})
    if policy.retry_on_system_failure:
        rules += [
            {
                "name": "disruption",
                "action": "RestartJobSetAndIgnoreMaxRestarts",
                "onJobFailureReasons": ["PodFailurePolicy"],
                # Every podFailurePolicy rule fails the Job with reason PodFailurePolicy; the
                # message tells a disruption or the entrypoint's system exit codes (a hang, a bad
                # GPU, a collective that broke) from the user's, which still count.
                "onJobFailureMessagePatterns": [DISRUPTION_MESSAGE, SYSTEM_EXIT_MESSAGE],
            }
        ]
    if rules:
        failure["rules"] = rules
    meta: dict[str, Any] = {
        "name": spec.name,
        "namespace": profile.namespace,
        "labels": {**run_labels(spec.name), keys.ATTEMPT: str(attempt), **kueue_labels(spec, profile)},
    }
    if spec.metadata:
        meta["annotations"] = metadata_annotations(spec)
    return {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": meta,
        "spec": {
            "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
            "successPolicy": {"operator": "All"},
            "failurePolicy": failure,
            "replicatedJobs": [
                {
                    "name": REPLICATED_JOB,
                    "replicas": 1,
                    "template": {
                        "metadata": {"labels": {**run_labels(spec.name), keys.ATTEMPT: str(attempt)}},
                        "spec": _job_spec(spec, template, placement),
                    },
                }
            ],
            **_ttl(profile),
            **kueue_suspend(profile),
        },
    }


def owner_reference(owner: dict[str, Any]) -> dict[str, Any]:
    """A reference to the run's JobSet, so deleting it deletes the run's other objects."""
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": False,
    }
