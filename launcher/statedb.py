"""The SQLite files the launcher keeps its state in (the local backend's state.db, the
run index): what every connection to them does first."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

RETRY_SECONDS = 0.01


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


def connect(path: Path, *, timeout: float = 30.0, isolation_level: str | None = "") -> sqlite3.Connection:
    """A connection to `path` in WAL mode.

    On a full disk, the first connection to open a WAL database cannot grow its -shm file
    (SQLite truncates it on open and maps it page by page: SQLITE_IOERR_SHMSIZE), so every
    command failed, `get runs` too, until space was freed. Such a connection is opened
    again in exclusive locking mode, where SQLite keeps the WAL index in its own memory
    and needs no -shm file: it reads everything, the WAL included, and holds the lock
    until it closes (our connections live for one call). Its writes fail as any write to
    a full disk does."""
    db = sqlite3.connect(path, timeout=timeout, isolation_level=isolation_level)
    try:
        enable_wal(db, timeout)
    except sqlite3.OperationalError as e:
        db.close()
        if not getattr(e, "sqlite_errorname", "").startswith("SQLITE_IOERR_SHM"):
            raise
        db = sqlite3.connect(path, timeout=timeout, isolation_level=isolation_level)
        try:
            db.execute("PRAGMA locking_mode=EXCLUSIVE")
            enable_wal(db, timeout)
        except BaseException:
            db.close()
            raise
    return db
