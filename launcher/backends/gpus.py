"""The GPU catalogue both backends share: mcli's gpu_type names, how each selects a
Kubernetes node under three label schemes (GFD, GKE, Karpenter), and how a spec's compute
section resolves to nodes x GPUs of one type. The local backend checks a spec's gpu_type
against the same names, so a spec valid here is valid on a cluster."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from launcher.errors import InputError
from launcher.spec.models import QUANTITY

if TYPE_CHECKING:
    from launcher.spec.models import RunSpec

GPU_RESOURCE = "nvidia.com/gpu"
CPU_TYPE = "none"

GFD_LABEL = "nvidia.com/gpu.product"
GKE_LABEL = "cloud.google.com/gke-accelerator"
KARPENTER_LABEL = "karpenter.k8s.aws/instance-gpu-name"
KARPENTER_MEMORY = "karpenter.k8s.aws/instance-gpu-memory"  # MiB per GPU


class GpuType(BaseModel):
    """How one gpu_type selects nodes. `node_affinity` maps a label to the values it may
    take (required affinity, keys ANDed), for label schemes with several spellings."""

    model_config = ConfigDict(extra="forbid")

    node_selector: dict[str, str] = Field(default_factory=dict)
    node_affinity: dict[str, list[str]] = Field(default_factory=dict)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    gpus_per_node: int = Field(ge=0)
    resource: str = GPU_RESOURCE
    cpus_per_gpu: float | None = Field(default=None, gt=0)
    """What a pod requests per GPU when its spec names no compute.cpus (see default_requests)."""
    memory_per_gpu: str | None = None
    """Likewise for compute.memory: a Kubernetes quantity such as 64Gi."""

    @field_validator("memory_per_gpu")
    @classmethod
    def _memory(cls, v: str | None) -> str | None:
        return _quantity(v)


def _quantity(v: str | None) -> str | None:
    if v is not None and not QUANTITY.match(str(v)):
        raise ValueError(f"must be a Kubernetes quantity such as 64Gi or 512Mi, got {v!r}")
    return v


# What one GPU of a type brings of its node, for pods whose spec names no cpus or memory: about
# two thirds of the leanest common node per GPU, leaving room for the system and daemonsets.
# A100/H100/H200 nodes have 12 or more vCPUs and 85 GB or more per GPU (a2-highgpu-1g, p4d,
# a3-highgpu-1g, p5); L4 and T4 come on 4 vCPU / 15-16 GB nodes with one GPU (g2-standard-4,
# g6.xlarge, n1-standard-4, g4dn.xlarge).
_LARGE_SHARE = (8.0, "64Gi")
_SMALL_SHARE = (2.0, "8Gi")


def _gpu(
    label: str, values: list[str], gpus: int, share: tuple[float, str], extra: dict[str, list[str]] | None = None
) -> GpuType:
    affinity = {label: values, **(extra or {})}
    return GpuType(node_affinity=affinity, gpus_per_node=gpus, cpus_per_gpu=share[0], memory_per_gpu=share[1])


# mcli's gpu_type names -> (GFD product names, GKE accelerator, Karpenter gpu name [, memory MiB]), GPUs per
# node, the share of a node per GPU. GFD spells one GPU several ways (SXM vs PCIe), hence affinity with a value list.
_SHIPPED: dict[str, tuple[list[str], str, tuple[str, str | None], int, tuple[float, str]]] = {
    "a100_40gb": (
        ["NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-PCIE-40GB"],
        "nvidia-tesla-a100",
        ("a100", "40960"),
        8,
        _LARGE_SHARE,
    ),
    "a100_80gb": (
        ["NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-80GB-PCIe"],
        "nvidia-a100-80gb",
        ("a100", "81920"),
        8,
        _LARGE_SHARE,
    ),
    "h100_80gb": (["NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-PCIe"], "nvidia-h100-80gb", ("h100", None), 8, _LARGE_SHARE),
    "h200_141gb": (["NVIDIA-H200"], "nvidia-h200-141gb", ("h200", None), 8, _LARGE_SHARE),
    "l4": (["NVIDIA-L4"], "nvidia-l4", ("l4", None), 8, _SMALL_SHARE),
    "t4": (["Tesla-T4"], "nvidia-tesla-t4", ("t4", None), 4, _SMALL_SHARE),
}
# For a gpu_type of the profile's own that names no share, and for CPU-only runs.
GENERIC_SHARE = _LARGE_SHARE
CPU_RUN_REQUESTS = (1.0, "2Gi")
LABEL_SCHEMES = ("gfd", "gke", "karpenter")


def shipped_gpu_types(scheme: str = "gfd") -> dict[str, GpuType]:
    """The default gpu_types table for one label scheme. Besides mcli's names, each
    scheme's own label values work as gpu_type names (NVIDIA-H100-80GB-HBM3, nvidia-l4, h100)."""
    out: dict[str, GpuType] = {CPU_TYPE: GpuType(gpus_per_node=0)}
    for name, (products, gke, (karp, karp_mem), per_node, share) in _SHIPPED.items():
        if scheme == "gfd":
            t = _gpu(GFD_LABEL, products, per_node, share)
            aliases = products
        elif scheme == "gke":
            t = GpuType(
                node_selector={GKE_LABEL: gke}, gpus_per_node=per_node, cpus_per_gpu=share[0], memory_per_gpu=share[1]
            )
            aliases = [gke]
        else:
            t = _gpu(KARPENTER_LABEL, [karp], per_node, share, {KARPENTER_MEMORY: [karp_mem]} if karp_mem else None)
            aliases = [] if karp_mem else [karp]  # "a100" alone is ambiguous (40 or 80 GB)
        out[name] = t
        for alias in aliases:
            out.setdefault(alias, t)
    return out


@dataclass(frozen=True)
class Placement:
    """Where a run's ranks go: `nodes` pods of `gpus_per_node` GPUs of `gpu_type`."""

    nodes: int
    gpus_per_node: int
    gpu_type_name: str
    gpu_type: GpuType

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


def resolve_placement(
    spec: RunSpec,
    table: dict[str, GpuType],
    *,
    default_gpu_type: str | None = None,
    cluster: str = "the shipped defaults",
) -> Placement:
    """Nodes x GPUs of one gpu_type of `table` for the spec's compute section, or an InputError
    that names `cluster` and the known names."""
    c = spec.compute
    name = c.gpu_type
    if name is None:
        name = CPU_TYPE if not c.gpus else default_gpu_type
        if name is None:
            raise InputError(
                f"compute.gpu_type: {c.gpus} GPUs asked without a gpu_type, and cluster {cluster} "
                f"has no default_gpu_type (known: {', '.join(sorted(table))})"
            )
    if name not in table:
        import difflib

        guess = difflib.get_close_matches(str(name), [n for n in table if n.islower()], n=1, cutoff=0.5)
        hint = f"; did you mean {guess[0]!r}?" if guess else ""
        raise InputError(
            f"compute.gpu_type: unknown gpu_type {name!r} on cluster {cluster} "
            f"(known: {', '.join(sorted(table))}){hint}"
        )
    gpu_type = table[name]
    per_node = gpu_type.gpus_per_node
    if per_node == 0:
        if c.gpus:
            raise InputError(f"compute.gpus: gpu_type {name!r} has no GPUs, but {c.gpus} were asked")
        return Placement(spec.nodes, 0, name, gpu_type)
    gpus = c.gpus if c.gpus is not None else per_node * spec.nodes
    if gpus == 0:
        raise InputError(f"compute.gpus: 0 GPUs of gpu_type {name!r}; use gpu_type none for a CPU run")
    if c.nodes is not None:
        if gpus % c.nodes or gpus // c.nodes > per_node:
            raise InputError(
                f"compute: {gpus} GPUs do not fit {c.nodes} nodes of {per_node} {name} GPUs "
                f"(use {c.nodes * per_node} GPUs, or leave nodes out)"
            )
        return Placement(c.nodes, gpus // c.nodes, name, gpu_type)
    if gpus <= per_node:
        return Placement(1, gpus, name, gpu_type)
    if gpus % per_node:
        raise InputError(
            f"compute.gpus: {gpus} GPUs do not fit {name} nodes of {per_node} GPUs: "
            f"use at most {per_node}, or a multiple of {per_node}"
        )
    return Placement(gpus // per_node, per_node, name, gpu_type)
