"""The launcher home's small state files (secrets.json, config.yaml): read, and changed
under one lock, so that two commands at once never lose each other's change.

A change holds an exclusive lock on a sidecar `<file>.lock` for its whole
read-modify-write, writes the new text to a temporary file in the same directory, fsyncs
it and renames it over the file. A reader takes no lock: the rename is atomic, so it sees
the old text or the new, never half of one, and a crash leaves one of the two. The lock
is filelock's FileLock (an flock on Unix, which the kernel drops when its process dies),
not a hand-written flock loop: it waits with a timeout and retries an interrupted call.
The sidecar is locked, not the file itself, because the rename gives the file a new
inode: a lock held on the old one would not stop a writer that opened the new one. (The
SQLite files, state.db and index.db, lock themselves.)
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from secrets import token_hex

from launcher.errors import StateFileError

LOCK_WAIT_S = 30.0
"""How long a change waits for another process's lock; a change holds it for milliseconds,
so a lock held this long belongs to a process that is stuck (stopped with ^Z, say)."""
LOCK_POLL_S = 0.01
"""How often a waiting change tries the lock again: a change holds it for milliseconds."""


def keep_private(path: Path, mode: int) -> None:
    """Give `path` (the launcher home, 0700) `mode` when it has any bit more and this user
    owns it: a home made by hand or by an older launcher with 0755 let every local user read
    the runs' specs and logs. A read-only home (EROFS) or another user's is left as it is."""
    try:
        st = path.stat()
        if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & ~mode:
            os.chmod(path, stat.S_IMODE(st.st_mode) & mode)
    except OSError:
        pass


def read(path: Path) -> bytes | None:
    """The file's bytes, or None when there is none yet."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise StateFileError(
            f"{path} is a directory, not a file", hint=f"move it away and run again (mv {path} {path}.corrupt)"
        ) from None
    except OSError as e:
        raise StateFileError(f"{path}: cannot read it ({e.strerror or e})", hint="check its permissions") from None


def update(path: Path, change: Callable[[bytes | None], bytes | None], *, mode: int | None = None) -> None:
    """Replace the file's bytes with `change(its bytes, or None when there is none yet)`,
    with no other update() of the same file in between; `change` returning None leaves it
    as it is, and an exception from it leaves it as it is too. `mode`: the file's mode
    (secrets.json is 0600 whatever it was); None keeps an existing file's, and gives a new
    one 0666 less the umask, as open() would."""
    from filelock import FileLock, Timeout  # only a change needs it, not every command that reads

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _cannot_write(path, e) from None
    lock = FileLock(path.with_name(path.name + ".lock"), mode=0o600)
    try:
        lock.acquire(timeout=LOCK_WAIT_S, poll_interval=LOCK_POLL_S)
    except Timeout:
        raise StateFileError(
            f"{path}: another launcher process has held its lock ({path.name}.lock) for {LOCK_WAIT_S:.0f} s",
            hint="wait for it to finish (or stop it) and run again",
        ) from None
    except OSError as e:
        raise _cannot_write(path, e) from None
    try:
        new = change(read(path))
        if new is not None:
            _replace(path, new, mode)
    finally:
        lock.release()


def _replace(path: Path, data: bytes, mode: int | None) -> None:
    if mode is None:
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except FileNotFoundError:
            pass

    tmp = path.with_name(f".{path.name}.{token_hex(4)}.tmp")
    try:
        # Created with its final mode (0600 for secrets.json: never a readable moment); the
        # default 0666 goes through the umask as a plain open() would.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666 if mode is None else mode)
        try:
            if mode is not None:
                os.fchmod(fd, mode)  # the umask may have taken bits the file had
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise _cannot_write(path, e) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:  # the rename itself, on disk
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass  # some filesystems cannot fsync a directory; the file itself is on disk
    finally:
        os.close(dir_fd)


def _cannot_write(path: Path, e: OSError) -> StateFileError:
    return StateFileError(
        f"{path}: cannot write it ({e.strerror or e})",
        hint=f"check that {path.parent} is writable and its disk has space",
    )
