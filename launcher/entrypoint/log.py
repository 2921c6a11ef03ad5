"""The entrypoint's output: its own log lines (prefixed, so a reader can tell them
from the command's output) and the masked output of the processes it runs.

Everything goes to stdout as UTF-8 bytes, whatever the locale, one flushed write
per line, and through the run's masker: a secret value never reaches the log,
even inside an error message.
"""

from __future__ import annotations

import sys
import threading

from launcher.secrets.mask import Masker

PREFIX = "[launcher]"

_lock = threading.Lock()
_maskers: list[Masker] = []


def set_masker(masker: Masker) -> None:
    """The run's masker (its secret values), replacing any set before."""
    _maskers[:] = [masker]


def add_masker(masker: Masker) -> None:
    """Mask more values from now on, e.g. a credential derived from a secret."""
    _maskers.append(masker)


def mask(text: str) -> str:
    for m in _maskers:
        text = m.mask(text)
    return text


def write(text: str) -> None:
    """Write `text` (one or more whole lines) to stdout, masked."""
    data = mask(text).encode("utf-8", errors="replace")
    out = getattr(sys.stdout, "buffer", None)
    with _lock:
        if out is None:  # stdout replaced by a text-only stream (tests, embedding)
            sys.stdout.write(data.decode("utf-8"))
            sys.stdout.flush()
        else:
            out.write(data)
            out.flush()


def log(message: str) -> None:
    write("".join(f"{PREFIX} {line}\n" for line in message.splitlines() or [""]))
