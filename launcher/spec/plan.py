"""The pod plan of a validated spec (launcher.pod.plan says what it holds): written by
the host, which has the spec models and PyYAML, and read by the entrypoint, which needs
neither."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from launcher.pod import plan as pod_plan
from launcher.spec.models import Resilience, RunSpec

if TYPE_CHECKING:
    from launcher.spec.models import RunSpec


def parameters_text(spec: RunSpec) -> str:
    """parameters.yaml as every backend writes it (mcli's /mnt/config/parameters.yaml)."""
    return yaml.safe_dump(spec.parameters_for_file(), sort_keys=False)


DEFAULT_RESILIENCE = {**Resilience().model_dump(mode="json"), "checkpoints": None}


def checkpoint_folder(spec: RunSpec) -> str | None:
    """Where a retried attempt looks for the checkpoint to resume from: the trainers'
    `parameters.save_folder`, a path on the rank's filesystem or a store's URL (s3://,
    dbfs:/Volumes/...), which the rank lists itself (launcher.entrypoint.resume)."""
    folder = spec.parameters.get("save_folder")
    if not isinstance(folder, str) or not folder.strip():
        return None
    return folder


def plan_of(spec: RunSpec, *, parameters_in_place: bool = False, code: dict[str, Any] | None = None) -> dict[str, Any]:
    """The plan of `spec` as the JSON object the entrypoint reads: no secret value in it.
    `parameters_in_place`: the backend puts parameters.yaml in the config directory itself
    (Kubernetes: the ConfigMap), so the plan does not carry the text a second time.
    `code`: where the rank finds the run's code snapshot and its digest (launcher.pod.plan)."""
    plan = {
        "version": pod_plan.VERSION,
        "name": spec.name,
        "image": spec.image,
        "command": spec.command,
        "env": spec.env_for_run(spec.name),
        "env_variables": sorted(spec.env_variables),
        "nodes": spec.nodes,
        "gpus": spec.compute.gpus or 0,
        "integrations": [i.model_dump(mode="json") for i in spec.integrations],
        "parameters": None if parameters_in_place else parameters_text(spec),
    }
    resilience = {**(spec.resilience or Resilience()).model_dump(mode="json"), "checkpoints": checkpoint_folder(spec)}
    if resilience != DEFAULT_RESILIENCE:  # a plan without it reads as the defaults (and as before)
        plan["resilience"] = resilience
    if code is not None:  # a plan without a snapshot reads as before
        plan["code"] = code
    return plan


def plan_text(spec: RunSpec, *, parameters_in_place: bool = False, code: dict[str, Any] | None = None) -> str:
    return json.dumps(plan_of(spec, parameters_in_place=parameters_in_place, code=code), sort_keys=True)


def plan_of_spec_file(path: str | Path) -> pod_plan.RankPlan:
    """The plan of a submitted spec file (JSON or YAML): what an entrypoint given
    LAUNCHER_SPEC instead of LAUNCHER_PLAN runs (the image and inject modes' runtime
    has the spec models)."""
    text = Path(path).read_text()
    data = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    return pod_plan.RankPlan.from_dict(plan_of(RunSpec.model_validate(data)))
