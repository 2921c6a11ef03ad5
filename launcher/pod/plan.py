"""The pod plan: everything the entrypoint needs to run one rank, as plain JSON.

The host has already validated the spec (launcher.spec.plan writes the plan from a
RunSpec), so the entrypoint only reads what it is given here, with the standard library
alone: no spec models, no YAML parser. Any Python 3.8 or newer reads it, inside the
zipapp a Kubernetes pod runs with the image's own python3 (launcher.pod.zipapp).

    {"version": 1, "name": RUN, "image": IMAGE or null, "command": "bash text",
     "env": {the run's non-secret variables: env_variables, RUN_NAME, DATA_*, integrations'},
     "env_variables": [names, for the log line],
     "nodes": N, "gpus": total GPUs the spec asks for (0: CPU),
     "integrations": [each integration as its fields, integration_type first],
     "parameters": "the text of parameters.yaml, rendered by the host", or null where the
                   backend places parameters.yaml in the config directory itself (a ConfigMap),
     "code": (absent without one) the code snapshot (launcher.pod.code_archive) to lay over the working
             directory: {"digest": "sha256:...", "size": BYTES, "file": where the rank
             finds the .tar.gz, or "url": the object store URL it fetches it from},
     "resilience": (absent from older plans: its defaults) {"preflight": bool,
             "hang_timeout": seconds or null, "straggler_factor": float,
             "straggler_grace": seconds or null (absent from older plans: null),
             "exclude_faulty_nodes": bool, "checkpoints": the checkpoint folder (a path, or
             an s3:// or dbfs:/Volumes URL) a retried attempt resumes from (its {run_name}
             unfilled), or null} (docs/resilience.md)}

No secret value is ever in a plan: secrets reach the rank through its environment and
files (contract.MASK_ENV, contract.MASK_FILES), as before.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

VERSION = 1
PLAN_FILE = "plan.json"
ZIPAPP_FILE = "entrypoint.pyz"


@dataclass(frozen=True)
class ResiliencePlan:
    """The spec's `resilience` section as the entrypoint acts on it (launcher.spec.models.Resilience)."""

    preflight: bool = False
    hang_timeout: float | None = None
    straggler_factor: float = 2.0
    exclude_faulty_nodes: bool = True
    checkpoints: str | None = None
    straggler_grace: float | None = None
    """Seconds a straggler may stay one before rank 0 ends the attempt (with
    exclude_faulty_nodes); None: launcher.entrypoint.progress's default."""

    @classmethod
    def from_dict(cls, data: Any) -> ResiliencePlan:
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise PlanError("plan field 'resilience' must be dict")
        for name in ("hang_timeout", "straggler_grace"):
            value = data.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise PlanError(f"plan field 'resilience.{name}' must be a positive number of seconds or null")
        hang, grace = data.get("hang_timeout"), data.get("straggler_grace")
        return cls(
            preflight=bool(data.get("preflight", False)),
            hang_timeout=float(hang) if hang is not None else None,
            straggler_factor=float(data.get("straggler_factor", 2.0)),
            exclude_faulty_nodes=bool(data.get("exclude_faulty_nodes", True)),
            checkpoints=data["checkpoints"] if isinstance(data.get("checkpoints"), str) else None,
            straggler_grace=float(grace) if grace is not None else None,
        )


class PlanError(ValueError):
    """The plan file is missing a field or has one of the wrong type."""


@dataclass(frozen=True)
class RankPlan:
    """The plan file every rank's entrypoint reads (not a backend's dry-run Plan)."""

    name: str
    image: str | None
    command: str
    env: dict[str, str]
    env_variables: list[str]
    nodes: int
    gpus: int
    integrations: tuple[SimpleNamespace, ...]
    parameters: str | None
    code: dict[str, Any] | None = None
    resilience: ResiliencePlan = ResiliencePlan()

    @classmethod
    def from_dict(cls, data: Any) -> RankPlan:
        if not isinstance(data, dict):
            raise PlanError("the plan is not a JSON object")
        if data.get("version") != VERSION:
            raise PlanError(
                f"plan version {data.get('version')!r}; this entrypoint reads version {VERSION} "
                "(the launcher that submitted the run is newer or older than this entrypoint)"
            )

        def field(name: str, kind: type, optional: bool = False):
            value = data.get(name)
            if value is None and optional:
                return None
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise PlanError(f"plan field {name!r} must be {kind.__name__}, got {type(value).__name__}")
            return value

        env = field("env", dict)
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise PlanError("plan field 'env' must map names to strings")
        integrations = []
        for i, integ in enumerate(field("integrations", list)):
            if not isinstance(integ, dict) or not isinstance(integ.get("integration_type"), str):
                raise PlanError(f"plan integration {i + 1} has no integration_type")
            integrations.append(SimpleNamespace(**integ))
        code = field("code", dict, optional=True)
        if code is not None and not (
            isinstance(code.get("digest"), str) and isinstance(code.get("file") or code.get("url"), str)
        ):
            raise PlanError("plan field 'code' must hold a digest and a file or url")
        return cls(
            name=field("name", str),
            image=field("image", str, optional=True),
            command=field("command", str),
            env=dict(env),
            env_variables=[str(n) for n in field("env_variables", list)],
            nodes=field("nodes", int),
            gpus=field("gpus", int),
            integrations=tuple(integrations),
            parameters=field("parameters", str, optional=True),
            code=code,
            resilience=ResiliencePlan.from_dict(data.get("resilience")),
        )


def read(path: str | Path) -> RankPlan:
    """The plan at `path`; OSError if it cannot be read, PlanError if it is not a plan."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except ValueError as e:
        raise PlanError(f"not JSON: {e}") from None
    return RankPlan.from_dict(data)
