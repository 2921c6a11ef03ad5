"""Turning records into compact columns, and files into incrementally updated indexes.

A log of 100k steps is mostly noise and tens of megabytes; what `launcher metrics` needs
from it is a few arrays of numbers. `index_file` reads only the bytes appended since the
last call (it resumes from a byte offset, after checking the file is still the one it
read), and the result is small enough to pickle into a cache between calls.
"""

from __future__ import annotations

import copy
import hashlib
import math
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launcher.metrics.jsontext import point_texts
from launcher.metrics.records import FIT_START, scan_records

_HEAD_BYTES = 4096
_CHUNK_BYTES = 32 << 20


@dataclass
class Columns:
    """One metric's points within a segment, in the order they were logged."""

    steps: array = field(default_factory=lambda: array("q"))
    times: array = field(default_factory=lambda: array("d"))
    values: array = field(default_factory=lambda: array("d"))
    json_text: str = field(default="", compare=False, repr=False)
    """The JSON text (jsontext.point_texts) of the first `json_count` points, one a line:
    formatted on first use and kept, so the cache carries it to the next call. One string
    rather than a list, since a str pickles and unpickles as one copy."""
    json_count: int = field(default=0, compare=False, repr=False)

    def json_points(self) -> list[str]:
        """The JSON text of every point; only points added since the last call are
        formatted (the arrays only ever grow)."""
        n, done = len(self.steps), self.json_count
        if done > n:  # cannot happen while arrays only grow; never serve stale text
            self.json_text, self.json_count, done = "", 0, 0
        if done < n:
            new = "\n".join(point_texts(self.steps[done:], self.values[done:], self.times[done:]))
            self.json_text = self.json_text + "\n" + new if done else new
            self.json_count = n
        return self.json_text.split("\n") if n else []


@dataclass
class Segment:
    """The records of one trainer start (a fit_start event begins a new segment)."""

    events: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Columns] = field(default_factory=dict)
    first_time: float = math.nan

    @property
    def empty(self) -> bool:
        return not self.events and not self.metrics


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) else None  # bools count, as 0.0/1.0


def _floats(values: list[Any]) -> array | None:
    try:
        return array("d", values)
    except (TypeError, OverflowError):
        return None


class SegmentBuilder:
    """Accumulates records, rank 0's only, into segments.

    Metric rows are buffered and turned into columns in bulk (one list comprehension
    per metric, not three appends per value): this is most of the cost of a first read.
    """

    def __init__(self, segments: list[Segment] | None = None):
        self.segments = segments if segments else [Segment()]
        self._steps: list[int] = []
        self._times: list[float] = []
        self._metrics: list[dict[str, Any]] = []

    def add(self, record: dict[str, Any], default_rank: int = 0) -> None:
        self.add_all((record,), default_rank)

    def add_all(self, records: Iterable[Any], default_rank: int = 0) -> None:
        steps, times, metrics = self._steps, self._times, self._metrics
        seg = self.segments[-1]
        nan = math.nan
        for record in records:
            if type(record) is not dict:
                continue
            rank = record.get("rank", default_rank)  # record_rank(), inlined: this loop is hot
            if rank != 0 and (type(rank) is int or default_rank != 0):
                continue
            t = record.get("time")
            if type(t) is not float:
                t = float(t) if isinstance(t, int) else nan
            if "event" in record:
                if record["event"] == FIT_START and (not seg.empty or steps):
                    self._flush()
                    seg = Segment()
                    self.segments.append(seg)
                seg.events.append(record)
            if math.isnan(seg.first_time):
                seg.first_time = t
            m = record.get("metrics")
            step = record.get("step")
            if type(m) is dict and type(step) is int and 0 <= step < 1 << 63:
                steps.append(step)
                times.append(t)
                metrics.append(m)

    def _flush(self) -> None:
        steps, times, rows = self._steps, self._times, self._metrics
        if not steps:
            return
        seg = self.segments[-1]
        step_col, time_col = array("q", steps), array("d", times)
        names = sorted(set().union(*rows))
        # The trainer logs the same metrics every step: then every row has every name.
        uniform = all(len(m) == len(names) for m in rows)
        # Metrics logged at the same steps share one steps and one times array (so the
        # cache holds them once, not once per metric: a third of its size at a dozen
        # metrics). Shared arrays are therefore replaced, never grown in place; a grown
        # pair stays shared since the same old array plus the same new one is reused.
        # Keyed by identity; each entry keeps its two arrays alive, or a freed array's id
        # could be reused by a later one (of another metric, or the other typecode) and
        # find this entry: a wrong curve, or a TypeError adding 'q' to 'd' arrays.
        grown: dict[tuple[int, int], tuple[array, array, array]] = {}

        def grow(old: array, new: array) -> array:
            key = (id(old), id(new))
            if key not in grown:
                grown[key] = (old, new, old + new if old else new)
            return grown[key][2]

        for name in names:
            if uniform:
                s, t, values = step_col, time_col, [m[name] for m in rows]
            else:
                idx = [i for i, m in enumerate(rows) if name in m]
                s = array("q", [steps[i] for i in idx])
                t = array("d", [times[i] for i in idx])
                values = [rows[i][name] for i in idx]
            v = _floats(values)
            if v is None:  # some values are not numbers: keep the points that are
                ok = [i for i, x in enumerate(values) if _number(x) is not None]
                s, t = array("q", [s[i] for i in ok]), array("d", [t[i] for i in ok])
                v = array("d", [float(values[i]) for i in ok])
            if not v:
                continue
            cols = seg.metrics.get(name)
            if cols is None:
                cols = seg.metrics[name] = Columns()
            cols.steps, cols.times = grow(cols.steps, s), grow(cols.times, t)
            cols.values.extend(v)  # never shared
        steps.clear()
        times.clear()
        rows.clear()

    def result(self) -> list[Segment]:
        self._flush()
        return [s for s in self.segments if not s.empty]


@dataclass
class FileIndex:
    """What was read from one file: its records up to `offset` (a line boundary)."""

    path: str
    prefixed: bool
    offset: int = 0
    head: bytes = b""
    """Digest of the file's first bytes, so a replaced or truncated file is re-read."""
    segments: list[Segment] = field(default_factory=list)


@dataclass
class FileRead:
    index: FileIndex
    changed: bool
    """Whether `index` moved on from the one passed in (worth saving)."""
    segments: list[Segment]
    """The index's segments plus any unterminated last line (not committed to the index,
    since its writer may still be appending to it)."""


def _head_digest(f: Any, upto: int) -> bytes:
    f.seek(0)
    return hashlib.blake2b(f.read(min(upto, _HEAD_BYTES)), digest_size=16).digest()


def index_file(path: Path, previous: FileIndex | None = None, *, prefixed: bool = True) -> FileRead:
    """Read the records of `path`, resuming from `previous` when it still describes the
    file's beginning (same path, file not shorter, same first bytes)."""
    key = str(path)
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        resumed = (
            previous is not None
            and previous.path == key
            and previous.prefixed == prefixed
            and previous.offset <= size
            and _head_digest(f, previous.offset) == previous.head
        )
        if resumed:
            assert previous is not None
            if previous.offset == size:
                return FileRead(previous, False, previous.segments)
            # The caller may hold on to `previous`: never mutate it.
            index = copy.deepcopy(previous)
        else:
            index = FileIndex(path=key, prefixed=prefixed)
        start = offset = index.offset
        builder = SegmentBuilder(index.segments)
        f.seek(start)
        carry = b""
        while chunk := f.read(_CHUNK_BYTES):
            block = carry + chunk
            cut = block.rfind(b"\n") + 1
            builder.add_all(scan_records(block[:cut], prefixed=prefixed))
            offset += cut
            carry = block[cut:]
        index.offset = offset
        index.segments = builder.result()
        index.head = _head_digest(f, offset)

    segments = index.segments
    if carry.strip():
        tail = SegmentBuilder(copy.deepcopy(index.segments))
        tail.add_all(scan_records(carry, prefixed=prefixed))
        segments = tail.result()
    return FileRead(index, not resumed or offset != start, segments)


def formatted_points(segments: Iterable[Segment]) -> int:
    """How many points of `segments` have their JSON text kept: when it grew, the index
    is worth saving again."""
    return sum(c.json_count for seg in segments for c in seg.metrics.values())


def index_lines(lines: Iterable[tuple[int, str]]) -> list[Segment]:
    """Segments from (rank, text) log lines, for backends that only stream logs."""
    builder = SegmentBuilder()
    for rank, text in lines:
        builder.add_all(scan_records(text.encode()), rank)
    return builder.result()
