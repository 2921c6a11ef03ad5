"""Newest first without reading the whole history: the API server orders a list by name,
never by time, so a run's record and JobSet carry their creation time as labels at four
resolutions (second, minute, hour, day, UTC), and a listing asks for the runs of a
window of time at a time by a set selector (`launcher.dev/created-second in (...)`),
from now backwards, each window about twice as long as the last and as coarse as its
bounds allow. A listing of 50 reads the few windows that hold its 50 newest runs.

Runs of a launcher from before the labels (none of them) are listed once by
`!launcher.dev/created-second` and merged by their creationTimestamp; what is older than
HORIZON_DAYS is read by one last look at every record (a listing whose filters keep
fewer runs than it shows gets there)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from datetime import UTC, datetime

from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.attempts import ts
from launcher.backends.kubernetes.kubeapi import KubeApi, KubeError, RequestRetry

CREATED = {
    1: "launcher.dev/created-second",
    60: "launcher.dev/created-minute",
    3600: "launcher.dev/created-hour",
    86400: "launcher.dev/created-day",
}
"""The label of each resolution, in seconds; its value is the UTC time cut to it."""
FORMATS = {1: "%Y%m%d%H%M%S", 60: "%Y%m%d%H%M", 3600: "%Y%m%d%H", 86400: "%Y%m%d"}

MAX_VALUES = 64
"""Values in one set selector: 64 days, about 700 bytes of query string."""
SKEW_SECONDS = 600
"""The walk starts this far ahead of this machine's clock: another submitter's may run fast."""
HORIZON_DAYS = 730
PAGE_ITEMS = 500


def created_labels(at: datetime) -> dict[str, str]:
    """The creation-time labels of a run created at `at`."""
    utc = at.astimezone(UTC)
    return {label: utc.strftime(FORMATS[unit]) for unit, label in CREATED.items()}


def _value(t: int, unit: int) -> str:
    return datetime.fromtimestamp(t, UTC).strftime(FORMATS[unit])


def windows(now: float, horizon: float) -> Iterator[tuple[str, list[str], int]]:
    """(label, values, lower bound) of set selectors that cover (horizon, now + skew]
    newest first without overlap. First what lies ahead of this machine's clock (another
    submitter's may run fast): the minutes after this one, then this minute's seconds from
    now on. Then from now backwards, each window the coarsest unit its upper bound is
    aligned to and no wider than it wants (twice the last window's width), stopping at the
    next coarser unit's boundary so that the one after may use it."""
    t = math.ceil(now)
    minute = t - t % 60
    ahead = list(range(minute + 60, t + SKEW_SECONDS, 60))
    if ahead:
        yield CREATED[60], [_value(m, 60) for m in reversed(ahead)], minute + 60
    # The rest of this minute and the seconds just past: one window.
    first = max(minute, t - 2)
    yield CREATED[1], [_value(s, 1) for s in range(minute + 59, first - 1, -1)], first
    t = first
    units = sorted(CREATED)
    width = 4
    while t > horizon:
        unit = max(u for u in units if t % u == 0 and u <= width)
        count = max(1, min(width // unit, MAX_VALUES))
        coarser = next((u for u in units if u > unit), None)
        if coarser is not None and t % coarser:
            count = min(count, (t % coarser) // unit)
        values = [_value(t - (i + 1) * unit, unit) for i in range(count)]
        t -= count * unit
        yield CREATED[unit], values, t
        width *= 2


def _metadata(api: KubeApi, kind: str, selector: str, policy: RequestRetry | None) -> list[dict]:
    """Every item's metadata the selector takes, in pages."""
    out: list[dict] = []
    token = None
    while True:
        try:
            page = api.list_page(
                kind, labels=selector, limit=PAGE_ITEMS, token=token, metadata_only=True, policy=policy
            )
        except KubeError as e:
            if e.status == 404 and kind == "JobSet":  # JobSet was removed: the records still list
                return out
            raise
        out += [item.get("metadata") or {} for item in page.items]
        token = page.token
        if token is None:
            return out


def _runs(
    api: KubeApi, selector: str, policy: RequestRetry | None, kinds: tuple[str, ...] = ("ConfigMap", "JobSet")
) -> dict[str, str]:
    """run name -> creationTimestamp of the records and JobSets the selector takes (a JobSet
    whose submit died before its record counts too; the record's time wins)."""
    created: dict[str, str] = {}
    for kind in kinds:
        for meta in _metadata(api, kind, selector, policy):
            name = (meta.get("labels") or {}).get(keys.RUN)
            if name and name not in created:
                created[name] = meta.get("creationTimestamp") or ""
    return created


def newest_names(
    api: KubeApi, base: str, policy: RequestRetry | None = None, *, now: float | None = None
) -> Iterator[tuple[str, str]]:
    """(creationTimestamp, run name) of every run the label selector `base` takes, newest
    first (ties by name, descending), read a window of time at a time: the caller stops
    when it has what it wants."""
    now = time.time() if now is None else now
    seen: set[str] = set()
    # Records alone: a JobSet without the labels is a restart's (its record has them) or an
    # older launcher's, whose record is found here.
    unlabelled = sorted(
        ((at, name) for name, at in _runs(api, f"{base},!{CREATED[1]}", policy, ("ConfigMap",)).items()),
        reverse=True,
    )

    def older_first_out(bound: float) -> Iterator[tuple[str, str]]:
        # The unlabelled runs at least as new as `bound`, which the windows do not hold.
        while unlabelled and _epoch(unlabelled[0][0]) >= bound:
            yield unlabelled.pop(0)

    for label, values, lower in windows(now, now - HORIZON_DAYS * 86400):
        found = _runs(api, f"{base},{label} in ({','.join(values)})", policy)
        batch = [(at, name) for name, at in found.items()] + list(older_first_out(lower))
        for at, name in sorted(batch, reverse=True):
            if name not in seen:
                seen.add(name)
                yield at, name
    # Past the horizon: one look at everything, for what is older still.
    rest = [(at, name) for name, at in _runs(api, base, policy).items() if name not in seen]
    yield from sorted(rest, reverse=True)


def _epoch(at: str) -> float:
    t = ts(at)
    return t.timestamp() if t is not None else 0.0
