"""mcli's run configs: RunConfig (what a user fills in), FinalRunConfig (what a submit takes),
and the TypedDicts of their `compute` and `scheduling`. Plain dataclasses with mcli's fields;
create_run hands their fields to the launcher's own RunConfig.from_dict, which checks them
as a run YAML's (mcli's legacy top-level cluster/gpu_type/gpu_num/cpus included)."""

from __future__ import annotations

import copy
import warnings
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TypedDict

__all__ = ["ComputeConfig", "FinalRunConfig", "RunConfig", "SchedulingConfig"]


class SchedulingConfig(TypedDict, total=False):
    """A run's `scheduling`, as mcli types it."""

    priority: str | None
    resumable: bool | None
    preemptible: bool | None
    retryOnSystemFailure: bool | None
    max_retries: int | None
    retry_on_system_failure: bool | None
    max_duration: float | None


class ComputeConfig(TypedDict, total=False):
    """A run's `compute`, as mcli types it."""

    cluster: str | None
    instance: str | None
    nodes: int | None
    node_names: list[str] | None
    gpu_type: str | None
    gpus: int | None
    cpus: int | None


def _env_dict(env: dict[str, str] | list[dict[str, str]]) -> dict[str, str]:
    """mcli's older list form of env_variables ([{key, value}]) as the mapping it stands for."""
    return {v["key"]: v["value"] for v in env} if isinstance(env, list) else env


def _stripped(value: Any) -> Any:
    """A config's fields without the Nones and empties that mean "not set" (the launcher's
    spec takes their absence as its default)."""
    if isinstance(value, dict):
        out = {k: _stripped(v) for k, v in value.items() if v is not None}
        return {k: v for k, v in out.items() if v not in ({}, [], "")}
    return value


@dataclass
class RunConfig:
    """A run configuration, as mcli's: name, image, command, compute, scheduling,
    integrations, env_variables, parameters, metadata (and the legacy top-level cluster,
    gpu_type, gpu_num, cpus). Not checked until create_run."""

    name: str | None = None
    parent_name: str | None = None
    image: str | None = None
    gpu_type: str | None = None
    gpu_num: int | None = None
    cpus: int | None = None
    cluster: str | None = None
    scheduling: SchedulingConfig = field(default_factory=SchedulingConfig)
    compute: ComputeConfig = field(default_factory=ComputeConfig)
    parameters: dict[str, Any] = field(default_factory=dict)
    integrations: list[dict[str, Any]] = field(default_factory=list)
    env_variables: dict[str, str] | list[dict[str, str]] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    command: str = ""
    dependent_deployment: dict[str, Any] = field(default_factory=dict)
    _suppress_deprecation_warnings: bool | None = False

    def __post_init__(self) -> None:
        self.env_variables = _env_dict(self.env_variables)
        self._suppress_deprecation_warnings = None  # mcli's: so that it is never shown

    @classmethod
    def empty(cls) -> RunConfig:
        return cls()

    @classmethod
    def from_file(cls, path: str | Path) -> RunConfig:
        """The run YAML at `path` (its fields that are not RunConfig's are warned about and left out, as in mcli)."""
        import yaml

        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f) or {}
        return cls.from_dict(data, show_unused_warning=True)

    @classmethod
    def from_dict(cls, dict_to_use: dict[str, Any], show_unused_warning: bool = False) -> RunConfig:
        """A RunConfig of a mapping's fields; the others are left out (and warned about with show_unused_warning)."""
        names = {f.name for f in fields(cls)}
        data = dict(dict_to_use)
        if "run_name" in data and "name" not in data:  # mcli's oldest spelling of name
            data["name"] = data.pop("run_name")
        unused = [k for k in data if k not in names]
        if unused and show_unused_warning:
            warnings.warn(
                f"! Encountered unknown fields {', '.join(unused)} which were not used in creating the request",
                stacklevel=2,
            )
        return cls(**{k: v for k, v in data.items() if k in names})

    def to_file(self, path: str | Path) -> None:
        """Write the config as a run YAML."""
        Path(path).write_text(str(self) + "\n", encoding="utf-8")

    def to_spec(self) -> dict[str, Any]:
        """The config as the launcher's run spec takes it (launcher.RunConfig.from_dict)."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}
        data["env_variables"] = _env_dict(data["env_variables"])
        return _stripped(copy.deepcopy(data))

    def __str__(self) -> str:
        import yaml

        return yaml.safe_dump(self.to_spec(), default_flow_style=False, sort_keys=False).strip()


@dataclass
class FinalRunConfig:
    """A run configuration ready to submit, as mcli's (finalize_config makes one)."""

    integrations: list[dict[str, Any]]
    env_variables: dict[str, str]
    parameters: dict[str, Any]
    image: str | None = None
    name: str | None = None
    parent_name: str | None = None
    cluster: str = ""
    gpu_type: str | None = None
    gpu_num: int | None = None
    cpus: int | None = None
    command: str = ""
    scheduling: SchedulingConfig = field(default_factory=SchedulingConfig)
    compute: ComputeConfig = field(default_factory=ComputeConfig)
    metadata: dict[str, Any] = field(default_factory=dict)
    dependent_deployment: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def finalize_config(cls, run_config: RunConfig) -> FinalRunConfig:
        """The FinalRunConfig of a RunConfig. The launcher checks it at create_run, where a
        bad one is a RunConfigException naming each field (file and line too for a YAML)."""
        data = {f.name: getattr(run_config, f.name) for f in fields(run_config) if not f.name.startswith("_")}
        data["env_variables"] = _env_dict(data["env_variables"])
        data["cluster"] = data["cluster"] or ""
        return cls(**copy.deepcopy(data))

    def to_spec(self) -> dict[str, Any]:
        """The config as the launcher's run spec takes it."""
        return _stripped(asdict(self))

    def __str__(self) -> str:
        import yaml

        return yaml.safe_dump(asdict(self))
