"""Finding a run's metric records, on any backend, and reading only what is new.

Where the backend reads the experiment tracker the run's trainer logged to
(Feature.TRACKER_METRICS: a Databricks workspace's MLflow), its metric history is the
curve, and the records below are the fallback when it has none.
Where the backend keeps files on this machine (Feature.LOCAL_ARTIFACTS), the run's
metrics.jsonl is read when the trainer wrote one, else rank 0's log of every attempt;
both go through `index_file` with a cached index, so a repeated call parses only the
bytes appended since. Other backends (Kubernetes) only stream logs: each attempt's log
is read through `Backend.logs`, and the records of an attempt that has ended are cached,
since its log will not change.
"""

from __future__ import annotations

import copy
import math
import threading
import time
from pathlib import Path
from typing import cast

from launcher.backends.base import Backend, Run
from launcher.backends.capabilities import Feature, LocalArtifacts, TrackerMetrics, TrackerRun
from launcher.errors import LauncherError
from launcher.metrics.cache import IndexCache
from launcher.metrics.index import FileIndex, Segment, SegmentBuilder, formatted_points, index_file, index_lines
from launcher.metrics.records import METRICS_FILE, scan_records
from launcher.metrics.series import RunMetrics, merge

# While following, an index changes every refresh; rewriting it each time would cost
# more than it saves, so it is saved at most this often (and when the collector closes).
_FOLLOW_SAVE_SECONDS = 30.0


def attempt_indices(run: Run) -> list[int]:
    return sorted({a.index for a in run.attempts}) or [1]


def _attempt_ended(run: Run, index: int) -> bool:
    if index < run.current_attempt:
        return True
    return run.status.is_terminal and all(a.status.is_terminal for a in run.attempts if a.index == index)


def label_attempts(segments: list[Segment], run: Run) -> list[tuple[int, Segment]]:
    """metrics.jsonl holds every attempt's records in one file, with a fit_start at each
    start: give each segment the attempt that had started by its first record, or its
    ordinal when the backend did not record when attempts started."""
    starts = sorted((a.started_at.timestamp(), a.index) for a in run.attempts if a.started_at)
    labelled = []
    for ordinal, seg in enumerate(segments, start=1):
        label = ordinal
        if starts and not math.isnan(seg.first_time):
            began = [index for at, index in starts if at <= seg.first_time]
            label = began[-1] if began else starts[0][1]
        labelled.append((label, seg))
    return labelled


def tracker_segments(tracked: TrackerRun) -> list[Segment]:
    """A tracker run's histories as the segments metric records make: one row per step with
    every metric logged at it (the tracker keeps one history per metric)."""
    rows: dict[int, dict] = {}
    for metric, points in tracked.history.items():
        for step, at, value in points:
            row = rows.setdefault(step, {"step": step, "time": at, "metrics": {}})
            row["metrics"][metric] = value
    builder = SegmentBuilder()
    builder.add_all([rows[step] for step in sorted(rows)])
    return [seg for seg in builder.result() if not seg.empty]


class _LiveLog:
    """Follows one attempt's log in a thread, for backends that can only stream."""

    def __init__(self, backend: Backend, run: str, attempt: int):
        self.attempt = attempt
        self._builder = SegmentBuilder()
        self._lock = threading.Lock()
        self.finished = False
        self.failed = False
        self._thread = threading.Thread(target=self._follow, args=(backend, run), daemon=True)
        self._thread.start()

    def _follow(self, backend: Backend, run: str) -> None:
        try:
            for line in backend.logs(run, rank=0, attempt=self.attempt, follow=True):
                records = list(scan_records(line.text.encode()))
                if records:
                    with self._lock:
                        self._builder.add_all(records, line.rank)
        except Exception:  # noqa: BLE001 - the next refresh re-reads the attempt instead
            self.failed = True
        self.finished = True

    def segments(self) -> list[Segment]:
        with self._lock:
            return copy.deepcopy(self._builder.result())


class Collector:
    """Reads one run's metrics; call refresh() again to pick up what was appended since."""

    def __init__(self, backend: Backend, run: Run, *, cache: IndexCache | None = None, follow: bool = False):
        self.backend = backend
        self.run = run
        self.cache = cache if cache is not None else IndexCache()
        self.follow = follow
        self._files: dict[str, FileIndex] = {}
        self._unsaved: set[str] = set()
        self._saved_at = time.monotonic()
        self._ended: dict[int, list[Segment]] = {}
        self._formatted: dict[str, int] = {}
        """Per cache key, how many points had their JSON text kept when the entry was
        last loaded or saved: `-o json` formats it after refresh(), and close() saves
        it, so that a repeated call finds it."""
        self._live: _LiveLog | None = None
        self.notes: list[str] = []
        """Why some records may be missing (an attempt whose log could not be read)."""

    def refresh(self, run: Run | None = None) -> RunMetrics:
        if run is not None:
            self.run = run
        tracked, tracker_note = None, None
        if self.backend.supports(Feature.TRACKER_METRICS):
            # A backend that supports a feature inherits its mixin (capabilities.check_declaration).
            tracked, tracker_note = self._from_tracker(cast(TrackerMetrics, self.backend))
        if tracked is not None:
            labelled, source = tracked
            self.notes = []
        elif self.backend.supports(Feature.LOCAL_ARTIFACTS):
            labelled, source = self._from_files(cast(LocalArtifacts, self.backend))
        else:
            labelled, source = self._from_streams(), "logs"
        if tracker_note:
            self.notes.append(tracker_note)
        if not self.follow or time.monotonic() - self._saved_at > _FOLLOW_SAVE_SECONDS:
            self.save()
        series, restarts, fit = merge(labelled)
        return RunMetrics(self.run.name, str(self.run.status), source, series, restarts, fit, notes=list(self.notes))

    def save(self) -> None:
        entries: list[tuple[str, object, list[Segment]]] = [(k, i, i.segments) for k, i in self._files.items()]
        entries += [(self._stream_key(a), segs, segs) for a, segs in self._ended.items()]
        for key, value, segments in sorted(entries, key=lambda e: e[0]):
            formatted = formatted_points(segments)
            if key in self._unsaved or formatted != self._formatted.get(key, formatted):
                self.cache.save(self.run.name, key, value)
            self._formatted[key] = formatted
        self._unsaved.clear()
        self._saved_at = time.monotonic()

    close = save

    # --- an experiment tracker ----------------------------------------------------------------

    def _from_tracker(self, backend: TrackerMetrics) -> tuple[tuple[list[tuple[int, Segment]], str] | None, str | None]:
        """(the tracker's curves and where they came from, or None; a note when it could not be read).
        Those of a run that has ended are cached, as an ended attempt's log is: its trainer logs
        no more (a restart is a new attempt, and so a new key)."""
        run = self.run
        key = f"tracker:{self.backend.name}:{run.created_at.isoformat()}:{run.current_attempt}"
        ended = run.status.is_terminal
        if ended:
            cached = self.cache.load(run.name, key)
            if cached is not None:
                return cached, None
        try:
            runs = [r for r in backend.tracker_metrics(run) if any(r.history.values())]
        except LauncherError as e:
            return None, f"{run.name}: cannot read its tracker, so its curves come from its logs: {e.message}"
        if not runs:
            return None, None
        segments = [seg for r in runs for seg in tracker_segments(r)]
        tracked = (label_attempts(segments, run), ", ".join(r.source for r in runs))
        if ended:
            self.cache.save(run.name, key, tracked)
        return tracked, None

    # --- files on this machine ----------------------------------------------------------

    def _from_files(self, backend: LocalArtifacts) -> tuple[list[tuple[int, Segment]], str]:
        jsonl = backend.artifacts_dir(self.run.name) / METRICS_FILE
        if jsonl.is_file():
            segments = self._read(jsonl, prefixed=False)
            if segments:  # else the trainer died before its first record: try the logs
                return label_attempts(segments, self.run), METRICS_FILE
        labelled = []
        for attempt in attempt_indices(self.run):
            path = backend.log_path(self.run.name, 0, attempt)
            if path is not None and path.is_file():
                labelled += [(attempt, seg) for seg in self._read(path, prefixed=True)]
        return labelled, "logs"

    def _read(self, path: Path, *, prefixed: bool) -> list[Segment]:
        key = f"file:{path.resolve()}"
        previous = self._files.get(key) or self.cache.load(self.run.name, key)
        try:
            read = index_file(path, previous, prefixed=prefixed)
        except FileNotFoundError:  # deleted between listing and reading
            return []
        self._files[key] = read.index
        self._formatted.setdefault(key, formatted_points(read.index.segments))
        if read.changed:
            self._unsaved.add(key)
        return read.segments

    # --- backends that only stream logs ---------------------------------------------------

    def _from_streams(self) -> list[tuple[int, Segment]]:
        run = self.run
        labelled = []
        self.notes = []
        for attempt in sorted({a.index for a in run.attempts}):  # none yet: nothing to stream
            if _attempt_ended(run, attempt):
                segments = self._ended_attempt(attempt)
            elif self.follow:
                if self._live is None or self._live.attempt != attempt or (self._live.finished and self._live.failed):
                    self._live = _LiveLog(self.backend, run.name, attempt)
                segments = self._live.segments()
            else:
                segments = self._stream(attempt) or []
            labelled += [(attempt, seg) for seg in segments]
        return labelled

    def _ended_attempt(self, attempt: int) -> list[Segment]:
        if attempt in self._ended:
            return self._ended[attempt]
        key = self._stream_key(attempt)
        segments = self.cache.load(self.run.name, key)
        if segments is None:
            live = self._live
            if live is not None and live.attempt == attempt and live.finished and not live.failed:
                segments = live.segments()
            else:
                segments = self._stream(attempt)
            if segments is None:
                return []
            self.cache.save(self.run.name, key, segments)
        self._formatted[key] = formatted_points(segments)
        self._ended[attempt] = segments
        return segments

    def _stream_key(self, attempt: int) -> str:
        return f"stream:{self.backend.name}:{self.run.created_at.isoformat()}:{attempt}"

    def _stream(self, attempt: int) -> list[Segment] | None:
        """The attempt's records, or None (and a note) if its log cannot be read, e.g. its
        pods are gone: the other attempts still make a curve."""
        try:
            lines = self.backend.logs(self.run.name, rank=0, attempt=attempt)
            return index_lines((line.rank, line.text) for line in lines)
        except LauncherError as e:
            self.notes.append(f"attempt {attempt} of {self.run.name}: cannot read its log: {e.message}")
            return None
