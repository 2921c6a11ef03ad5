"""Kubernetes cluster profiles: where runs go and how a gpu_type selects nodes.

A profile is one `clusters.<name>` entry of $LAUNCHER_HOME/config.yaml:

    clusters:
      my-gke:
        backend: kubernetes
        context: gke_proj_zone_name       # kubeconfig context (default: the current one; `cluster add` stores it)
        kubeconfig: ~/.kube/config        # default: $KUBECONFIG, then ~/.kube/config
        namespace: training               # default: the context's namespace, else default
        service_account: trainer          # optional
        image: ghcr.io/org/launcher:1.0   # used when a spec names no image
        gpu_labels: gke                   # gfd (default) | gke | karpenter: which shipped table
        default_gpu_type: h100_80gb       # used when a spec asks for GPUs without a type
        gpu_types:                        # added to, or replacing, the shipped entries
          h100_80gb: {node_selector: {cloud.google.com/gke-accelerator: nvidia-h100-80gb}, gpus_per_node: 8}
        cpus_per_gpu: 8                   # requests of a pod whose spec names no compute.cpus / memory
        memory_per_gpu: 64Gi              #   (default: the gpu_type's own, else 8 and 64Gi)
        default_cpus: 1                   # the same for a CPU-only run
        default_memory: 2Gi
        queue: team-a                     # Kueue LocalQueue (kueue.x-k8s.io/queue-name)
        priority_classes: {low: low, high: high}   # scheduling.priority -> class name (default: mcli's five)
        priority_class_kind: WorkloadPriorityClass  # or PriorityClass (the pods' priorityClassName)
        non_preemptible_priority_class: protected  # used when scheduling.preemptible is false
        entrypoint_mode: zipapp           # zipapp (any image with python3) | inject (any image) | image
        runtime_image: ghcr.io/launcher-dev/launcher-runtime:0.1.0
        runtime_image_pull_policy: IfNotPresent
        instance_label: node.kubernetes.io/instance-type   # compute.instance selects on it
        spot: gke                         # gke | karpenter | generic | {label, value, taint}
        log_store: s3://bucket/launcher/  # an archive of every rank's log that outlives the pods
        log_store_secret: logs-s3         # the secret whose credentials write and read it
        ttl_seconds_after_finished: 86400 # the cluster deletes a finished run's JobSet after this (not its record nor archive)
        retention_days: 90                # each submit deletes the finished runs that ended more than 90 days ago
        retention_logs: keep              #   and their log archive where this is delete (default: keep)
        pod_security: baseline            # or restricted: pods a namespace enforcing `restricted` admits
        run_as_user: 1000                 # the pods' runAsUser (default: the image's user)
        shm_size: 64Gi                    # sizeLimit of /dev/shm (default: the pod's memory)
        cache_size: 100Gi                 # sizeLimit of the cache emptyDir /tmp/launcher-cache
        request_timeout: 30               # seconds one API request may take, its retries included

`resolve_placement` turns a spec's compute section into nodes x GPUs on one
gpu_type, or a clear error; `default_requests` says what a pod asks for when the spec
names no cpus or memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from launcher import __version__
from launcher.backends import gpus
from launcher.backends.gpus import (  # noqa: F401 - the catalogue, as this backend's modules name it
    CPU_RUN_REQUESTS,
    CPU_TYPE,
    GENERIC_SHARE,
    GFD_LABEL,
    GKE_LABEL,
    GPU_RESOURCE,
    KARPENTER_LABEL,
    GpuType,
    Placement,
    _quantity,
    shipped_gpu_types,
)
from launcher.backends.kubernetes.reach import DEFAULT_NAMESPACE, profile_namespace
from launcher.spec.models import MCLI_PRIORITIES

if TYPE_CHECKING:
    from launcher.config import Profile
    from launcher.spec.models import RunSpec

# The runtime image that inject mode copies into every pod (images/runtime/Dockerfile),
# pinned to this package's version so the entrypoint matches the launcher that rendered it.
RUNTIME_IMAGE = f"ghcr.io/launcher-dev/launcher-runtime:{__version__}"
INSTANCE_LABEL = "node.kubernetes.io/instance-type"


class SpotScheme(BaseModel):
    """How a cluster marks spot (preemptible) nodes: a node label with a value, and
    optionally a taint on that key that spot pods must tolerate."""

    model_config = ConfigDict(extra="forbid")

    label: str
    value: str
    taint: bool = False


SPOT_SCHEMES = {
    # GKE labels spot nodes cloud.google.com/gke-spot=true; spot node pools are often tainted so.
    "gke": SpotScheme(label="cloud.google.com/gke-spot", value="true", taint=True),
    # Karpenter: karpenter.sh/capacity-type is spot or on-demand; no taint by default.
    "karpenter": SpotScheme(label="karpenter.sh/capacity-type", value="spot"),
    # Clusters without a provider scheme: the common lifecycle label, tainted likewise.
    "generic": SpotScheme(label="node.kubernetes.io/lifecycle", value="spot", taint=True),
}


class ClusterProfile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    backend: Literal["kubernetes"] = "kubernetes"
    context: str | None = None
    kubeconfig: str | None = None
    namespace: str = DEFAULT_NAMESPACE
    """load_profile fills it from the kubeconfig context when config.yaml names none."""
    service_account: str | None = None
    image: str | None = None
    gpu_labels: Literal["gfd", "gke", "karpenter"] = "gfd"
    default_gpu_type: str | None = None
    gpu_types: dict[str, GpuType] = Field(default_factory=dict)
    queue: str | None = None
    # The shipped profile maps each of mcli's priorities to a class of the same name.
    priority_classes: dict[str, str] = Field(default_factory=lambda: {p: p for p in MCLI_PRIORITIES})
    priority_class_kind: Literal["WorkloadPriorityClass", "PriorityClass"] = "WorkloadPriorityClass"
    non_preemptible_priority_class: str | None = None
    jobset: bool | None = None
    """Read and ignored: profiles that `cluster add` wrote before JobSet became the one form
    carry it. Every run is a JobSet; submit asks the cluster whether it serves one."""
    entrypoint_mode: Literal["zipapp", "inject", "image"] = "zipapp"
    runtime_image: str = RUNTIME_IMAGE
    runtime_image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    instance_label: str = INSTANCE_LABEL
    spot: Literal["gke", "karpenter", "generic"] | SpotScheme | None = None
    master_port: int = Field(default=29500, ge=1, le=65535)
    request_timeout: float = Field(default=30.0, gt=0)
    """Seconds one Kubernetes API request may take, its retries included, as kubectl's
    --request-timeout: past it a server that accepts connections but never answers is an
    error naming the cluster. A watch or a followed log gets its answer's headers within
    it, then waits as long as a quiet stream may be quiet."""
    shm_size: str | None = None
    """sizeLimit of the /dev/shm memory volume; None: the pod's memory (its request, or the
    spec's memory), which /dev/shm counts against anyway."""
    cache_size: str = "100Gi"
    """sizeLimit of the cache emptyDir (LAUNCHER_CACHE_DIR, the runs' streaming caches): past
    it the kubelet evicts the pod, naming the volume, rather than fill the node's disk."""
    pod_security: Literal["baseline", "restricted"] = "baseline"
    """The Pod Security Standard the pods are rendered to meet. Either way: seccompProfile
    RuntimeDefault (what Docker gives every container), no ServiceAccount token (the
    entrypoint never calls the API), a sizeLimit on every emptyDir. `restricted` adds
    runAsNonRoot, allowPrivilegeEscalation false and every capability dropped: the image
    must run as a non-root user (its USER, or run_as_user), and cannot apt-get install."""
    run_as_user: int | None = Field(default=None, ge=0)
    """The pods' runAsUser; None: the image's own user. Needed under `restricted` where the
    image's USER is root or a name (the kubelet cannot verify a name is not root)."""

    @field_validator("shm_size", "cache_size")
    @classmethod
    def _volume_size(cls, v: str | None) -> str | None:
        return _quantity(v)

    @field_validator("run_as_user")
    @classmethod
    def _restricted_user(cls, v: int | None, info: ValidationInfo) -> int | None:
        if v == 0 and info.data.get("pod_security") == "restricted":
            raise PydanticCustomError(
                "root_under_restricted",
                "0 is root, which pod_security: restricted refuses (runAsNonRoot): "
                "name a non-root uid, or set pod_security: baseline",
            )
        return v

    cpus_per_gpu: float | None = Field(default=None, gt=0)
    memory_per_gpu: str | None = None
    """What a GPU pod requests per GPU when its spec names no compute.cpus / compute.memory,
    for every gpu_type (see default_requests)."""
    default_cpus: float = Field(default=CPU_RUN_REQUESTS[0], gt=0)
    default_memory: str = CPU_RUN_REQUESTS[1]
    """What a pod of a CPU-only run requests when its spec names no cpus / memory."""

    @field_validator("memory_per_gpu", "default_memory")
    @classmethod
    def _memory(cls, v: str | None) -> str | None:
        return _quantity(v)

    log_store: str | None = None
    """Where each rank archives its masked log as it writes it (launcher.pod.logarchive):
    s3://, dbfs:/Volumes/... or a path every pod mounts, which the pods' stdlib entrypoint
    writes (pod_store_problem; a run on another refuses at submit and validate); read by
    `logs`, `metrics` and the dashboard once the pods are gone."""
    log_store_secret: str | None = None
    """The secret (in the profile's namespace) whose env vars or files give the pods the
    log_store's credentials, as a run's own secrets are given."""
    code_store: str | None = None
    """Where a run's code snapshot goes when it packs past what a ConfigMap holds (700 KiB):
    <code_store>/<run>/code.tar.gz, written at submit and fetched by each rank's entrypoint;
    s3://, dbfs:/Volumes/... or a path every pod mounts, as log_store."""
    code_store_secret: str | None = None
    """The secret whose env vars or files give the host and the pods the code_store's credentials."""
    code_in_secret: bool = False
    """A run's code snapshot (`run --code`) travels in a Secret <run>-code rather than a
    ConfigMap of that name (where the working tree is not for every reader of ConfigMaps)."""
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0)
    """ttlSecondsAfterFinished of the JobSet or Job: the cluster deletes a finished run's
    JobSet, Jobs and pods this long after it ends; the record (not owned by such a JobSet)
    and the log archive stay, until `launcher delete`."""
    retention_days: int | None = Field(default=None, ge=1, le=730)
    """Each submit deletes (a page at a time, retention.py) the finished runs of this
    namespace that ended more than this many days ago, as `launcher delete` does; live runs
    are never touched. None: the history is kept until `launcher delete`. At most 730 (the
    selector of the old records lists every day kept)."""
    retention_logs: Literal["keep", "delete"] = "keep"
    """What retention does with a pruned run's log archive in the log_store: keep it (an
    object store's own lifecycle rules may expire it), or delete it with the record."""
    price_per_gpu_hour: dict[str, Annotated[float, Field(ge=0)]] = Field(default_factory=dict)
    """What a GPU-hour costs on this cluster by gpu_type, on-premise too (a run's goodput shows its cost)."""

    @field_validator("log_store", "code_store")
    @classmethod
    def _log_store(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("must be a URL, e.g. s3://bucket/launcher/ or dbfs:/Volumes/<c>/<s>/<v>/logs/")
        return v

    @model_validator(mode="before")
    @classmethod
    def _kubeconfig_namespace(cls, settings: Any, info: ValidationInfo) -> Any:
        """As kubectl does: the kubeconfig context's namespace where config.yaml names none
        (read without contacting anyone). Only for a profile read from config.yaml
        (validate_profile's context); one built in code keeps DEFAULT_NAMESPACE."""
        if (info.context or {}).get("config") and isinstance(settings, dict) and settings.get("namespace") is None:
            settings = {**settings, "namespace": profile_namespace(settings)}
        return settings

    @model_validator(mode="after")
    def _default_gpu_type(self) -> ClusterProfile:
        if self.default_gpu_type is not None and self.default_gpu_type not in self.all_gpu_types():
            raise ValueError(
                f"default_gpu_type: unknown gpu_type {self.default_gpu_type!r} "
                f"(known: {', '.join(sorted(self.all_gpu_types()))})"
            )
        return self

    @field_validator("namespace")
    @classmethod
    def _ns(cls, v: str) -> str:
        if not v or len(v) > 63:
            raise ValueError("must be a Kubernetes namespace name")
        return v

    def all_gpu_types(self) -> dict[str, GpuType]:
        table = shipped_gpu_types(self.gpu_labels)
        table.update(self.gpu_types)
        return table

    def spot_scheme(self) -> SpotScheme | None:
        return SPOT_SCHEMES[self.spot] if isinstance(self.spot, str) else self.spot

    @property
    def where(self) -> str:
        return f"namespace {self.namespace} of cluster {self.name}"


def load_profile(profile: Profile) -> ClusterProfile:
    """Parse a config.yaml profile (config.validate_profile: a bad field is a one-line
    InputError naming it). Done once per profile per command: the backend keeps it
    (KubernetesBackend.profile)."""
    from launcher.config import validate_profile

    return validate_profile(ClusterProfile, profile)


def resolve_placement(spec: RunSpec, profile: ClusterProfile) -> Placement:
    """The spec's nodes x GPUs on one of the profile's gpu_types (the shared catalogue and its own)."""
    return gpus.resolve_placement(
        spec, profile.all_gpu_types(), default_gpu_type=profile.default_gpu_type, cluster=profile.name
    )


def default_requests(profile: ClusterProfile, placement: Placement) -> tuple[float, str]:
    """(CPUs, memory) one pod requests when its spec names none: a share of its node, so the
    pod is Burstable, never BestEffort (the first evicted under memory pressure). Per GPU, the
    first set of: the profile's own gpu_types entry, the profile's cpus_per_gpu /
    memory_per_gpu, the shipped gpu_type's share, GENERIC_SHARE; a CPU-only pod gets the
    profile's default_cpus / default_memory."""
    gpus = placement.gpus_per_node
    if not gpus:
        return profile.default_cpus, profile.default_memory
    own = profile.gpu_types.get(placement.gpu_type_name)

    def first(field: str, generic: float | str):
        for source in (own, profile, placement.gpu_type):
            value = getattr(source, field) if source is not None else None
            if value is not None:
                return value
        return generic

    cpus = first("cpus_per_gpu", GENERIC_SHARE[0]) * gpus
    return cpus, quantity_times(first("memory_per_gpu", GENERIC_SHARE[1]), gpus)


def quantity_times(quantity: str, times: int) -> str:
    """A Kubernetes quantity multiplied by a whole number, in its own suffix: 64Gi x 8 = 512Gi."""
    from decimal import Decimal

    number = quantity.rstrip("KMGTPEikmn")
    if "e" in number:  # an exponent form (1e9): the number is all of it
        number = quantity
    suffix = quantity[len(number) :]
    value = Decimal(number) * times
    return f"{value.normalize():f}{suffix}"
