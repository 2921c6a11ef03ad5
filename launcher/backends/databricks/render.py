"""A run as a Databricks one-time run: the runs/submit payload, the files that go beside it
(the driver, the plan, the entrypoint's zipapp, the driver's settings), and the named
warnings about what Databricks cannot honour. Pure: no I/O, no secret value in the payload
(secrets become `{{secrets/<scope>/<key>}}` references, the values go to the run's scope).

Job cluster (classic): a `new_cluster` of `nodes` workers of the gpu_type's node type on a
GPU ML runtime (one node: a single-node cluster, the driver runs every process), and a
spark_python_task whose file is driver_script.py. Serverless GPU (AI Runtime): an
`ai_runtime_task` whose deployment runs the same driver on `accelerator_count` GPUs of one
of the accelerator types serverless offers.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launcher.backends.gpus import GpuType, Placement, resolve_placement
from launcher.errors import FieldError, InputError
from launcher.secrets.kinds import PUBLIC_ENV, Secret, env_suffix, project

if TYPE_CHECKING:
    from launcher.backends.databricks.profile import DatabricksProfile
    from launcher.spec.models import RunSpec

DRIVER_FILE = "driver.py"
SETTINGS_FILE = "driver.json"
RECORD_FILE = "record.json"
TASK_KEY = "launcher"
DRIVER_SOURCE = Path(__file__).with_name("driver_script.py")
# Serverless GPU compute's accelerator types: (gpu_type, GPUs of one) -> the type's name.
SERVERLESS_ACCELERATORS = {
    ("a10", 1): "GPU_1xA10",
    ("h100", 1): "GPU_1xH100",
    ("h100", 8): "GPU_8xH100",
    ("b300", 8): "GPU_8xB300",
}
SECRET_FILE_ENV = "LAUNCHER_SECRET_FILE_"


def scope_name(run: str) -> str:
    """The run's own secret scope."""
    return f"launcher-{run}"


def idempotency_token(run: str, attempt: int) -> str:
    """The same run name and attempt give the same token (at most 64 characters): a submit
    retried after its answer was lost finds the run the first one made."""
    return hashlib.sha256(f"launcher/{run}/attempt-{attempt}".encode()).hexdigest()


def run_folder(profile: DatabricksProfile, run: str) -> str:
    """Where a run's driver, plan, zipapp and record go in the workspace."""
    return f"{profile.workspace_dir}/{run}"


def log_destination(profile: DatabricksProfile, run: str) -> str | None:
    return f"{profile.log_volume}/{run}" if profile.log_volume else None


@dataclass
class Rendered:
    payload: dict[str, Any]
    """The runs/submit body."""
    settings: dict[str, Any]
    """driver.json: how the driver starts the entrypoint (processes, local_mode, masks)."""
    secret_values: dict[str, str] = field(default_factory=dict)
    """scope key -> value: what submit puts in the run's scope (never printed)."""
    warnings: list[str] = field(default_factory=list)
    placement: Placement | None = None


def placement_of(spec: RunSpec, profile: DatabricksProfile) -> Placement:
    """Nodes x GPUs of the spec on the profile's node types (the shared gpu catalogue's rules)."""
    table = {name: GpuType(gpus_per_node=nt.gpus) for name, nt in profile.node_table.items()}
    return resolve_placement(spec, table, cluster=profile.name)


def serverless_accelerator(spec: RunSpec, placement: Placement) -> tuple[str, int]:
    """The accelerator type and count of a serverless run, or an InputError listing those offered."""
    per_node = placement.gpus_per_node
    offered = ", ".join(
        f"{t} (gpu_type {g}, gpus {n}{' or a multiple' if n == 8 else ''})"
        for (g, n), t in SERVERLESS_ACCELERATORS.items()
    )
    kind = SERVERLESS_ACCELERATORS.get((placement.gpu_type_name, per_node))
    if kind is None or (per_node == 1 and placement.nodes > 1):
        raise FieldError(
            "compute.gpu_type",
            f"serverless GPU compute offers {offered}; {placement.gpus} x {placement.gpu_type_name} is none of them",
            hint="ask for one of those, or use a profile with compute_mode: job_cluster",
        )
    return kind, placement.gpus


def unhonoured(spec: RunSpec, profile: DatabricksProfile) -> list[str]:
    """What a Databricks run cannot honour, as named warnings (never dropped in silence)."""
    from launcher.spec.models import AUTO_PRIORITY

    c, s = spec.compute, spec.scheduling
    where = f"Databricks (profile {profile.name})"
    out = []
    if s.priority and s.priority != AUTO_PRIORITY:
        out.append(f"scheduling.priority: ignored on {where}: a one-time run has no priority")
    if s.preemptible is not None:
        out.append(
            f"scheduling.preemptible: ignored on {where}: spot or on-demand is the workspace's cluster policy "
            "(aws_attributes), not the run's"
        )
    if c.topology is not None:
        out.append(f"compute.topology: ignored on {where}: there is no Kueue; the job cluster is the run's own")
    if c.node_names:
        out.append(f"compute.node_names: ignored on {where}: a job cluster's nodes are new, not named")
    for name, value in (("compute.cpus", c.cpus), ("compute.memory", c.memory), ("compute.instance", c.instance)):
        if value is not None:
            out.append(f"{name}: ignored on {where}: the node type (clusters.{profile.name}.node_types) sets it")
    if spec.image and (profile.compute_mode == "serverless" or not profile.custom_images):
        out.append(
            f"image: ignored on {where}: runs use the runtime {profile.spark_version} "
            + (
                "(serverless GPU compute takes no image here)"
                if profile.compute_mode == "serverless"
                else f"(set clusters.{profile.name}.custom_images: true where Databricks Container Services is on)"
            )
        )
    if s.max_retries or s.retry_on_system_failure:
        field_name = "scheduling.max_retries" if s.max_retries else "scheduling.retry_on_system_failure"
        out.append(
            f"{field_name}: on {where} a one-time run is not retried by the workspace: the launcher submits "
            "the next attempt when it observes the failed one (run --follow, get runs, describe, the dashboard), "
            "so a run that nobody observes is retried when it is next observed"
        )
    if spec.ports:
        out.append(f"ports: ignored on {where}: a job run's ports cannot be forwarded")
    return out


def check(spec: RunSpec, profile: DatabricksProfile) -> Placement:
    """What submit would refuse, offline; the placement it resolves."""
    placement = placement_of(spec, profile)
    if profile.compute_mode == "serverless":
        if not placement.gpus:
            raise FieldError("compute.gpus", "serverless GPU compute runs GPU work only; ask for GPUs")
        serverless_accelerator(spec, placement)
    if profile.compute_mode == "job_cluster" and placement.gpu_type_name not in profile.node_table:
        raise InputError(
            f"compute.gpu_type: no node type for {placement.gpu_type_name!r}"
        )  # resolve_placement refused it
    return placement


def secret_ref(scope: str, key: str) -> str:
    """How a cluster's environment names a secret of a scope: Databricks puts in the value."""
    return "{{secrets/" + f"{scope}/{key}" + "}}"


def secret_parts(secrets: list[Secret], scope: str) -> tuple[dict[str, str], dict[str, str], list[str], dict[str, str]]:
    """(env: spark_env_vars, values: scope key -> value, mask_env, secret_files: path -> env var)."""
    env: dict[str, str] = {}
    values: dict[str, str] = {}
    mask: list[str] = []
    files: dict[str, str] = {}
    for s in secrets:
        p = project(s)
        for var, key in p.env.items():
            if var in PUBLIC_ENV:
                env[var] = s.data[key]
                continue
            env[var] = secret_ref(scope, var)
            values[var] = s.data[key]
            mask.append(var)
        mount = p.mount_path or ""
        for file_name, key in p.files.items():
            var = f"{SECRET_FILE_ENV}{env_suffix(s.name)}_{env_suffix(file_name)}"
            env[var] = secret_ref(scope, var)
            values[var] = s.data[key]
            files[f"{mount}/{file_name}"] = var
        for var, value in p.plain_env.items():
            env[var] = value.replace("{mount}", mount)
    return env, values, sorted(mask), files


def render(
    spec: RunSpec,
    profile: DatabricksProfile,
    secrets: list[Secret],
    *,
    attempt: int = 1,
    placement: Placement | None = None,
) -> Rendered:
    if placement is None:
        placement = check(spec, profile)
    name = spec.name
    folder = run_folder(profile, name)
    gpus = placement.gpus
    processes = gpus if gpus else placement.nodes
    env, values, mask, files = secret_parts(secrets, scope_name(name))
    settings = {
        "processes": processes,
        "local_mode": placement.nodes == 1,
        "use_gpu": bool(gpus),
        "attempt": attempt,
        "mask_env": mask,
        "secret_files": files,
    }
    parameters = [f"/Workspace{folder}"]
    task: dict[str, Any] = {"task_key": TASK_KEY}
    if profile.compute_mode == "serverless":
        kind, count = serverless_accelerator(spec, placement)
        task["ai_runtime_task"] = {
            "deployments": [
                {
                    "command_path": f"{folder}/{DRIVER_FILE}",
                    "compute": {"accelerator_type": kind, "accelerator_count": count},
                }
            ],
            "parameters": parameters,
        }
        if env:
            raise InputError(
                f"secrets: serverless GPU compute (profile {profile.name}) takes no environment from a secret scope; "
                "leave them out with `secrets: []` in the run YAML, or use a compute_mode: job_cluster profile"
            )
    else:
        node = profile.node_table[placement.gpu_type_name]
        cluster: dict[str, Any] = {
            "spark_version": profile.spark_version,
            "node_type_id": node.node_type_id,
            "num_workers": placement.nodes if placement.nodes > 1 else 0,
            "spark_env_vars": env,
            "custom_tags": {"launcher-run": name},
        }
        if placement.nodes == 1:  # a single-node cluster: the driver runs every process
            cluster["spark_conf"] = {"spark.databricks.cluster.profile": "singleNode", "spark.master": "local[*]"}
            cluster["custom_tags"]["ResourceClass"] = "SingleNode"
        elif gpus:  # one TorchDistributor task per GPU of each worker
            cluster["spark_conf"] = {"spark.task.resource.gpu.amount": "1"}
        destination = log_destination(profile, name)
        if destination:
            cluster["cluster_log_conf"] = {"volumes": {"destination": destination}}
        if spec.image and profile.custom_images:
            cluster["docker_image"] = {"url": spec.image}
        task["new_cluster"] = cluster
        task["spark_python_task"] = {
            "python_file": f"{folder}/{DRIVER_FILE}",
            "source": "WORKSPACE",
            "parameters": parameters,
        }
    payload: dict[str, Any] = {
        "run_name": name,
        "idempotency_token": idempotency_token(name, attempt),
        "tasks": [task],
    }
    if spec.scheduling.max_duration:
        payload["timeout_seconds"] = math.ceil(spec.scheduling.max_duration * 3600)
    return Rendered(payload, settings, values, unhonoured(spec, profile), placement)


def files_of(spec: RunSpec, rendered: Rendered) -> dict[str, bytes]:
    """The files that go to the run's workspace folder (the zipapp is built here)."""
    from launcher.pod import zipapp
    from launcher.pod.plan import PLAN_FILE, ZIPAPP_FILE
    from launcher.spec.plan import plan_text

    return {
        DRIVER_FILE: DRIVER_SOURCE.read_bytes(),
        SETTINGS_FILE: json.dumps(rendered.settings, sort_keys=True).encode(),
        PLAN_FILE: plan_text(spec).encode(),
        ZIPAPP_FILE: zipapp.build(),
    }
