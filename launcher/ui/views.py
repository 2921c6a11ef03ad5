"""What the templates show about a run, as text: the same words and formats as the CLI."""

from __future__ import annotations

from typing import Any

from launcher.backends.base import Run
from launcher.sdk.records import ago, duration, to_yaml, when
from launcher.ui.runs import cluster_of


def shape(run: Run) -> str:
    """Nodes × GPUs per node, e.g. '2 × 8 a100', or '1 × cpu'."""
    compute = run.spec.get("compute") or {}
    gpus = int(compute.get("gpus") or 0)
    if not gpus:
        return f"{run.nodes} × cpu"
    per_node = gpus // run.nodes
    return f"{run.nodes} × {per_node}" + (f" {compute['gpu_type']}" if compute.get("gpu_type") else "")


def spec_yaml(run: Run) -> str:
    return to_yaml(run.spec)


def iso(ts: Any) -> str:
    return ts.isoformat() if ts is not None else ""


GLOBALS = {
    "ago": ago,
    "duration": duration,
    "when": when,
    "iso": iso,
    "shape": shape,
    "spec_yaml": spec_yaml,
    "cluster_of": cluster_of,
}
