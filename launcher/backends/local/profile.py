"""The local backend's profile: the `local` entry of config.yaml's clusters, if any.

clusters:
  local:
    allow_host_packages: true   # let apt_packages install on this machine
    price_per_gpu_hour: {a100_80gb: 1.9}   # goodput's cost, by gpu_type
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class LocalProfile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = "local"
    backend: Literal["local"] = "local"
    allow_host_packages: bool = False
    """Whether a spec's apt_packages may be installed on this machine (launcher.pod.packages)."""
    price_per_gpu_hour: dict[str, Annotated[float, Field(ge=0)]] = Field(default_factory=dict)
    """What a GPU-hour costs here by gpu_type (a run's goodput shows its cost)."""
