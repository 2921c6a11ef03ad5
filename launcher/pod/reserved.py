"""A small JSON document that must be written when the disk is full: its space is taken
when it is opened, and the document is written over it in place at the end, so a disk
that fills up meanwhile cannot keep it from being written. A rank's exit file (written by
the entrypoint) and a local run's outcome (written by its supervisor when the state
database cannot be) are such files."""

from __future__ import annotations

import contextlib
import json
import os

SIZE = 4096


class ReservedFile:
    def __init__(self, path: str | None):
        self.path = path
        self.fd: int | None = None
        if not path:
            return
        try:
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
            os.write(self.fd, b" " * SIZE)
        except OSError:
            pass  # written the plain way at the end, if the disk allows

    def write(self, document: dict) -> OSError | None:
        """Write `document` (at most SIZE bytes of JSON: longer is cut); the error, if it
        could not be written."""
        if not self.path:
            return None
        data = json.dumps(document).encode()[:SIZE]
        try:
            if self.fd is None:
                self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            os.pwrite(self.fd, data.ljust(SIZE), 0)  # over the reserved space: no new blocks
            os.ftruncate(self.fd, len(data))
            os.close(self.fd)
            self.fd = None
        except OSError as e:
            return e
        return None

    def discard(self) -> None:
        """Not needed after all (the outcome went elsewhere): the file and its space go."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.path:
            with contextlib.suppress(OSError):
                os.unlink(self.path)


def read_reserved(path) -> dict:
    """The document, or {} while there is none (only the reserved space, or no file)."""
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
