"""The local backend's profile: the `local` entry of config.yaml's clusters, if any.

clusters:
  local:
    allow_host_packages: true   # let apt_packages install on this machine
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class LocalProfile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = "local"
    backend: Literal["local"] = "local"
    allow_host_packages: bool = False
    """Whether a spec's apt_packages may be installed on this machine (launcher.pod.packages)."""
