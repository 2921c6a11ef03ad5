"""What a listing asks of a backend (`Backend.list(query)`): the filters of `get runs` and
how many runs at most, so that each backend answers from its store's index (the local
state's created_at and status indexes, the API server's label selectors and pages) and a
listing costs what it shows, not the whole history.

`RunQuery.matches` is the one meaning of the filters: a backend may narrow in its store
with any part of it, but judges every run it returns by it, so the backends agree."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from launcher.spec.names import SUFFIX_LEN, sanitize

if TYPE_CHECKING:
    from launcher.backends.base import Run
    from launcher.backends.runstatus import RunStatus


def is_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


_SUFFIX = re.compile(rf"-[a-z0-9]{{{SUFFIX_LEN}}}$")


def spec_name_of(run_name: str) -> str:
    """The sanitized spec name a run name was made from (`hello-x7k2pq`: `hello`)."""
    return _SUFFIX.sub("", run_name)


def of_spec(pattern: str, run_name: str) -> bool:
    """Whether `run_name` is a run of the spec named `pattern`."""
    base = sanitize(pattern)
    return bool(base) and spec_name_of(run_name) == base and run_name != base


def name_matches(pattern: str, run_name: str) -> bool:
    """For listings: `pattern` as a full name, a glob, or a spec name (every run of it)."""
    return run_name == pattern or fnmatch.fnmatch(run_name, pattern) or of_spec(pattern, run_name)


def gpu_types_of(spec: dict[str, Any]) -> set[str]:
    """The gpu_type filter values a run's spec matches: its compute.gpu_type; "none" and
    "cpu" (as listings show it) for a run without GPUs."""
    compute = spec.get("compute") or {}
    gpu_type = str(compute.get("gpu_type") or "").lower()
    if gpu_type in ("", "none") and not compute.get("gpus"):
        return {"none", "cpu"}
    return {gpu_type}


def gpus_of(spec: dict[str, Any]) -> int:
    return int((spec.get("compute") or {}).get("gpus") or 0)


@dataclass(frozen=True)
class RunQuery:
    """The runs a listing wants, newest first. Every field left empty (or None) filters
    nothing: `RunQuery()` is every run, as `list()` without a query gives."""

    names: tuple[str, ...] = ()
    """Full run names, globs or spec names (every run of that spec): any of them."""
    ids: frozenset[str] = frozenset()
    """Only runs with exactly these names."""
    statuses: frozenset[RunStatus] = frozenset()
    gpu_types: frozenset[str] = frozenset()
    """compute.gpu_type values, lowercase ("none" or "cpu" for runs without GPUs)."""
    gpu_nums: frozenset[int] = frozenset()
    before: datetime | None = None
    """Created before this time (aware)."""
    after: datetime | None = None
    """Created after this time (aware)."""
    limit: int | None = None
    """At most this many runs (the newest); None: every match."""
    extra: int = field(default=0, compare=False)
    """How many more than `limit` a backend returns: the caller drops some after (copies of
    a run withdrawn from this cluster)."""

    @property
    def wanted(self) -> int | None:
        """How many runs a backend returns at most."""
        return None if self.limit is None else max(self.limit, 0) + self.extra

    def matches_name(self, name: str) -> bool:
        return (not self.ids or name in self.ids) and (not self.names or any(name_matches(p, name) for p in self.names))

    def matches_created(self, created: datetime | None) -> bool:
        if created is None:
            return self.before is None and self.after is None
        return (self.before is None or created < self.before) and (self.after is None or created > self.after)

    def matches_spec(self, spec: dict[str, Any]) -> bool:
        return (not self.gpu_types or bool(gpu_types_of(spec) & self.gpu_types)) and (
            not self.gpu_nums or gpus_of(spec) in self.gpu_nums
        )

    def matches(self, run: Run) -> bool:
        return (
            self.matches_name(run.name)
            and (not self.statuses or run.status in self.statuses)
            and self.matches_created(run.created_at)
            and self.matches_spec(run.spec)
        )

    def full(self, count: int) -> bool:
        """Whether `count` runs fill the listing."""
        wanted = self.wanted
        return wanted is not None and count >= wanted
