"""The index of the runs this machine submitted ($LAUNCHER_HOME/index.db: name, profile,
backend, time), so `logs NAME` and `describe` find a run without asking every cluster, and
"the latest run" is one query; and the placements of runs placed across clusters."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launcher.config import DEFAULT_BACKEND, Profile, launcher_home
from launcher.errors import StateFileError

if TYPE_CHECKING:
    import sqlite3


class RunIndex:
    def __init__(self, home: Path | None = None):
        self.path = (home or launcher_home()) / "index.db"

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        """A connection in a transaction; a corrupt or unwritable index is an error that
        names the file and how to recover. SQLite is loaded here, at the first use of the
        index: a command that checks a spec (validate) opens a backend but no index."""
        import sqlite3

        from launcher.statedb import connect

        try:
            with closing(connect(self.path)) as db, db:
                db.execute(
                    "CREATE TABLE IF NOT EXISTS submissions (name TEXT PRIMARY KEY, profile TEXT NOT NULL,"
                    " backend TEXT NOT NULL, created_at TEXT NOT NULL)"
                )
                yield db
        except sqlite3.DatabaseError as e:
            raise StateFileError.from_sqlite(
                self.path, e, forgets="`launcher logs NAME` then asks every cluster profile for a run"
            ) from None

    def record(self, name: str, profile: Profile) -> None:
        with self._db() as db:
            db.execute(
                "INSERT OR REPLACE INTO submissions VALUES (?, ?, ?, ?)",
                (name, profile.name, profile.backend, datetime.now(UTC).isoformat()),
            )

    def forget(self, name: str) -> None:
        with self._db() as db:
            db.execute("DELETE FROM submissions WHERE name = ?", (name,))
            db.execute("CREATE TABLE IF NOT EXISTS placements (name TEXT PRIMARY KEY, state TEXT NOT NULL)")
            db.execute("DELETE FROM placements WHERE name = ?", (name,))

    def profile_of(self, name: str) -> str | None:
        with self._db() as db:
            row = db.execute("SELECT profile FROM submissions WHERE name = ?", (name,)).fetchone()
        return row[0] if row else None

    def latest(self) -> str | None:
        with self._db() as db:
            row = db.execute("SELECT name FROM submissions ORDER BY created_at DESC LIMIT 1").fetchone()
        return row[0] if row else None

    def names(self) -> list[str]:
        with self._db() as db:
            return [r[0] for r in db.execute("SELECT name FROM submissions ORDER BY created_at DESC")]

    # A run placed across clusters (launcher.sdk.placement) keeps its placement here: the
    # candidates, where it is now, and its moves, as one JSON document per run name.
    @contextmanager
    def _placements(self) -> Iterator[sqlite3.Connection]:
        with self._db() as db:
            db.execute("CREATE TABLE IF NOT EXISTS placements (name TEXT PRIMARY KEY, state TEXT NOT NULL)")
            yield db

    def placement(self, name: str) -> dict[str, Any] | None:
        with self._placements() as db:
            row = db.execute("SELECT state FROM placements WHERE name = ?", (name,)).fetchone()
        return json.loads(row[0]) if row else None

    def save_placement(self, name: str, state: dict[str, Any], *, expect_attempt: int | None = None) -> bool:
        """Write a run's placement. With `expect_attempt`, only where the stored one is still at
        that attempt (one transaction: of two processes moving the same run, one writes);
        whether it was written. The submission moves with it to the profile it names."""
        with self._placements() as db:
            if expect_attempt is not None:
                row = db.execute("SELECT state FROM placements WHERE name = ?", (name,)).fetchone()
                if row is None or json.loads(row[0]).get("attempt") != expect_attempt:
                    return False
            db.execute("INSERT OR REPLACE INTO placements VALUES (?, ?)", (name, json.dumps(state)))
            profile = state.get("profile")
            if profile:
                db.execute(
                    "UPDATE submissions SET profile = ?, backend = ? WHERE name = ?",
                    (profile, state.get("backend", DEFAULT_BACKEND), name),
                )
        return True

    def withdrawn(self) -> set[tuple[str, str]]:
        """(run name, profile) of every copy of a run that was withdrawn from a cluster when
        the run moved on: they keep their record there, and listings leave them out."""
        with self._placements() as db:
            rows = db.execute("SELECT name, state FROM placements").fetchall()
        return {
            (name, move["from"])
            for name, state in rows
            for move in json.loads(state).get("moves") or []
            if move.get("withdrawn")
        }
