"""What the templates show about a run, as text: the same words and formats as the CLI."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from launcher.backends.base import Run
from launcher.sdk.records import ago, mfu_text, run_duration, running_since, to_yaml, tokens_per_sec_text, when
from launcher.ui.runs import PageAt, cluster_of

PAGING = ("page", "before", "shown")
"""The query parameters that say which page (the rest are the filters)."""


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


def page_href(query: dict[str, str], at: PageAt) -> str:
    """The runs page's address for page `at`, with the filters of `query`."""
    params = {**{k: v for k, v in query.items() if k not in PAGING}, **at.params()}
    return "/?" + urlencode(params) if params else "/"


GLOBALS = {
    "page_href": page_href,
    "ago": ago,
    "run_duration": run_duration,
    "running_since": running_since,
    "when": when,
    "iso": iso,
    "shape": shape,
    "spec_yaml": spec_yaml,
    "cluster_of": cluster_of,
    "tokens_per_sec_text": tokens_per_sec_text,
    "mfu_text": mfu_text,
}
