"""The run YAML, as pydantic models: a superset of the MosaicML CLI's run YAML.

Every model forbids unknown fields: a typo must fail before any GPU is spent.
Legacy mcli spellings (run_name, top-level gpu_num/gpu_type/cluster/cpus, the
list form of env_variables) are rewritten by `launcher.spec.compat` before these
models see the document.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from launcher.spec.names import sanitize

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A Docker image reference: [host[:port]/]path[:tag][@digest], lowercase path.
IMAGE_REF = re.compile(
    r"^(?:(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?))*(?::[0-9]+)?/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[\w][\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$"
)
# Kubernetes resource quantity, e.g. 64Gi, 500M, 1.5
QUANTITY = re.compile(r"^[0-9]+(?:\.[0-9]+)?(?:[KMGTPE]i?|[mkMGTPE]|e[0-9]+)?$")
VOLUME_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
REMOTE_SCHEMES = ("dbfs:/", "s3://", "gs://", "oci://")
# mcli run fields that only the MosaicML platform acts on.
PLATFORM_ONLY = ("optimization_level", "platform", "dependent_deployment", "parent_name")


class _Model(BaseModel):
    # allow_inf_nan=False: `cpus: .inf`, `1e999` (read as infinity) or `max_duration: .nan` is
    # refused at its field; no backend can request, wait or render an infinite amount.
    model_config = ConfigDict(
        extra="forbid", populate_by_name=True, validate_default=False, defer_build=True, allow_inf_nan=False
    )


# A node label's key: an optional DNS-subdomain prefix and '/', then a name of at most 63
# characters (what Kubernetes accepts as a label key, and Kueue as a Topology level).
LABEL_KEY = re.compile(
    r"^(?:(?=.{1,253}/)[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*/)?"
    r"(?=.{1,63}$)[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


class Topology(_Model):
    """Not an mcli field: keep the run's nodes within one domain of a node label (a rack, a
    block), through Kueue's topology-aware scheduling; `required` waits for such a domain,
    `preferred` takes the closest Kueue finds."""

    level: str
    mode: Literal["required", "preferred"] = "required"

    @field_validator("level")
    @classmethod
    def _level(cls, v: str) -> str:
        if not LABEL_KEY.match(v):
            raise ValueError(f"must be a node label key such as cloud.google.com/gce-topology-block, got {v!r}")
        return v


AUTO_CLUSTER = "auto"
"""compute.cluster: auto: every cluster profile here but local, in config order (launcher.sdk.placement)."""


def cluster_names(value: str | list[str] | None) -> list[str]:
    """The cluster profiles compute.cluster (or --cluster) names, in order: one name, a
    comma list or a YAML list, `auto` kept as itself; [] for none."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else value
    return [str(item).strip() for item in items if str(item).strip()]


def is_placed(cluster: str | list[str] | None) -> bool:
    """Whether a compute.cluster (or --cluster) asks for a placement: `auto` or several
    profiles (launcher.sdk.placement places it; a run on one profile never imports that)."""
    names = cluster_names(cluster)
    return names == [AUTO_CLUSTER] or len(names) > 1


class Compute(_Model):
    cluster: str | list[str] | None = None
    """A cluster profile; or `auto`, a comma list or a YAML list of them: the run goes to the
    first whose free GPUs fit it (launcher.sdk.placement)."""
    gpus: Annotated[int, Field(ge=0, strict=True)] | None = None
    """Total GPUs across all nodes, as in mcli: an integer (`gpus: true` is not 1)."""
    gpu_type: str | None = None
    nodes: Annotated[int, Field(ge=1)] | None = None
    cpus: Annotated[float, Field(gt=0)] | None = None
    memory: str | None = None
    instance: str | None = None
    node_names: list[str] | None = None
    topology: Topology | None = None
    """Not an mcli field: Kueue's topology-aware placement of the run's nodes."""

    @field_validator("cluster")
    @classmethod
    def _cluster(cls, v: str | list[str] | None) -> str | list[str] | None:
        if v is None:
            return v
        names = cluster_names(v)
        if not names:
            raise ValueError("must name a cluster profile, a list of them, or auto")
        if AUTO_CLUSTER in names and len(names) > 1:
            raise ValueError(f"auto means every cluster profile; it is not one of a list, got {v!r}")
        if len(set(names)) != len(names):
            raise ValueError(f"names a cluster twice: {v!r}")
        return v

    @field_validator("memory")
    @classmethod
    def _memory(cls, v: str | None) -> str | None:
        if v is not None and not QUANTITY.match(str(v)):
            raise ValueError(f"must be a Kubernetes quantity such as 64Gi or 512Mi, got {v!r}")
        return v


def _userinfo(url: str) -> str:
    """What may be a user and password in `url`: everything between the scheme and the last
    '@' (a password may hold '/', so this may take more than the userinfo, never less)."""
    rest = url.partition("://")[2] if "://" in url else url.removeprefix("//")
    return rest.rpartition("@")[0]


def masked_url(url: str) -> str:
    """`url` with its user and password (userinfo) replaced by ***, for messages."""
    userinfo = _userinfo(url)
    return url.replace(userinfo + "@", "***@", 1) if userinfo else url


def check_url(url: str, *, what: str = "a URL") -> None:
    """Raise ValueError, with the user and password masked, where urllib cannot read `url`
    as the pod's entrypoint would (a password holding '[' or ']', a port that is not a
    number): there it would fail the clone, and its message would quote the URL."""
    if any(ord(c) < 32 or ord(c) == 127 for c in url):
        raise ValueError(f"must not hold a control character (a newline, a NUL byte): {masked_url(url)!r}")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parsing the port is the check
        parts.hostname  # noqa: B018
    except ValueError as e:
        if not _userinfo(url):
            raise ValueError(f"is not {what} urllib can read ({e}): {url}") from None
        # urllib's own words may quote part of the password (a "port" cut from it): not shown.
        raise ValueError(
            f"is not {what} urllib can read: {masked_url(url)} (a user or password with '[', ']', "
            "':', '@', '/', '?' or '#' must be percent-encoded, e.g. %5B for '[')"
        ) from None


class GitRepoIntegration(_Model):
    integration_type: Literal["git_repo"]
    git_repo: str
    git_branch: str | None = None
    git_commit: str | None = None
    path: str | None = None
    ssh_clone: bool = False
    pip_install: str | None = None
    host: str = "github.com"
    git_clone_recursive: bool = False

    @field_validator("git_repo")
    @classmethod
    def _repo(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must name a repository, such as org/repo or a URL")
        v = v.strip()
        if "://" in v:
            check_url(v)
        return v

    @field_validator("host")
    @classmethod
    def _host(cls, v: str) -> str:
        check_url(f"//{v.strip().removeprefix('https://').removeprefix('http://').strip('/')}", what="a host name")
        return v

    @field_validator("git_commit")
    @classmethod
    def _commit(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[0-9a-fA-F]{4,64}", v):
            raise ValueError(f"must be a commit hash (hex), got {v!r}")
        return v

    @field_validator("path")
    @classmethod
    def _path(cls, v: str | None) -> str | None:
        if v is not None and (not v.strip() or "\x00" in v):
            raise ValueError("must be a non-empty path")
        return v


class PipPackagesIntegration(_Model):
    integration_type: Literal["pip_packages"]
    packages: list[str]
    upgrade: bool = False
    index_url: str | None = None

    @field_validator("index_url")
    @classmethod
    def _index_url(cls, v: str | None) -> str | None:
        if v is not None:
            check_url(v)
        return v


class AptPackagesIntegration(_Model):
    integration_type: Literal["apt_packages"]
    packages: list[str]


class WandbIntegration(_Model):
    integration_type: Literal["wandb"]
    project: str
    entity: str | None = None
    group: str | None = None
    job_type: str | None = None
    tags: list[str] | None = None


class MlflowIntegration(_Model):
    """mcli's MLflow integration: only environment for MLflow (Composer's MLFlowLogger reads it)."""

    integration_type: Literal["mlflow"]
    experiment_name: str
    tracking_uri: str = "databricks"
    """mcli's default: MLflow managed by Databricks (credentials from a databricks secret)."""
    model_registry_uri: str | None = None


class CometMlIntegration(_Model):
    integration_type: Literal["comet_ml"]
    project_name: str | None = None
    workspace: str | None = None


Integration = Annotated[
    GitRepoIntegration
    | PipPackagesIntegration
    | AptPackagesIntegration
    | WandbIntegration
    | MlflowIntegration
    | CometMlIntegration,
    Field(discriminator="integration_type"),
]
INTEGRATION_TYPES = ("git_repo", "pip_packages", "apt_packages", "wandb", "mlflow", "comet_ml")


def check_remote(v: str) -> str:
    """Validate a data location: dbfs:/Volumes/<catalog>/<schema>/<volume>/..., dbfs:/..., s3://,
    gs://, oci:// or a local path. Raises ValueError with the reason."""
    v = v.strip()
    if not v:
        raise ValueError("must not be empty")
    low = v.lower()
    if low.startswith("file://"):
        raise ValueError(f"file:// URLs are not supported by streaming; use the bare path {v[7:]!r}")
    if low.startswith("dbfs:"):
        if not v.startswith("dbfs:/"):
            raise ValueError(f"a DBFS path starts with dbfs:/, got {v!r}")
        rest = v[len("dbfs:/") :].lstrip("/")
        parts = rest.split("/")
        if parts[0].lower() == "volumes":
            if parts[0] != "Volumes":
                raise ValueError(
                    f"Unity Catalog paths are case-sensitive: did you mean dbfs:/Volumes/{'/'.join(parts[1:])}?"
                )
            names = [p for p in parts[1:4]]
            if len(names) < 3 or not all(names):
                raise ValueError(f"a Volume path is dbfs:/Volumes/<catalog>/<schema>/<volume>/..., got {v!r}")
            for label, part in zip(("catalog", "schema", "volume"), names, strict=True):
                if not VOLUME_PART.match(part):
                    raise ValueError(f"invalid {label} name {part!r} in {v!r}")
        return v
    m = re.match(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://", v)
    if m:
        scheme = m.group(1).lower() + "://"
        if scheme not in REMOTE_SCHEMES:
            raise ValueError(
                f"unsupported scheme {m.group(1)}://; use dbfs:/Volumes/..., s3://, gs://, oci:// or a local path"
            )
        if not v[len(scheme) :].strip("/"):
            raise ValueError(f"{scheme} needs a bucket, got {v!r}")
    return v


class Data(_Model):
    remote: str | None = None
    local: str | None = None

    @field_validator("remote")
    @classmethod
    def _remote(cls, v: str | None) -> str | None:
        return None if v is None else check_remote(v)


DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|min|h)?\s*$")
DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, None: 1.0}


def _seconds(v: Any) -> float:
    """A duration: a number of seconds, or a number with a unit (500ms, 10s, 5m, 1h)."""
    if isinstance(v, bool):
        raise ValueError(f"must be a duration such as 10s, 5m or a number of seconds, got {v!r}")
    if isinstance(v, int | float):
        seconds = float(v)
    else:
        m = DURATION.match(str(v))
        if not m:
            raise ValueError(f"must be a duration such as 10s, 5m or a number of seconds, got {v!r}")
        seconds = float(m.group(1)) * DURATION_UNITS[m.group(2)]
    if not 0 <= seconds <= 86400:
        raise ValueError(f"must be between 0 and 24h, got {v!r}")
    return seconds


def _positive_seconds(v: Any) -> float | None:
    """An optional duration that must be more than 0 s (None stays None)."""
    if v is None:
        return v
    seconds = _seconds(v)
    if seconds <= 0:
        raise ValueError(f"must be more than 0 s, got {v!r}")
    return seconds


class RetryBackoff(_Model):
    """How long a retry waits after a failed attempt: `first` after the first failure,
    doubling after each, at most `max` (the Kubernetes Job controller's exponential backoff)."""

    first: float = 10.0
    max: float = 300.0

    @field_validator("first", "max", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> float:
        return _seconds(v)

    @model_validator(mode="after")
    def _ordered(self) -> RetryBackoff:
        if self.max < self.first:
            raise ValueError(f"max ({self.max:g} s) must be at least first ({self.first:g} s)")
        return self


class PlacementPolicy(_Model):
    """Not an mcli field: failover across the clusters compute.cluster lists (launcher.sdk.placement)."""

    max_queue: float | None = None
    """Seconds a run may wait QUEUED on one cluster before it is withdrawn there and submitted
    to the next (a duration: 15m, 90s, or a number of seconds); None: it waits where it is."""

    @field_validator("max_queue", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> float | None:
        return _positive_seconds(v)


class Resilience(_Model):
    """Not an mcli field: what the entrypoint watches in each rank and how failures are told
    apart (docs/resilience.md). Each default is on only where it costs the run nothing."""

    preflight: bool = False
    """A health gate before the command on every attempt: each rank's devices, then one
    all-reduce (or a rendezvous check) across all ranks. Off by default: it costs seconds."""
    hang_timeout: float | None = None
    """Seconds without progress (a metric record or a heartbeat) on a rank, once it has shown
    some, before the attempt ends as a hang (a duration: 10m, 90s). None: never; a guess that
    is too short would end a healthy run, so there is no default."""
    straggler_factor: Annotated[float, Field(gt=1)] = 2.0
    """A rank whose step time is this multiple of the median is named as a straggler."""
    exclude_faulty_nodes: bool = True
    """The next attempt after a hardware or collective failure pinned to a node avoids it;
    where the ranks are on different nodes, a rank that stays a straggler for
    straggler_grace also ends the attempt as a fault of its node."""
    straggler_grace: float | None = None
    """How long a straggler may stay one before, with exclude_faulty_nodes, it is treated
    as a node fault (a duration: 5m, 90s). None: the longer of 2 min and the attempt's own
    setup time, what a restart costs (docs/resilience.md)."""

    @field_validator("hang_timeout", "straggler_grace", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> float | None:
        return _positive_seconds(v)


# Each retry restarts the whole group and keeps its attempt in the run's record (a Kubernetes
# ConfigMap holds at most 256 KiB of annotations); a command that failed 100 times fails
# for a reason another restart will not fix.
MAX_RETRIES = 100

# mcli's documented priorities, and its default: `auto`, the cluster's own default priority.
MCLI_PRIORITIES = ("lowest", "low", "medium", "high", "highest")
AUTO_PRIORITY = "auto"


class Port(_Model):
    """A port the run serves (TensorBoard, Jupyter, a debugger): `describe` shows the
    `launcher port-forward` command that reaches it."""

    port: Annotated[int, Field(ge=1, le=65535, strict=True)]
    name: str | None = None


class Scheduling(_Model):
    priority: str | None = None
    """Free text, as in mcli; a cluster profile maps it to a priority class."""
    max_retries: Annotated[int, Field(ge=0, le=MAX_RETRIES)] = 0
    retry_on_system_failure: bool = False
    preemptible: bool | None = None
    max_duration: Annotated[float, Field(gt=0)] | None = None
    """Hours, as in mcli."""
    resumable: bool | None = None
    """mcli accepts it (slated for removal there); it changes nothing here."""
    watchdog_enabled: bool | None = Field(default=None, alias="watchdogEnabled")
    """The MosaicML platform's watchdog; accepted and ignored here."""
    retry_backoff: RetryBackoff | None = None
    """Not an mcli field: the wait before each retry (launcher.spec.retry); None is 10 s doubling to 5 min."""

    @model_validator(mode="before")
    @classmethod
    def _camel_case(cls, v: Any) -> Any:
        # mcli still takes the API's spelling retryOnSystemFailure.
        if isinstance(v, dict) and "retryOnSystemFailure" in v and "retry_on_system_failure" not in v:
            v = dict(v)
            v["retry_on_system_failure"] = v.pop("retryOnSystemFailure")
        return v


class Code(_Model):
    """Not an mcli field: a snapshot of a working tree shipped with the run and laid over
    each rank's working directory (over the first git_repo's clone where there is one)."""

    path: str = "."
    """The directory to pack, relative to the directory `launcher run` is started from."""
    include: list[str] = Field(default_factory=list)
    """Outside a git checkout: glob patterns of the files to pack (default: every file)."""
    exclude: list[str] = Field(default_factory=list)
    """Glob patterns of files or directories left out (in a git checkout too)."""
    digest: str | None = None
    """The packed snapshot's sha256, set when the run is submitted (one in a spec is replaced)."""
    size: int | None = None
    """The packed snapshot's bytes, set with the digest."""

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be empty")
        return v


def _env_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float | str):
        return str(v)
    raise ValueError(f"must be a plain value (string or number), got {type(v).__name__}")


class RunSpec(_Model):
    name: str
    image: str | None = None
    command: str
    compute: Compute = Field(default_factory=Compute)
    integrations: list[Integration] = Field(default_factory=list)
    env_variables: dict[str, str] = Field(default_factory=dict)
    secrets: list[str] | None = None
    """Names of stored secrets this run uses; None means all of them, as in mcli."""
    data: Data | None = None
    parameters: dict[str, Any] = Field(default_factory=dict)
    scheduling: Scheduling = Field(default_factory=Scheduling)
    metadata: dict[str, Any] = Field(default_factory=dict)
    ports: list[Port] | None = None
    """Ports the command serves; a bare number is {port: N}."""
    code: Code | None = None
    """Not an mcli field: the working tree shipped with the run (`launcher run --code DIR`)."""
    placement: PlacementPolicy | None = None
    """Not an mcli field: failover across the clusters of compute.cluster (max_queue)."""
    resilience: Resilience | None = None
    """Not an mcli field: health gate, hang watch, failure classes (docs/resilience.md);
    None is Resilience()'s defaults (a submitted spec without the section reads as before)."""
    # Fields that only mean something on the MosaicML platform: accepted, noted, ignored.
    optimization_level: Any = None
    platform: str | None = None
    dependent_deployment: dict[str, Any] | None = None
    parent_name: str | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not sanitize(v):
            raise ValueError(f"must contain at least one letter or digit, got {v!r}")
        return v

    @field_validator("ports", mode="before")
    @classmethod
    def _ports(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [{"port": p} if isinstance(p, int) and not isinstance(p, bool) else p for p in v]
        return v

    @field_validator("image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        if v is None:
            return v
        v = v.strip()
        if not IMAGE_REF.match(v):
            raise ValueError(f"is not a valid Docker image reference: {v!r}")
        return v

    @field_validator("command")
    @classmethod
    def _command(cls, v: str) -> str:
        v = v.strip()
        if not v:
            raise ValueError("must not be empty")
        return v

    @field_validator("env_variables", mode="before")
    @classmethod
    def _env(cls, v: Any) -> Any:
        if not isinstance(v, dict):
            return v
        out = {}
        for key, value in v.items():
            if not isinstance(key, str) or not ENV_NAME.match(key):
                raise ValueError(f"{key!r} is not a valid environment variable name")
            out[key] = _env_value(value)
        return out

    @field_validator("secrets")
    @classmethod
    def _secrets(cls, v: list[str] | None) -> list[str] | None:
        if v is not None:
            seen = set()
            for s in v:
                if s in seen:
                    raise ValueError(f"secret {s!r} is listed twice")
                seen.add(s)
        return v

    @field_validator("parameters", "metadata", mode="before")
    @classmethod
    def _mapping(cls, v: Any) -> Any:
        return {} if v is None else v

    @model_validator(mode="after")
    def _nodes_vs_names(self) -> RunSpec:
        c = self.compute
        if c.node_names and c.nodes and len(c.node_names) != c.nodes:
            raise ValueError(f"compute.node_names lists {len(c.node_names)} nodes but compute.nodes is {c.nodes}")
        return self

    # Derived values every backend uses the same way.
    @property
    def nodes(self) -> int:
        return self.compute.nodes or 1

    def env_for_run(self, run_name: str) -> dict[str, str]:
        """The non-secret environment every rank gets, on every backend."""
        env = dict(self.env_variables)
        env["RUN_NAME"] = run_name
        env["COMPOSER_RUN_NAME"] = run_name
        if self.data and self.data.remote:
            env["DATA_REMOTE"] = self.data.remote
        if self.data and self.data.local:
            env["DATA_LOCAL"] = self.data.local
        for integ in self.integrations:
            if isinstance(integ, MlflowIntegration):
                env["MLFLOW_EXPERIMENT_NAME"] = integ.experiment_name
                env["MLFLOW_TRACKING_URI"] = integ.tracking_uri
                if integ.model_registry_uri:
                    env["MLFLOW_REGISTRY_URI"] = integ.model_registry_uri
            elif isinstance(integ, CometMlIntegration):
                if integ.project_name:
                    env["COMET_PROJECT_NAME"] = integ.project_name
                if integ.workspace:
                    env["COMET_WORKSPACE"] = integ.workspace
            elif isinstance(integ, WandbIntegration):
                env["WANDB_NAME"] = run_name
                env["WANDB_PROJECT"] = integ.project
                if integ.entity:
                    env["WANDB_ENTITY"] = integ.entity
                if integ.group:
                    env["WANDB_RUN_GROUP"] = integ.group
                if integ.job_type:
                    env["WANDB_JOB_TYPE"] = integ.job_type
                if integ.tags:
                    env["WANDB_TAGS"] = ",".join(integ.tags)
        return env

    def parameters_for_file(self) -> dict[str, Any]:
        """What goes into parameters.yaml: mcli drops top-level keys starting with `_`."""
        return {k: v for k, v in self.parameters.items() if not str(k).startswith("_")}

    def to_submitted(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)
