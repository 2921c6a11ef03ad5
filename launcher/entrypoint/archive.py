"""The rank's log archive: every byte the entrypoint writes to its log (already masked)
is also appended, in chunks, to the run's archive (LAUNCHER_LOG_ARCHIVE), which outlives
the pod. The layout is launcher.pod.logarchive's.

The writer knows storage only through `put(rel, data)`: one new object per chunk, and
`list(rel)` once, to number on after an earlier container's chunks. Both are
archive_stores', with the standard library alone, so every entrypoint mode (the zipapp's
python3 -I -S too) archives to the same stores.

Appending never blocks and never fails the run: a thread writes the chunks, every
CHUNK_SECONDS or CHUNK_BYTES; a chunk that cannot be written is tried again with the next
one, and the first error is said once in the log (which still has every line). What
waits longer than MAX_PENDING_BYTES is dropped, and counted.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Mapping

from launcher.entrypoint.archive_stores import ArchiveStoreError, open_pod_store
from launcher.pod.logarchive import CHUNK_BYTES, CHUNK_SECONDS, LOG_ARCHIVE, chunk_name, parse_chunk, rank_dir

Put = Callable[[str, bytes], None]
MAX_PENDING_BYTES = 64 << 20
CLOSE_SECONDS = 20.0
"""How long the last chunks may take at the end (within the pod's grace period)."""


class ChunkedArchive:
    """Appends bytes; a thread writes them as chunks under `prefix` (attempt-N/rank-R)."""

    def __init__(
        self,
        put: Put,
        prefix: str,
        *,
        first_seq: int = 0,
        chunk_bytes: int = CHUNK_BYTES,
        chunk_seconds: float = CHUNK_SECONDS,
        on_error: Callable[[str], None] = lambda _: None,
        clock: Callable[[], float] = time.time,
    ):
        self._put = put
        self._prefix = prefix.strip("/")
        self._seq = first_seq
        self._chunk_bytes = chunk_bytes
        self._chunk_seconds = chunk_seconds
        self._on_error = on_error
        self._clock = clock
        self._cond = threading.Condition()
        self._buf = bytearray()
        self._buf_t0: float | None = None
        self._closing = False
        self._reported = False
        self.dropped = 0
        self.written_bytes = 0
        self._thread = threading.Thread(target=self._run, name="log-archive", daemon=True)
        self._thread.start()

    def append(self, data: bytes) -> None:
        if not data:
            return
        with self._cond:
            if self._closing:
                return
            if len(self._buf) + len(data) > MAX_PENDING_BYTES:
                self.dropped += len(data)
                return
            if not self._buf:
                self._buf_t0 = self._clock()
            self._buf += data
            if len(self._buf) >= self._chunk_bytes:
                self._cond.notify()

    def _take(self, partial_too: bool) -> tuple[bytes, float] | None:
        """The next chunk: at most chunk_bytes of whole lines; a line longer than a chunk
        goes in pieces, and an unfinished last line only with `partial_too`."""
        if not self._buf:
            return None
        if len(self._buf) >= self._chunk_bytes:
            end = self._buf.rfind(b"\n", 0, self._chunk_bytes) + 1 or self._chunk_bytes
        else:
            end = self._buf.rfind(b"\n") + 1 or (len(self._buf) if partial_too else 0)
        if not end:
            return None
        data, t0 = bytes(self._buf[:end]), self._buf_t0 or self._clock()
        del self._buf[:end]
        self._buf_t0 = self._clock() if self._buf else None
        return data, t0

    def _due(self) -> bool:
        if not self._buf:
            return False
        age = self._clock() - (self._buf_t0 or self._clock())
        return self._closing or len(self._buf) >= self._chunk_bytes or age >= self._chunk_seconds

    def _next(self) -> tuple[tuple[bytes, float] | None, bool]:
        """Wait for the next chunk; (None, True) when closed and all is written."""
        with self._cond:
            while True:
                if self._due():
                    # An unfinished line goes alone at the end, or once it has waited two periods.
                    stale = self._clock() - (self._buf_t0 or self._clock()) >= 2 * self._chunk_seconds
                    chunk = self._take(partial_too=self._closing or stale)
                    if chunk is not None:
                        return chunk, self._closing
                elif self._closing:
                    return None, True
                self._cond.wait(self._chunk_seconds / 4)

    def _run(self) -> None:
        pending: tuple[bytes, float] | None = None
        while True:
            if pending is None:
                pending, closing = self._next()
                if pending is None:
                    return
            else:
                closing = self._closing
            data, t0 = pending
            try:
                self._put(f"{self._prefix}/{chunk_name(self._seq, int(t0 * 1000))}", data)
            except Exception as e:  # noqa: BLE001 - any storage failure: keep the chunk, try again
                if not self._reported:
                    self._reported = True
                    self._on_error(f"log archive: cannot write a chunk: {e}; trying again, the pod log has every line")
                with self._cond:
                    # At the end, sooner: close() waits only so long for the last chunks.
                    self._cond.wait(min(self._chunk_seconds, 0.5) if closing else self._chunk_seconds)
                continue
            self._seq += 1
            self.written_bytes += len(data)
            pending = None

    def close(self, timeout: float = CLOSE_SECONDS) -> bool:
        """Write what is left; False if that did not finish within `timeout`."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout)
        return not self._thread.is_alive()


def open_archive(
    env: Mapping[str, str], attempt: int, rank: int, on_error: Callable[[str], None]
) -> ChunkedArchive | None:
    """The archive the backend asked for (LAUNCHER_LOG_ARCHIVE), through the pod's own
    stores (archive_stores: the standard library alone, in every entrypoint mode) with the
    credentials in `env` (the run's secrets); None when there is none. Raises
    ArchiveStoreError for a URL no pod can write or missing credentials. Chunks of an
    earlier container of the same rank and attempt are kept: numbering goes on after them."""
    url = env.get(LOG_ARCHIVE)
    if not url:
        return None
    store = open_pod_store(url, env)
    prefix = rank_dir(attempt, rank)
    try:
        taken = [parse_chunk(name) for name in store.list(prefix)]
        first = max((c[0] + 1 for c in taken if c), default=0)
    except ArchiveStoreError as e:  # a store that cannot list may still take writes
        on_error(f"log archive: cannot list {store.url}/{prefix}: {e}")
        first = 0
    return ChunkedArchive(store.put, prefix, first_seq=first, on_error=on_error)
