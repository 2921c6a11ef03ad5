"""Where a run's wall time went, from what its record already holds (statuses with times,
each attempt's setup time and last progress): every backend's `Run` gives the same split.

    queued      from submission to the first attempt's start (PENDING, QUEUED)
    starting    STARTING, and each attempt's setup before its command (clone, install,
                health gate: the entrypoint's exit file says how long)
    productive  the commands' running time, less what was lost
    lost        of each failed attempt, the time since its last progress (a metric record
                or a heartbeat); all of its running time where none came
    restarting  between a failed attempt's end and the next one's start (the backoff)

The five add up to the wall time (submission to end, or to now while the run lives), by
construction: each stretch between two recorded statuses goes to exactly one of them.
What was lost is counted from progress, not checkpoints: steps made since the last
checkpoint before a failure are redone by the next attempt but are not counted as lost.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from launcher.backends.runstatus import RunStatus

if TYPE_CHECKING:
    from launcher.backends.base import Run

PARTS = ("queued", "starting", "productive", "lost", "restarting")


@dataclass(frozen=True)
class Throughput:
    """What the trainer's metric records say of its speed (launcher.metrics.throughput):
    None where they do not say it (a trainer without Composer's SpeedMonitor; MFU needs
    the model's FLOPs and the GPU's peak, so never on CPU)."""

    tokens_per_sec: float | None = None
    mfu: float | None = None


@dataclass(frozen=True)
class Goodput:
    wall: float
    """Seconds from submission to the end (or to now)."""
    queued: float
    starting: float
    productive: float
    lost: float
    restarting: float
    gpus: int
    """GPUs the run holds while it starts and runs (the spec's compute.gpus)."""
    gpu_hours: float
    """GPUs × (starting + productive + lost) in hours: the GPUs are held from STARTING on."""
    gpu_type: str | None = None
    price_per_gpu_hour: float | None = None
    """From the cluster profile's price_per_gpu_hour table; None: the table has no price for it."""
    tokens_per_sec: float | None = None
    """The run's tokens per second (all ranks), from its metric records; None: not known, or not read."""
    mfu: float | None = None
    """Its model FLOPs utilisation (0-1), from its metric records; None: not known, or not read."""

    @property
    def cost(self) -> float | None:
        return None if self.price_per_gpu_hour is None else round(self.gpu_hours * self.price_per_gpu_hour, 2)

    @property
    def goodput(self) -> float | None:
        """The productive share of the wall time (None before any time passed)."""
        return self.productive / self.wall if self.wall > 0 else None

    def record(self) -> dict:
        return {
            "wall": self.wall,
            **{part: getattr(self, part) for part in PARTS},
            "goodput": None if self.goodput is None else round(self.goodput, 4),
            "gpus": self.gpus,
            "gpu_hours": round(self.gpu_hours, 4),
            "gpu_type": self.gpu_type,
            "price_per_gpu_hour": self.price_per_gpu_hour,
            "cost": self.cost,
            "tokens_per_sec": self.tokens_per_sec,
            "mfu": self.mfu,
        }


def attempt_progress(ranks: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The Attempt fields goodput and describe read, from what its ranks report (each
    {"step", "age", "setup", "resumed": {"path", "step"}}, any of them missing; in rank
    order): its last step (the highest), how long before its end progress last came (the
    freshest rank's), its setup (the slowest rank's: the command starts when every rank is
    ready) and the checkpoint it resumed from (the first rank's that says). One rule for the
    local backend's exit files and the Kubernetes pods' termination messages."""
    steps: list[int] = []
    ages: list[float] = []
    setups: list[float] = []
    resumed: Mapping[str, Any] = {}
    for rank in ranks:
        if isinstance(rank.get("step"), int):
            steps.append(rank["step"])
        if isinstance(rank.get("age"), int | float):
            ages.append(float(rank["age"]))
        if isinstance(rank.get("setup"), int | float):
            setups.append(float(rank["setup"]))
        said = rank.get("resumed")
        if not resumed and isinstance(said, Mapping):
            resumed = said
    return {
        "last_step": max(steps) if steps else None,
        "progress_age": min(ages) if ages else None,
        "setup_seconds": max(setups) if setups else None,
        "resumed_from": resumed.get("path") if isinstance(resumed.get("path"), str) else None,
        "resumed_step": resumed.get("step") if isinstance(resumed.get("step"), int) else None,
    }


def split_by_attempt(run: Run, now: datetime | None = None) -> dict[int, dict[str, float]]:
    """Each attempt's PARTS in seconds (unrounded): the wait before it (queued before the
    first, restarting before a retry) is its own, as are its setup, work and loss."""
    end = run.ended_at or now or datetime.now(UTC)
    events = sorted(run.events, key=lambda e: e.at)
    per: dict[int, dict[str, float]] = {}

    def of(attempt: int) -> dict[str, float]:
        return per.setdefault(attempt, dict.fromkeys(PARTS, 0.0))

    running: dict[int, float] = {}
    started = False
    ended: set[int] = set()
    if events:
        of(events[0].attempt)["queued"] += max(0.0, (events[0].at - run.created_at).total_seconds())
    for i, e in enumerate(events):
        upto = events[i + 1].at if i + 1 < len(events) else end
        # Within [created_at, end]: an event's time may have whole seconds (Kubernetes'), so the
        # first can come before a creation time read to the microsecond.
        seconds = max(0.0, (min(upto, end) - max(e.at, run.created_at)).total_seconds())
        if e.status in (RunStatus.PENDING, RunStatus.QUEUED):
            # A wait recorded under the attempt that just ended is the next one's restart.
            waiting = e.attempt + 1 if e.attempt in ended else e.attempt
            of(waiting)["restarting" if started else "queued"] += seconds
        elif e.status is RunStatus.STARTING:
            started = True
            of(e.attempt)["starting"] += seconds
        elif e.status in (RunStatus.RUNNING, RunStatus.TERMINATING):
            started = True
            running[e.attempt] = running.get(e.attempt, 0.0) + seconds
        else:
            of(e.attempt)  # an attempt that ended before it ran is still listed
            ended.add(e.attempt)
    for a in run.attempts:
        parts = of(a.index)
        ran = running.pop(a.index, 0.0)
        setup = min(ran, a.setup_seconds or 0.0)
        parts["starting"] += setup
        ran -= setup
        failed = a.status is RunStatus.FAILED or a.failure_class is not None
        lost = (ran if a.progress_age is None else min(ran, a.progress_age)) if failed else 0.0
        parts["lost"] += lost
        parts["productive"] += ran - lost
    # Attempts the record no longer lists (none today) still ran: their time is work.
    for index, ran in running.items():
        of(index)["productive"] += ran
    # A restart the run never made (stopped while it waited): the wait is the last attempt's.
    listed = {a.index for a in run.attempts}
    for index in [i for i in per if i not in listed and i - 1 in per and listed]:
        for part, seconds in per.pop(index).items():
            per[index - 1][part] += seconds
    return dict(sorted(per.items()))


def goodput_of(run: Run, prices: dict[str, float] | None = None, now: datetime | None = None) -> Goodput:
    """Split `run`'s wall time into PARTS (seconds, to the millisecond; they add up to `wall`)."""
    end = run.ended_at or now or datetime.now(UTC)
    parts = dict.fromkeys(PARTS, 0.0)
    for split in split_by_attempt(run, end).values():
        for part, seconds in split.items():
            parts[part] += seconds
    wall = round(max(0.0, (end - run.created_at).total_seconds()), 3)
    rounded = {k: round(v, 3) for k, v in parts.items()}
    # Rounding each part may leave a millisecond over or short: productive takes it.
    rounded["productive"] = round(wall - sum(v for k, v in rounded.items() if k != "productive"), 3)
    compute = run.spec.get("compute") or {}
    gpus = int(compute.get("gpus") or 0)
    gpu_type = compute.get("gpu_type")
    held = rounded["starting"] + rounded["productive"] + rounded["lost"]
    price = (prices or {}).get(gpu_type) if gpu_type else None
    speed = run.throughput or Throughput()
    return Goodput(
        tokens_per_sec=speed.tokens_per_sec,
        mfu=speed.mfu,
        wall=wall,
        gpus=gpus,
        gpu_hours=gpus * held / 3600,
        gpu_type=gpu_type,
        price_per_gpu_hour=price,
        **rounded,
    )


def by_attempt(run: Run, now: datetime | None = None) -> list[dict]:
    """Each attempt's PARTS (seconds, to the millisecond), their total, and its goodput (the
    productive share of that total): `launcher metrics --goodput` plots them."""
    statuses = {a.index: a.status.value for a in run.attempts}
    rows = []
    for index, parts in split_by_attempt(run, now).items():
        rounded = {part: round(seconds, 3) for part, seconds in parts.items()}
        total = round(sum(rounded.values()), 3)
        share = round(rounded["productive"] / total, 4) if total > 0 else None
        rows.append({"attempt": index, "status": statuses.get(index), **rounded, "total": total, "goodput": share})
    return rows
