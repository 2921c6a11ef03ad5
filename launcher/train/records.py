"""Writing metric records (launcher.metrics.records) from a trainer, off the training loop.

Both trainers (Composer's MPT and the Hugging Face recipe) emit one record per step on
global rank 0: to stdout with the record prefix, and appended to metrics.jsonl in each
folder. A line for people (the MPT trainer's progress line) goes to stdout in order with them. The writes (JSON encoding, the pipe, the files, their flushes) happen on a
background thread, so a slow reader of stdout or a slow disk never stalls a step; `close`
drains the queue, so no record is lost at the end of a run.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from launcher.metrics.records import METRIC_PREFIX, METRICS_FILE, format_record

_STOP = object()


@dataclass(frozen=True)
class _Text:
    """A line for people among the queued records."""

    text: str


class RecordWriter:
    def __init__(self, folders: Iterable[str | os.PathLike[str]] = (), stream: IO[str] | None = None):
        self.folders = list(dict.fromkeys(Path(f) for f in folders))
        self.stream = stream
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._files: list[IO[str]] = []

    def open(self) -> None:
        for folder in self.folders:
            folder.mkdir(parents=True, exist_ok=True)
            self._files.append(open(folder / METRICS_FILE, "a", encoding="utf-8"))
        self._thread = threading.Thread(target=self._run, name="metric-records", daemon=True)
        self._thread.start()

    def emit(self, record: dict[str, Any]) -> None:
        """Queue one record: `step` first, then the time and rank, then the rest."""
        if self._thread is None:
            return
        head = {"step": record.pop("step")} if "step" in record else {}
        self._queue.put({**head, "time": round(time.time(), 3), "rank": 0, **record})

    def say(self, text: str) -> None:
        """Queue one line for people (a progress line): to the stream, after the records
        queued before it, and not to metrics.jsonl."""
        if self._thread is not None:
            self._queue.put(_Text(text))

    def _run(self) -> None:
        stream = self.stream or sys.stdout
        while True:
            batch = [self._queue.get()]
            while True:  # whatever else is waiting goes out with one flush
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = any(r is _STOP for r in batch)
            out: list[str] = []
            body: list[str] = []
            for item in batch:
                if isinstance(item, _Text):
                    out.append(item.text)
                elif item is not _STOP:
                    line = format_record(item)
                    out.append(line)
                    body.append(line[len(METRIC_PREFIX) :] + "\n")
            if out:
                stream.write("".join(line + "\n" for line in out))
                stream.flush()
                data = "".join(body)
                for f in self._files if data else ():
                    f.write(data)
                    f.flush()
            if stop:
                return

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(_STOP)
            self._thread.join()
            self._thread = None
        for f in self._files:
            f.close()
        self._files = []
