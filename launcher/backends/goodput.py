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

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from launcher.backends.runstatus import RunStatus

if TYPE_CHECKING:
    from launcher.backends.base import Run

PARTS = ("queued", "starting", "productive", "lost", "restarting")


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
        }


def goodput_of(run: Run, prices: dict[str, float] | None = None, now: datetime | None = None) -> Goodput:
    """Split `run`'s wall time into PARTS (seconds, to the millisecond; they add up to `wall`)."""
    end = run.ended_at or now or datetime.now(UTC)
    events = sorted(run.events, key=lambda e: e.at)
    parts = dict.fromkeys(PARTS, 0.0)
    running: dict[int, float] = {}
    started = False
    if events:
        parts["queued"] += max(0.0, (events[0].at - run.created_at).total_seconds())
    for i, e in enumerate(events):
        upto = events[i + 1].at if i + 1 < len(events) else end
        seconds = max(0.0, (min(upto, end) - e.at).total_seconds())
        if e.status in (RunStatus.PENDING, RunStatus.QUEUED):
            parts["restarting" if started else "queued"] += seconds
        elif e.status is RunStatus.STARTING:
            started = True
            parts["starting"] += seconds
        elif e.status in (RunStatus.RUNNING, RunStatus.TERMINATING):
            started = True
            running[e.attempt] = running.get(e.attempt, 0.0) + seconds
    for a in run.attempts:
        ran = running.get(a.index, 0.0)
        setup = min(ran, a.setup_seconds or 0.0)
        parts["starting"] += setup
        ran -= setup
        failed = a.status is RunStatus.FAILED or a.failure_class is not None
        lost = (ran if a.progress_age is None else min(ran, a.progress_age)) if failed else 0.0
        parts["lost"] += lost
        parts["productive"] += ran - lost
    # Attempts the record no longer lists (none today) still ran: their time is work.
    parts["productive"] += sum(v for k, v in running.items() if k not in {a.index for a in run.attempts})
    wall = round(max(0.0, (end - run.created_at).total_seconds()), 3)
    rounded = {k: round(v, 3) for k, v in parts.items()}
    # Rounding each part may leave a millisecond over or short: productive takes it.
    rounded["productive"] = round(wall - sum(v for k, v in rounded.items() if k != "productive"), 3)
    compute = run.spec.get("compute") or {}
    gpus = int(compute.get("gpus") or 0)
    gpu_type = compute.get("gpu_type")
    held = rounded["starting"] + rounded["productive"] + rounded["lost"]
    price = (prices or {}).get(gpu_type) if gpu_type else None
    return Goodput(
        wall=wall,
        gpus=gpus,
        gpu_hours=gpus * held / 3600,
        gpu_type=gpu_type,
        price_per_gpu_hour=price,
        **rounded,
    )
