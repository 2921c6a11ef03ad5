"""The entrypoint's output: its own log lines (prefixed, so a reader can tell them
from the command's output) and the masked output of the processes it runs.

Everything goes to stdout (fd 1: the rank's log file, or the pod's log) as bytes,
through the run's masker: a secret value never reaches the log, even inside an
error message. The command's output arrives in chunks (`write_chunk`), masked
by a stream that holds back a possible start of a value until the next chunk
shows whether it is one.

Where the run has a log archive (launcher.entrypoint.archive), every byte written here
also goes to it, as written.

A write that fails (a full disk, a closed pipe) never stops the pipeline: the
output is dropped, counted, and the first error is kept (`write_error`) so the
entrypoint can end the run with the reason. Writing is retried on the next
output, and a line then says how much was lost.
"""

from __future__ import annotations

import os
import sys
import threading

from launcher.secrets.mask import Masker

PREFIX = "[launcher]"

_lock = threading.RLock()
_masker = Masker([])
_at_line_start = True
_error: OSError | None = None
_lost = 0
_gap = 0  # bytes lost since the last write that succeeded
_archive = None  # where the log is archived as well: anything with append(bytes)


def set_archive(archive) -> None:
    """Also append everything written from now on to `archive` (None: stop)."""
    global _archive
    _archive = archive


def set_masker(masker: Masker) -> None:
    """The run's masker (its secret values), replacing any set before."""
    global _masker
    _masker = masker


def add_masker(masker: Masker) -> None:
    """Mask more values from now on, e.g. a credential derived from a secret."""
    global _masker
    _masker = _masker + masker


def masker() -> Masker:
    return _masker


def mask(text: str) -> str:
    return _masker.mask(text)


def write_error() -> tuple[OSError, int] | None:
    """The first error writing the log, and how many bytes were lost in all."""
    return (_error, _lost) if _error is not None else None


def _fd() -> int | None:
    try:
        return sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return None  # stdout replaced by a text-only stream (tests, embedding)


def _emit(data: bytes) -> None:
    global _at_line_start, _error, _lost, _gap
    if not data:
        return
    if _archive is not None:
        _archive.append(data)
    fd = _fd()
    if fd is None:
        sys.stdout.write(data.decode("utf-8", errors="replace"))
        sys.stdout.flush()
        _at_line_start = data.endswith(b"\n")
        return
    if _gap:
        assert _error is not None  # a gap is counted only after _write_all kept its error
        note = f"{PREFIX} error: {_gap} bytes of output were lost: {_error.strerror or _error}\n".encode()
        if not _at_line_start:
            note = b"\n" + note
        if not _write_all(fd, note):
            _lost += len(data)
            _gap += len(data)
            return
        _gap = 0
        _at_line_start = True
    if _write_all(fd, data):
        _at_line_start = data.endswith(b"\n")
    else:
        _lost += len(data)
        _gap += len(data)


def _write_all(fd: int, data: bytes) -> bool:
    global _error
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except InterruptedError:
            continue
        except OSError as e:
            if _error is None:
                _error = e
            return False
        view = view[n:]
    return True


def write_chunk(data: bytes) -> None:
    """Write bytes of a command's output that are already masked."""
    with _lock:
        _emit(data)


def write(text: str) -> None:
    """Write `text` (one or more whole lines) to stdout, masked."""
    with _lock:
        _emit(_masker.mask(text).encode("utf-8", errors="replace"))


def log(message: str) -> None:
    text = "".join(f"{PREFIX} {line}\n" for line in message.splitlines() or [""])
    with _lock:
        # Our own line never continues a command's unfinished line.
        _emit(_masker.mask(text if _at_line_start else "\n" + text).encode("utf-8", errors="replace"))


class MaskedStderr:
    """sys.stderr for the entrypoint itself: whatever Python prints there (a warning,
    a traceback) goes through the masker into the log like everything else."""

    encoding = "utf-8"
    errors = "replace"

    def write(self, text: str) -> int:
        write(text)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False
