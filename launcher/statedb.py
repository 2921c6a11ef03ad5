"""The SQLite files the launcher keeps its state in (the local backend's state.db, the
run index): what every connection to them does first."""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from pathlib import Path
from typing import Literal

RETRY_SECONDS = 0.01

# sqlite3's own default is "", a plain BEGIN, which SQLite runs as BEGIN DEFERRED; the
# stdlib's type names DEFERRED, so that is the spelling here. None: autocommit.
IsolationLevel = Literal["DEFERRED", "EXCLUSIVE", "IMMEDIATE"] | None


def enable_wal(db: sqlite3.Connection, timeout: float = 30.0) -> None:
    """Put the database in WAL mode (readers never wait for the writer). On a new file the
    switch takes the database exclusively, and SQLite answers "database is locked" at once,
    without waiting in its busy handler, to a second process switching at the same moment:
    two commands starting on a fresh LAUNCHER_HOME (4 of 40 cold starts of two processes
    failed so). So it is tried again until `timeout`; a database already in WAL answers at
    once."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() >= deadline:
                raise
            time.sleep(RETRY_SECONDS)


PRIVATE = 0o600
"""The mode of the databases and their -wal and -shm files: state.db holds every spec's
env values (SQLite makes new files 0644, and copies the database's mode to the others)."""


def _keep_private(path: Path) -> None:
    """Create `path` 0600 when there is none yet, and take group and other bits off it and
    its -wal and -shm files (whatever mode an older launcher or a hand left them). A
    read-only home is left as it is (connect then reads it)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE))
    except OSError:
        pass  # there is one already, or none can be made here: connect says why
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            st = file.stat()
            if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & ~PRIVATE:
                os.chmod(file, stat.S_IMODE(st.st_mode) & PRIVATE)
        except OSError:
            pass


def _cannot_write_beside(path: Path, e: sqlite3.OperationalError) -> bool:
    """Whether `e` says the database exists but this process cannot write where it lies
    (a read-only home: SQLite cannot make its -shm and -wal files there)."""
    return (
        getattr(e, "sqlite_errorname", "").startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY"))
        and path.is_file()
        and not os.access(path.parent, os.W_OK)
    )


def _read_only(path: Path, timeout: float, isolation_level: IsolationLevel) -> sqlite3.Connection:
    """A connection that reads `path` in a directory this process cannot write: mode=ro
    reads a WAL database whose -shm file is there (a writer has it open); without one, none
    can be made, so no writer has the database open and none can start (it would make the
    -wal file beside it): read as immutable, the file as it stands. Writes fail with
    "attempt to write a readonly database"."""
    from urllib.parse import quote

    uri = f"file:{quote(str(path.absolute()))}?mode=ro"
    db = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=isolation_level)
    try:
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return db
    except sqlite3.OperationalError:
        db.close()
    return sqlite3.connect(uri + "&immutable=1", uri=True, timeout=timeout, isolation_level=isolation_level)


def connect(path: Path, *, timeout: float = 30.0, isolation_level: IsolationLevel = "DEFERRED") -> sqlite3.Connection:
    """A connection to `path` in WAL mode, its files 0600 (_keep_private); a connection
    that only reads where the home is read-only (_read_only).

    On a full disk, the first connection to open a WAL database cannot grow its -shm file
    (SQLite truncates it on open and maps it page by page: SQLITE_IOERR_SHMSIZE), so every
    command failed, `get runs` too, until space was freed. Such a connection is opened
    again in exclusive locking mode, where SQLite keeps the WAL index in its own memory
    and needs no -shm file: it reads everything, the WAL included, and holds the lock
    until it closes (our connections live for one call). Its writes fail as any write to
    a full disk does."""
    _keep_private(path)
    try:
        db = sqlite3.connect(path, timeout=timeout, isolation_level=isolation_level)
    except sqlite3.OperationalError as e:
        if not _cannot_write_beside(path, e):
            raise
        return _read_only(path, timeout, isolation_level)
    try:
        enable_wal(db, timeout)
    except sqlite3.OperationalError as e:
        db.close()
        if _cannot_write_beside(path, e):
            return _read_only(path, timeout, isolation_level)
        if not getattr(e, "sqlite_errorname", "").startswith("SQLITE_IOERR_SHM"):
            raise
        db = sqlite3.connect(path, timeout=timeout, isolation_level=isolation_level)
        try:
            db.execute("PRAGMA locking_mode=EXCLUSIVE")
            enable_wal(db, timeout)
        except BaseException:
            db.close()
            raise
    _keep_private(path)  # the -wal and -shm files it made
    return db
