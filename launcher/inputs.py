"""Reading a file the user names (a run spec, a config, a secret's --from file).

Only regular files, and never more than a cap: `-f /dev/zero` must not grow
without end, and a FIFO must not hang the CLI. The file is opened without
blocking and checked with fstat on the open descriptor, so what is checked is
what is read.
"""

from __future__ import annotations

import os
import stat

from launcher.errors import os_error_words


class InputFileError(Exception):
    """Why a named file cannot be read; the message does not repeat the path."""


_KINDS = {
    stat.S_ISFIFO: "a FIFO (named pipe)",
    stat.S_ISCHR: "a character device",
    stat.S_ISBLK: "a block device",
    stat.S_ISSOCK: "a socket",
    stat.S_ISDIR: "a directory",
}


def _kind(mode: int) -> str | None:
    for test, name in _KINDS.items():
        if test(mode):
            return name
    return None


def read_input_file(path: str | os.PathLike, *, what: str, max_bytes: int) -> bytes:
    """The bytes of the regular file `path`, at most `max_bytes` of them; raises
    InputFileError saying why not (missing, not a regular file, too large)."""
    try:
        before = os.stat(path)
    except FileNotFoundError:
        raise InputFileError("no such file") from None
    except OSError as e:
        raise InputFileError(f"cannot read: {os_error_words(e)}") from None
    kind = _kind(before.st_mode)
    if kind:
        raise InputFileError(f"is {kind}, not {what}; give the path of a regular file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise InputFileError(f"cannot read: {os_error_words(e)}") from None
    try:
        st = os.fstat(fd)
        kind = _kind(st.st_mode)
        if kind or not stat.S_ISREG(st.st_mode):
            raise InputFileError(f"is {kind or 'not a regular file'}, not {what}; give the path of a regular file")
        if st.st_size > max_bytes:
            raise InputFileError(f"is {_size(st.st_size)}, larger than {what} may be ({_size(max_bytes)})")
        chunks = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:  # it grew while we read
                raise InputFileError(f"is larger than {what} may be ({_size(max_bytes)})")
        return b"".join(chunks)
    except OSError as e:
        raise InputFileError(f"cannot read: {os_error_words(e)}") from None
    finally:
        os.close(fd)


def _size(n: int) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):.0f} MiB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.0f} KiB"
    return f"{n} bytes"
