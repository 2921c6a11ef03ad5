"""The SQLite files the launcher keeps its state in (the local backend's state.db, the
run index): what every connection to them does first."""

from __future__ import annotations

import sqlite3
import time

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
