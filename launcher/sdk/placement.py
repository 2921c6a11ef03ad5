"""Placement across clusters, and failover.

A run whose compute.cluster (or `--cluster`) is `auto` (every cluster profile here but
local, in config order) or a list of profiles goes to the first of them, in order,
whose free GPUs of the type it asks for fit it (Backend.free_gpus: the nodes' allocatable
GPUs less the pods' requests, or a Kueue ClusterQueue's free quota); failing that, to the
first whose backend makes machines for each run (OnDemandCompute: a Databricks job cluster or
serverless GPUs, where its profile maps the gpu_type), which always fits, minutes later. The profiles are
asked at once, each within ASK_SECONDS: a cluster that is down or hangs is an answer
("could not be asked"), never a wait. When none fits, the run goes to the first that
answered, and waits in its queue there.

When the cluster chosen cannot be reached at submit, the next candidate takes the run.
With `placement: {max_queue: 15m}`, a run that waits (PENDING or QUEUED) that long on one
cluster is withdrawn there (stopped, its record kept) and submitted to the next under the
same run name, as its next attempt; the move is kept in the run index (index.db) and shown
by `describe`; launcher.sdk.failover watches for it and moves the run.

decide() is pure: the tests and the bench give it candidates directly.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from launcher.backends.base import Backend, RunStatus
from launcher.backends.capabilities import Feature, FreeGpus, GpuUsageReport, OnDemandCompute
from launcher.errors import InputError
from launcher.spec.models import AUTO_CLUSTER, cluster_names

if TYPE_CHECKING:
    from launcher.config import Config, Profile
    from launcher.spec.models import RunSpec

ASK_SECONDS = 3.0
"""How long a placement waits for one profile's free GPUs: a cluster that hangs costs this, once."""
WAITING = (RunStatus.PENDING, RunStatus.QUEUED)
"""A run in these has not started: max_queue counts them."""


# --- the decision --------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """One profile a run may go to, as it answered: its free GPUs, or why it could not be asked."""

    profile: str
    free: FreeGpus | None = None
    error: str | None = None

    def words(self) -> str:
        if self.free is None:
            error = (self.error or "no answer").removeprefix(f"cluster {self.profile}: ")
            return f"{self.profile} could not be asked ({error})"
        f = self.free
        if f.on_demand:
            return f"{self.profile} makes {f.source} for it" + (f" ({f.free} {f.gpu_type})" if f.free else "")
        where = f"{self.profile}'s {f.source}" if f.source != "nodes" else self.profile
        if f.gpu_type == "none":
            return f"{where} takes CPU runs"
        return f"{where} has {f.free} of {f.total} free {f.gpu_type}"


@dataclass(frozen=True)
class Decision:
    gpus: int
    """The GPUs the run asks for."""
    candidates: tuple[Candidate, ...]
    chosen: str | None
    """The profile the run goes to; None when not one could be asked."""
    fits: bool
    """Whether the chosen profile has the GPUs free (else the run waits in its queue there)."""

    def line(self) -> str:
        """The decision in one line, as `run` prints it."""
        said = ", ".join(c.words() for c in self.candidates)
        if self.chosen is None:
            return f"placement: {said}: no cluster can take the run"
        if self.fits:
            return f"placement: {said}: placed on {self.chosen}"
        return (
            f"placement: {said}: none has {self.gpus} free; placed on {self.chosen}, the first that "
            "answered, where it waits in the queue"
        )


def gpus_of(spec: RunSpec | Mapping[str, Any]) -> int:
    compute = spec.get("compute") or {} if isinstance(spec, Mapping) else spec.compute.model_dump()
    return int(compute.get("gpus") or 0)


def decide(spec: RunSpec | Mapping[str, Any], candidates: Sequence[Candidate]) -> Decision:
    """The first candidate, in order, whose free GPUs fit the run now (any that answered, for
    a run without GPUs); else the first that makes machines for the run (on demand: it always
    fits, once they have started, minutes later, and paid for by the run, where a cluster's
    free nodes are up already); when none fits, the first that answered; None when none did."""
    gpus = gpus_of(spec)
    answered = [c for c in candidates if c.free is not None]
    fitting = [c for c in answered if c.free is not None and c.free.free >= gpus]
    fitting.sort(key=lambda c: c.free is not None and c.free.on_demand)  # stable: in order within each
    chosen = fitting[0] if fitting else answered[0] if answered else None
    return Decision(gpus, tuple(candidates), chosen.profile if chosen else None, bool(fitting))


# --- the candidates ------------------------------------------------------------------------


def candidate_profiles(cluster: str | list[str] | None, config: Config) -> list[Profile]:
    """The profiles `auto` or a list names, in order; a name that is no profile is an error."""
    names = cluster_names(cluster)
    if names == [AUTO_CLUSTER]:
        from launcher.backends.registry import is_cluster

        profiles = [p for p in config.profiles() if is_cluster(p)]
        if not profiles:
            raise InputError(
                "compute.cluster: auto places the run on a cluster profile, and there is none but local",
                hint="add one with `launcher cluster add`",
            )
        return profiles
    known = {p.name: p for p in config.profiles()}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InputError(
            f"compute.cluster: {', '.join(map(repr, unknown))} names no cluster profile (known: {', '.join(known)})",
            hint="add one with `launcher cluster add`",
        )
    return [known[n] for n in names]


def ask(spec: RunSpec, profiles: Sequence[Profile], *, seconds: float = ASK_SECONDS) -> list[Candidate]:
    """Each profile's free GPUs of the type `spec` asks for, all asked at once, each within
    `seconds`; a profile whose backend refuses the spec (offline: an unknown gpu_type there)
    or that is down or silent is a Candidate with its error."""
    from launcher.sdk.fanout import ask_each

    def free_on(backend: Backend) -> FreeGpus:
        try:
            backend.check(spec)
            # A backend that supports a feature inherits its mixin (capabilities.check_declaration).
            if not backend.supports(Feature.GPU_USAGE) and backend.supports(Feature.ON_DEMAND_COMPUTE):
                return cast(OnDemandCompute, backend).on_demand_gpus(spec)
            backend.require(Feature.GPU_USAGE)  # a refusal is this candidate's error, as a check's
            return cast(GpuUsageReport, backend).free_gpus(spec)
        finally:
            backend.close()

    # Candidates that are one place (one cluster's namespace through two profiles) are asked
    # once, through the first of them: its GPUs are counted once, and it is tried once.
    answers, failed = ask_each(list(profiles), free_on, seconds=seconds, prefer=[p.name for p in profiles])
    return [
        Candidate(p.name, answers[p.name]) if p.name in answers else Candidate(p.name, error=failed[p.name].message)
        for p in profiles
        if p.name not in answers.same_place
    ]


# --- preparing and submitting --------------------------------------------------------------


@dataclass
class Placed:
    """A prepared run's placement: where the decision put it and where it may go next."""

    candidates: list[str]
    position: int
    decision: str
    config: Any
    """The RunConfig, for preparing the run on another candidate."""
    run_name: str
    allow_files: tuple[str, ...] = ()
    on_note: Callable[[str], None] | None = None
    skipped: list[dict] = field(default_factory=list)
    """Candidates that could not be reached at submit, as moves of attempt 1."""

    def note(self, text: str) -> None:
        if self.on_note is not None:
            self.on_note(text)


def max_queue_of(spec: RunSpec) -> float | None:
    return spec.placement.max_queue if spec.placement is not None else None


def now_text() -> str:
    return datetime.now(UTC).isoformat()


# --- the run index's record, and the watcher -----------------------------------------------


def placement_of(name: str) -> dict[str, Any] | None:
    """The run's placement as the index keeps it (None: it was not placed)."""
    from launcher.sdk.index import RunIndex

    return RunIndex().placement(name)


def movable(state: Mapping[str, Any] | None) -> bool:
    """Whether failover could still move the run: a max_queue, and a candidate after this one."""
    return bool(
        state
        and state.get("max_queue")
        and not state.get("exhausted")
        and state["position"] + 1 < len(state["candidates"])
    )


def watcher_log(name: str) -> Path:
    from launcher.config import launcher_home

    return launcher_home() / "placement" / f"{name}.log"


def start_watcher(name: str) -> None:
    """The detached process that keeps max_queue for a run while nobody follows it."""
    log = watcher_log(name)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        subprocess.Popen(
            [sys.executable, "-m", "launcher.sdk.failover", name],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
