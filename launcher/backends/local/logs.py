"""Reading a local run's rank logs (LAUNCHER_HOME/runs/<name>/.../rank-N.log), masked:
whole, in large chunks; or line by line, from the end (tail) and on as the ranks write
(follow) until the attempt is over. The Kubernetes backend reads pod logs in
kubernetes/logs.py and follows a run in kubernetes/follow.py."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator

from launcher.backends.base import LogLine
from launcher.backends.local.layout import RunLayout
from launcher.secrets.mask import Masker, MaskingStream

LOG_CHUNK = 1 << 20


def rank_chunks(
    layout: RunLayout, attempt: int, ranks: list[int], masker: Masker, *, prefix_ranks: bool = False
) -> Iterator[bytes]:
    """The whole log of each rank, in turn, as masked bytes in large chunks: no per-line
    work unless each line gets a "[rank N] " prefix. Every rank's part ends with a newline."""
    for r in ranks:
        path = layout.log_file(attempt, r)
        try:
            f = open(path, "rb")
        except FileNotFoundError:
            continue
        stream = MaskingStream(masker)
        prefix = f"[rank {r}] ".encode() if prefix_ranks else b""
        at_start, last = True, b"\n"
        with f:
            while True:
                chunk = f.read(LOG_CHUNK)
                data = stream.feed(chunk) if chunk else stream.flush()
                if data:
                    last = data[-1:]
                    if prefix:
                        data = (prefix if at_start else b"") + data.replace(b"\n", b"\n" + prefix)
                        if last == b"\n":
                            data = data[: -len(prefix)]
                        at_start = last == b"\n"
                    yield data
                if not chunk:
                    break
        if last != b"\n":
            yield b"\n"


def rank_lines(
    layout: RunLayout,
    attempt: int,
    ranks: list[int],
    masker: Masker,
    *,
    tail: int | None,
    follow: bool,
    attempt_over: Callable[[], bool],
    cancel: threading.Event | None = None,
) -> Iterator[LogLine]:
    """Lines from each rank's file; with follow, keep reading until `attempt_over()` and
    every file is drained, or until `cancel` is set."""
    offsets: dict[int, int] = {r: 0 for r in ranks}
    pending: dict[int, bytes] = {r: b"" for r in ranks}
    if tail is not None:
        for r in ranks:
            path = layout.log_file(attempt, r)
            if path.exists():
                with open(path, "rb") as f:
                    last = deque(f, maxlen=tail)
                    offsets[r] = f.tell()
                for raw in last:
                    if raw.endswith(b"\n"):
                        yield LogLine(
                            rank=r, text=masker.mask(raw.decode("utf-8", "replace").rstrip("\n")), attempt=attempt
                        )
                    else:
                        pending[r] = raw
    while True:
        progressed = False
        for r in ranks:
            path = layout.log_file(attempt, r)
            if not path.exists():
                continue
            with open(path, "rb") as f:
                f.seek(offsets[r])
                chunk = f.read(LOG_CHUNK)
                offsets[r] = f.tell()
            if not chunk:
                continue
            progressed = True
            data = pending[r] + chunk
            lines = data.split(b"\n")
            pending[r] = lines.pop()
            for raw in lines:
                yield LogLine(rank=r, text=masker.mask(raw.decode("utf-8", "replace")), attempt=attempt)
        if cancel is not None and cancel.is_set():
            return
        if progressed:
            continue
        if not follow:
            break
        if attempt_over():
            # One more pass to drain what was written before the end.
            follow = False
            continue
        time.sleep(0.1)
    for r in ranks:
        if pending[r]:
            yield LogLine(rank=r, text=masker.mask(pending[r].decode("utf-8", "replace")), attempt=attempt)
