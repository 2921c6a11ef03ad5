"""A run's log as server-sent events that a reconnect resumes exactly.

The Backend contract yields each rank's lines in order (the order they were written),
but interleaves ranks as they come. So the position in a stream is a count of lines per
rank, not one offset: the cursor `a2:0=120,1=97` means "attempt 2, 120 lines of rank 0
and 97 of rank 1 delivered". A reconnect with it (Last-Event-ID) reads the attempt again
and skips, per rank, the lines already delivered, so it loses no line and repeats none,
on any backend, without the backend keeping any state for it.

Lines are sent in batches (one event holds what had arrived since the previous one):
the browser only moves its Last-Event-ID when a whole event has arrived, so a batch is
delivered entirely or not at all.
"""

from __future__ import annotations

import asyncio
import json
import queue
import re
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

from launcher.backends.base import Backend, LogLine, Run
from launcher.errors import LauncherError
from launcher.sdk.logview import is_metric_record

_CURSOR_RE = re.compile(r"^a(\d+):((?:\d+=\d+)(?:,\d+=\d+)*)?$")
BATCH_LINES = 2000
"""At most this many lines per event: a long backlog arrives in pieces the page can draw."""
_QUEUE_LINES = 20000
"""How far the reader thread may run ahead of a slow client before it waits."""


@dataclass
class Cursor:
    attempt: int
    counts: dict[int, int] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"a{self.attempt}:" + ",".join(f"{r}={n}" for r, n in sorted(self.counts.items()))

    @classmethod
    def parse(cls, text: str) -> Cursor:
        """Raises ValueError for a cursor this module did not write."""
        m = _CURSOR_RE.match(text.strip())
        if not m:
            raise ValueError(f"not a log cursor: {text!r}")
        counts = {}
        for part in (m.group(2) or "").split(","):
            if part:
                rank, n = part.split("=")
                counts[int(rank)] = int(n)
        return cls(int(m.group(1)), counts)


def tail_cursor(backend: Backend, name: str, attempt: int, rank: int | None, tail: int, *, raw: bool = False) -> Cursor:
    """A cursor that skips all but the last `tail` lines of each rank written so far (of
    the lines shown: without `raw`, the metric records are not counted among them)."""
    counts: dict[int, int] = {}
    shown: dict[int, list[int]] = {}  # per rank, how many lines came before each shown one
    for line in backend.logs(name, rank=rank, attempt=attempt, follow=False):
        n = counts.get(line.rank, 0)
        counts[line.rank] = n + 1
        if raw or not is_metric_record(line.text):
            shown.setdefault(line.rank, []).append(n)

    def skipped(r: int, n: int) -> int:
        if tail == 0:
            return n
        before = shown.get(r, [])
        return before[-tail] if len(before) >= tail else 0

    return Cursor(attempt, {r: skipped(r, n) for r, n in counts.items()})


def line_json(line: LogLine) -> dict:
    return {"rank": line.rank, "attempt": line.attempt, "text": line.text}


class _Reader:
    """Runs the backend's (blocking) log iterator in a thread and hands its lines to the
    event loop. `stopped` is the iterator's cancel: once the client has left, the backend
    ends it within about a second, even on a quiet run, and the thread ends with it."""

    _END = object()

    def __init__(
        self, lines: Iterator[LogLine], skip: dict[int, int], loop: asyncio.AbstractEventLoop, stopped: threading.Event
    ):
        self.queue: queue.Queue = queue.Queue(maxsize=_QUEUE_LINES)
        self.wake = asyncio.Event()
        self.stopped = stopped
        self._woken = threading.Event()
        self._loop = loop
        self._lines = lines
        self._skip = dict(skip)
        threading.Thread(target=self._run, daemon=True, name="log-stream").start()

    def _signal(self) -> None:
        # One wake-up per batch, not per line: a backlog of 100k lines is one hand-over.
        if self._woken.is_set():
            return
        self._woken.set()
        try:
            self._loop.call_soon_threadsafe(self.wake.set)
        except RuntimeError:  # the loop is gone: the client left
            self.stopped.set()

    def _put(self, item: object) -> None:
        while not self.stopped.is_set():
            try:
                self.queue.put(item, timeout=0.5)
                self._signal()
                return
            except queue.Full:
                continue

    def _run(self) -> None:
        skip = self._skip
        try:
            for line in self._lines:
                if self.stopped.is_set():
                    break
                if skip.get(line.rank, 0) > 0:  # delivered before the reconnect
                    skip[line.rank] -= 1
                    continue
                self._put(line)
        except Exception as e:  # noqa: BLE001 - shown to the client as an error event
            self._put(e)
        finally:
            close = getattr(self._lines, "close", None)
            if close is not None:
                close()
            self._put(self._END)

    def drain(self, limit: int) -> list[object]:
        self._woken.clear()
        items: list[object] = []
        while len(items) < limit:
            try:
                items.append(self.queue.get_nowait())
            except queue.Empty:
                break
        return items


async def log_events(
    backend: Backend, run: Run, cursor: Cursor, rank: int | None, follow: bool, *, raw: bool = False
) -> AsyncIterator[dict]:
    """The SSE events (sse-starlette dicts) of one attempt's log from `cursor` on:
    `lines` events (id: the cursor after them), then one `end` event when the attempt is
    over (or, without follow, when the lines written so far are sent). Without `raw`,
    the trainer's metric records are not sent (the charts show them), though the
    cursor counts them: it is a position in the log as written."""

    sent = dict(cursor.counts)
    stopped = threading.Event()
    lines = backend.logs(run.name, rank=rank, attempt=cursor.attempt, follow=follow, cancel=stopped)
    reader = _Reader(lines, cursor.counts, asyncio.get_running_loop(), stopped)
    try:
        while True:
            await reader.wake.wait()
            reader.wake.clear()
            batch: list[dict] = []
            done = error = None
            for item in reader.drain(BATCH_LINES):
                if item is _Reader._END:
                    done = True
                    break
                if isinstance(item, Exception):
                    error = item
                    continue
                assert isinstance(item, LogLine)
                sent[item.rank] = sent.get(item.rank, 0) + 1
                if raw or not is_metric_record(item.text):
                    batch.append(line_json(item))
            if not reader.queue.empty():
                reader.wake.set()  # more than one batch was waiting
            now = Cursor(cursor.attempt, dict(sent))
            if batch:
                yield {"event": "lines", "id": str(now), "data": json.dumps({"lines": batch})}
            if error is not None:
                message = error.message if isinstance(error, LauncherError) else f"{type(error).__name__}: {error}"
                yield {"event": "failure", "data": json.dumps({"message": message})}
            if done:
                try:
                    latest = await asyncio.to_thread(backend.get, run.name)  # may be an API call
                    status, attempts = latest.status.value, latest.current_attempt
                except LauncherError:
                    status, attempts = run.status.value, run.current_attempt
                yield {
                    "event": "end",
                    "id": str(now),
                    "data": json.dumps({"attempt": cursor.attempt, "status": status, "attempts": attempts}),
                }
                return
    finally:
        reader.stopped.set()
