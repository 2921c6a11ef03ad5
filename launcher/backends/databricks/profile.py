"""A Databricks profile: one `clusters.<name>` entry of $LAUNCHER_HOME/config.yaml.

    clusters:
      dbx:
        backend: databricks
        host: https://dbc-1234.cloud.databricks.com
        config_profile: DEFAULT             # a ~/.databrickscfg profile (optional)
        credentials_secret: databricks      # a `databricks` secret of ours (optional)
        compute_mode: job_cluster           # or serverless (AI Runtime's serverless GPUs)
        spark_version: 15.4.x-gpu-ml-scala2.12
        node_types:                         # gpu_type -> the job cluster's node type
          h100: {node_type_id: p5.48xlarge, gpus: 8}
        log_volume: /Volumes/main/default/launcher-logs   # cluster log delivery
        workspace_dir: /Shared/launcher     # where a run's driver, entrypoint and record go
        custom_images: false                # the workspace takes docker_image (Container Services)
        price_per_gpu_hour: 4.1

Credentials: where neither config_profile nor credentials_secret is set, databricks-sdk
resolves them as it always does (DATABRICKS_TOKEN and the other DATABRICKS_* variables,
then ~/.databrickscfg's DEFAULT profile for the host). No credential is ever written here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

# What the shipped node types give each gpu_type (AWS names; a profile's node_types adds to or
# replaces them). `none` is the node of a CPU run.
SHIPPED_NODE_TYPES: dict[str, dict] = {
    "a100": {"node_type_id": "p4d.24xlarge", "gpus": 8},
    "h100": {"node_type_id": "p5.48xlarge", "gpus": 8},
    "a10": {"node_type_id": "g5.12xlarge", "gpus": 4},
    "none": {"node_type_id": "m5d.xlarge", "gpus": 0},
}
DEFAULT_SPARK_VERSION = "15.4.x-gpu-ml-scala2.12"
DEFAULT_WORKSPACE_DIR = "/Shared/launcher"


class NodeType(BaseModel):
    model_config = ConfigDict(extra="forbid")

    node_type_id: str = Field(min_length=1)
    gpus: int = Field(ge=0)
    """GPUs one node of this type has."""


class DatabricksProfile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    backend: Literal["databricks"] = "databricks"
    host: str | None = None
    """The workspace URL; None: what databricks-sdk resolves (DATABRICKS_HOST, config_profile)."""
    config_profile: str | None = None
    """A profile of ~/.databrickscfg (databricks-sdk's `profile`)."""
    credentials_secret: str | None = None
    """A `databricks` secret of ours (host and token) that the launcher signs in with."""
    compute_mode: Literal["job_cluster", "serverless"] = "job_cluster"
    spark_version: str = DEFAULT_SPARK_VERSION
    node_types: dict[str, NodeType] = Field(default_factory=dict)
    log_volume: str | None = None
    """A /Volumes/<catalog>/<schema>/<volume>[/dir] path: cluster log delivery goes to
    <log_volume>/<run>/<cluster_id>/driver/."""
    workspace_dir: str = DEFAULT_WORKSPACE_DIR
    custom_images: bool = False
    """Whether the workspace takes a cluster `docker_image` (Databricks Container Services)."""
    price_per_gpu_hour: float | None = Field(default=None, ge=0)
    request_timeout: float = Field(default=60, gt=0)
    """Seconds databricks-sdk retries a call (429, 503, connection errors) before giving up."""

    @field_validator("log_volume")
    @classmethod
    def _log_volume(cls, v: str | None) -> str | None:
        if v is None:
            return v
        v = v.removeprefix("dbfs:").rstrip("/")
        if len(v.split("/")) < 5 or not v.startswith("/Volumes/"):
            raise ValueError(f"must be a Volume path, /Volumes/<catalog>/<schema>/<volume>[/...], got {v!r}")
        return v

    @field_validator("workspace_dir")
    @classmethod
    def _workspace_dir(cls, v: str) -> str:
        v = "/" + v.removeprefix("/Workspace").strip("/")
        if v == "/" or ".." in v.split("/"):
            raise ValueError(f"must be a workspace folder such as /Shared/launcher, got {v!r}")
        return v

    @property
    def node_table(self) -> dict[str, NodeType]:
        """The shipped node types with the profile's own over them."""
        return {**{k: NodeType(**v) for k, v in SHIPPED_NODE_TYPES.items()}, **self.node_types}

    @property
    def where(self) -> str:
        return f"Databricks workspace {self.host or '(from the SDK configuration)'} (profile {self.name})"
