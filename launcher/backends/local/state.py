"""The local backend's state: one SQLite database in WAL mode under LAUNCHER_HOME.

Several processes use it at once (the CLI, one supervisor per run), so every
write is a short transaction and readers never block writers.
"""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from launcher.backends.base import Attempt, RankState, Run, RunStatus, StatusEvent, retry_due, utcnow
from launcher.backends.local.procs import alive, start_time
from launcher.errors import StateFileError
from launcher.spec.retry import RetryPolicy
from launcher.statedb import connect

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    name TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    created_at TEXT NOT NULL,
    started_at TEXT,
    ended_at TEXT,
    reason TEXT,
    exit_code INTEGER,
    spec TEXT NOT NULL,
    secrets TEXT NOT NULL,          -- names of the secrets the run uses (never values)
    workdir TEXT NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 1,
    supervisor_pid INTEGER,
    supervisor_started TEXT,        -- the pid's start time, so a reused pid is not mistaken for ours
    stop_requested INTEGER NOT NULL DEFAULT 0,
    deleter TEXT                    -- "pid started" of the process deleting the run
);
CREATE TABLE IF NOT EXISTS attempts (
    run TEXT NOT NULL, idx INTEGER NOT NULL, status TEXT NOT NULL,
    started_at TEXT, ended_at TEXT, reason TEXT,
    PRIMARY KEY (run, idx)
);
CREATE TABLE IF NOT EXISTS ranks (
    run TEXT NOT NULL, attempt INTEGER NOT NULL, rank INTEGER NOT NULL,
    status TEXT NOT NULL, pid INTEGER, pid_started TEXT, exit_code INTEGER, reason TEXT,
    PRIMARY KEY (run, attempt, rank)
);
CREATE TABLE IF NOT EXISTS events (
    run TEXT NOT NULL, attempt INTEGER NOT NULL, status TEXT NOT NULL, at TEXT NOT NULL, reason TEXT
);
CREATE INDEX IF NOT EXISTS events_run ON events (run);
CREATE INDEX IF NOT EXISTS runs_created ON runs (created_at DESC, name DESC);
CREATE INDEX IF NOT EXISTS runs_status_created ON runs (status, created_at DESC, name DESC);
"""
# The two runs indexes serve listings newest first (State.page), with or without a status
# filter, a page at a time: `get runs` reads the rows it shows, not the whole history.

PAGE_ROWS = 1000
"""Rows one State.page reads at most (a listing's first page is the size it asks for)."""


# runs.stop_requested: 0, a stop asked (1), or the run being deleted (2, also a stop).
STOP_REQUESTED, DELETING = 1, 2

_ACTIVE = tuple(s.value for s in RunStatus if not s.is_terminal)


def _end_ranks(db, name: str, attempt: int, status: RunStatus) -> None:
    """An ended attempt has no rank still running: any rank not yet final takes its status."""
    db.execute(
        f"UPDATE ranks SET status = ? WHERE run = ? AND attempt = ? AND status IN ({','.join('?' * len(_ACTIVE))})",
        (status.value, name, attempt, *_ACTIVE),
    )


def _ts(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _at(value: str) -> datetime:
    """A time from a NOT NULL column."""
    return datetime.fromisoformat(value)


def _add_column(db, table: str, column: str, kind: str) -> None:
    """A state.db written before `table.column` existed gets the column (once: a second
    process adding it at the same moment finds it there)."""
    if column in {c["name"] for c in db.execute(f"PRAGMA table_info({table})")}:
        return
    try:
        db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
    except sqlite3.OperationalError as e:
        if "duplicate column" not in str(e):
            raise


# Columns added since the first state.db: (table, column, type).
ADDED_COLUMNS = (
    ("runs", "deleter", "TEXT"),
    # How a failed attempt failed (launcher.pod.failures), and its last progress.
    ("attempts", "failure_class", "TEXT"),
    ("attempts", "evidence", "TEXT"),
    ("attempts", "last_step", "INTEGER"),
    ("attempts", "progress_age", "REAL"),
    ("attempts", "setup_seconds", "REAL"),  # before the command started (goodput's starting)
    ("attempts", "resumed_from", "TEXT"),  # the checkpoint a retried attempt resumed from
    ("attempts", "resumed_step", "INTEGER"),
    ("attempts", "stragglers", "TEXT"),  # JSON list of the lines naming its slow ranks
)


def _being_deleted(r: sqlite3.Row) -> bool:
    """The run is hidden while a live process deletes it. A delete that was interrupted (its
    process killed) shows the run again, so that deleting it by name finishes the job."""
    if r["stop_requested"] != DELETING:
        return False
    pid, _, started = (r["deleter"] or "").partition(" ")
    return pid.isdigit() and alive(int(pid), started or None)


class State:
    def __init__(self, home: Path):
        self.path = home / "state.db"
        with self._connect() as db:
            db.executescript(SCHEMA)
            for table, column, kind in ADDED_COLUMNS:
                _add_column(db, table, column, kind)

    @contextmanager
    def _connect(self):
        try:
            db = connect(self.path, isolation_level=None)
            db.row_factory = sqlite3.Row
            try:
                db.execute("PRAGMA busy_timeout=30000")
                yield db
            finally:
                db.close()
        except sqlite3.DatabaseError as e:
            raise StateFileError.from_sqlite(
                self.path,
                e,
                forgets="the local runs it recorded are then forgotten; their logs stay under "
                f"{self.path.parent / 'runs'}",
            ) from None

    @contextmanager
    def tx(self):
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:  # SQLite rolled back already after a full disk (SQLITE_FULL)
                    db.execute("ROLLBACK")
                raise

    # ------------------------------------------------------------ writes

    def insert_run(self, name: str, spec: dict[str, Any], secrets: list[str], workdir: str) -> None:
        now = utcnow().isoformat()
        with self.tx() as db:
            db.execute(
                "INSERT INTO runs (name, status, created_at, spec, secrets, workdir) VALUES (?, ?, ?, ?, ?, ?)",
                (name, RunStatus.PENDING.value, now, json.dumps(spec), json.dumps(secrets), workdir),
            )
            db.execute("INSERT INTO attempts (run, idx, status) VALUES (?, 1, ?)", (name, RunStatus.PENDING.value))
            db.execute("INSERT INTO events VALUES (?, 1, ?, ?, NULL)", (name, RunStatus.PENDING.value, now))

    def set_status(
        self,
        name: str,
        status: RunStatus,
        reason: str | None = None,
        *,
        exit_code: int | None = None,
        only_if_active: bool = True,
    ) -> bool:
        """Move the run (and its current attempt) to `status`. Terminal statuses are final:
        returns False, changing nothing, if the run already ended."""
        now = utcnow().isoformat()
        with self.tx() as db:
            row = db.execute("SELECT status, attempt, started_at FROM runs WHERE name = ?", (name,)).fetchone()
            if row is None:
                return False
            if only_if_active and RunStatus(row["status"]).is_terminal:
                return False
            attempt = row["attempt"]
            if row["status"] == status.value:
                return True
            fields: dict[str, str | int | None] = {"status": status.value, "reason": reason}
            if status is RunStatus.RUNNING and not row["started_at"]:
                fields["started_at"] = now
            if status.is_terminal:
                fields["ended_at"] = now
                fields["exit_code"] = exit_code
            sets = ", ".join(f"{k} = ?" for k in fields)
            db.execute(f"UPDATE runs SET {sets} WHERE name = ?", (*fields.values(), name))
            a_fields = {"status": status.value, "reason": reason}
            if status is RunStatus.RUNNING:
                a_fields["started_at"] = now
            if status.is_terminal:
                a_fields["ended_at"] = now
            sets = ", ".join(f"{k} = COALESCE(started_at, ?)" if k == "started_at" else f"{k} = ?" for k in a_fields)
            # An attempt already ended (a stop while a retry waits out its backoff) keeps its outcome.
            db.execute(
                f"UPDATE attempts SET {sets} WHERE run = ? AND idx = ? AND ended_at IS NULL",
                (*a_fields.values(), name, attempt),
            )
            if status.is_terminal:
                _end_ranks(db, name, attempt, status)
            db.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?)", (name, attempt, status.value, now, reason))
            return True

    def await_retry(self, name: str, reason: str | None, delay: float) -> None:
        """End the current attempt FAILED (`reason`) and leave the run PENDING until the next
        attempt starts, `delay` seconds from now (the retry's backoff)."""
        ended = utcnow()
        now, due = ended.isoformat(), ended + timedelta(seconds=delay)
        with self.tx() as db:
            attempt = db.execute("SELECT attempt FROM runs WHERE name = ?", (name,)).fetchone()["attempt"]
            db.execute(
                "UPDATE attempts SET status = ?, reason = ?, ended_at = ? WHERE run = ? AND idx = ?",
                (RunStatus.FAILED.value, reason, now, name, attempt),
            )
            _end_ranks(db, name, attempt, RunStatus.FAILED)
            db.execute(
                "INSERT INTO events VALUES (?, ?, ?, ?, ?)", (name, attempt, RunStatus.FAILED.value, now, reason)
            )
            waiting = f"attempt {attempt} failed ({reason}); {retry_due(due)}"
            db.execute(
                "UPDATE runs SET status = ?, reason = ? WHERE name = ?", (RunStatus.PENDING.value, waiting, name)
            )
            db.execute(
                "INSERT INTO events VALUES (?, ?, ?, ?, ?)", (name, attempt, RunStatus.PENDING.value, now, waiting)
            )

    def set_attempt_outcome(
        self,
        name: str,
        attempt: int,
        *,
        failure_class: str | None,
        evidence: str | None,
        last_step: int | None,
        progress_age: float | None,
        setup_seconds: float | None,
        resumed_from: str | None = None,
        resumed_step: int | None = None,
    ) -> None:
        """How attempt `attempt` ended, as its ranks' exit files tell: how it failed (None:
        it did not), the last progress its ranks reported, and its setup time."""
        with self.tx() as db:
            db.execute(
                "UPDATE attempts SET failure_class = ?, evidence = ?, last_step = ?, progress_age = ?,"
                " setup_seconds = ?, resumed_from = ?, resumed_step = ? WHERE run = ? AND idx = ?",
                (
                    failure_class,
                    evidence,
                    last_step,
                    progress_age,
                    setup_seconds,
                    resumed_from,
                    resumed_step,
                    name,
                    attempt,
                ),
            )

    def add_straggler(self, name: str, attempt: int, line: str) -> None:
        """Name a slow rank of attempt `attempt` (the line the rank's log has too)."""
        with self.tx() as db:
            row = db.execute("SELECT stragglers FROM attempts WHERE run = ? AND idx = ?", (name, attempt)).fetchone()
            lines = json.loads(row["stragglers"]) if row is not None and row["stragglers"] else []
            db.execute(
                "UPDATE attempts SET stragglers = ? WHERE run = ? AND idx = ?",
                (json.dumps([*lines, line]), name, attempt),
            )

    def new_attempt(self, name: str) -> int:
        now = utcnow().isoformat()
        with self.tx() as db:
            attempt = db.execute("SELECT attempt FROM runs WHERE name = ?", (name,)).fetchone()["attempt"] + 1
            db.execute(
                "UPDATE runs SET attempt = ?, status = ?, reason = NULL WHERE name = ?",
                (attempt, RunStatus.STARTING.value, name),
            )
            db.execute(
                "INSERT INTO attempts (run, idx, status) VALUES (?, ?, ?)", (name, attempt, RunStatus.STARTING.value)
            )
            db.execute(
                "INSERT INTO events VALUES (?, ?, ?, ?, ?)",
                (name, attempt, RunStatus.STARTING.value, now, f"retry: attempt {attempt}"),
            )
        return attempt

    def restart(self, name: str) -> int | None:
        """Begin attempt N+1 of a run that ended STOPPED or FAILED (`run -r`), PENDING until its
        new supervisor starts it; None, changing nothing, if the run is not such a run now.
        Until that supervisor records itself, this process stands in for it: a look at the run
        while this process lives waits, and one after it died ends the attempt."""
        now = utcnow().isoformat()
        me = os.getpid()
        with self.tx() as db:
            row = db.execute("SELECT status, attempt FROM runs WHERE name = ?", (name,)).fetchone()
            if row is None or row["status"] not in (RunStatus.STOPPED.value, RunStatus.FAILED.value):
                return None
            attempt = row["attempt"] + 1
            reason = f"restarted by the user: attempt {attempt}"
            db.execute(
                "UPDATE runs SET attempt = ?, status = ?, reason = ?, ended_at = NULL, exit_code = NULL,"
                " stop_requested = 0, supervisor_pid = ?, supervisor_started = ? WHERE name = ?",
                (attempt, RunStatus.PENDING.value, reason, me, start_time(me), name),
            )
            pending = RunStatus.PENDING.value
            db.execute("INSERT INTO attempts (run, idx, status) VALUES (?, ?, ?)", (name, attempt, pending))
            db.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?)", (name, attempt, pending, now, reason))
        return attempt

    def update_scheduling(self, name: str, changes: dict[str, Any]) -> bool:
        """Set scheduling fields of the run's spec (`update run`), which its supervisor reads
        again every second; False, changing nothing, if the run has ended."""
        with self.tx() as db:
            row = db.execute("SELECT status, spec FROM runs WHERE name = ?", (name,)).fetchone()
            if row is None or RunStatus(row["status"]).is_terminal:
                return False
            spec = json.loads(row["spec"])
            spec.setdefault("scheduling", {}).update(changes)
            db.execute("UPDATE runs SET spec = ? WHERE name = ?", (json.dumps(spec), name))
        return True

    def set_supervisor(self, name: str, pid: int, started: str | None) -> None:
        with self.tx() as db:
            db.execute(
                "UPDATE runs SET supervisor_pid = ?, supervisor_started = ? WHERE name = ?", (pid, started, name)
            )

    def set_rank(
        self,
        name: str,
        attempt: int,
        rank: int,
        status: RunStatus,
        *,
        pid: int | None = None,
        pid_started: str | None = None,
        exit_code: int | None = None,
        reason: str | None = None,
    ) -> None:
        with self.tx() as db:
            db.execute(
                "INSERT INTO ranks (run, attempt, rank, status, pid, pid_started, exit_code, reason)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run, attempt, rank) DO UPDATE SET"
                " status = excluded.status, pid = COALESCE(excluded.pid, pid),"
                " pid_started = COALESCE(excluded.pid_started, pid_started),"
                " exit_code = COALESCE(excluded.exit_code, exit_code), reason = COALESCE(excluded.reason, reason)",
                (name, attempt, rank, status.value, pid, pid_started, exit_code, reason),
            )

    def request_stop(self, name: str) -> None:
        with self.tx() as db:
            db.execute(
                "UPDATE runs SET stop_requested = ? WHERE name = ? AND stop_requested < ?",
                (STOP_REQUESTED, name, STOP_REQUESTED),
            )

    def mark_deleting(self, name: str) -> None:
        """This process deletes the run: it is stopped, and `load` does not find it while
        this process lives."""
        deleter = f"{os.getpid()} {start_time(os.getpid())}"
        with self.tx() as db:
            db.execute("UPDATE runs SET stop_requested = ?, deleter = ? WHERE name = ?", (DELETING, deleter, name))

    def delete_run(self, name: str) -> None:
        with self.tx() as db:
            for table, col in (("runs", "name"), ("attempts", "run"), ("ranks", "run"), ("events", "run")):
                db.execute(f"DELETE FROM {table} WHERE {col} = ?", (name,))

    # ------------------------------------------------------------ reads

    def row(self, name: str) -> sqlite3.Row | None:
        with self._connect() as db:
            return db.execute("SELECT * FROM runs WHERE name = ?", (name,)).fetchone()

    def names(self) -> list[str]:
        with self._connect() as db:
            return [r[0] for r in db.execute("SELECT name FROM runs ORDER BY created_at DESC")]

    def active_names(self) -> list[str]:
        """The runs whose recorded status is not final (through runs_status_created)."""
        marks = ",".join("?" * len(_ACTIVE))
        with self._connect() as db:
            return [r[0] for r in db.execute(f"SELECT name FROM runs WHERE status IN ({marks})", _ACTIVE)]

    def page(
        self,
        *,
        below: tuple[str, str] | None = None,
        statuses: frozenset[RunStatus] = frozenset(),
        ids: frozenset[str] = frozenset(),
        before: datetime | None = None,
        after: datetime | None = None,
        rows: int = PAGE_ROWS,
    ) -> list[sqlite3.Row]:
        """Up to `rows` rows (name, created_at, spec), newest first, with these statuses
        and names (none: any) created in (after, before), strictly older than the (created_at,
        name) key `below` (the last row of the page before): the created_at indexes answer,
        so a page costs its rows whatever the history holds. created_at is UTC ISO text,
        which sorts as the times do."""
        where, args = [], []
        if statuses:
            where.append(f"status IN ({','.join('?' * len(statuses))})")
            args += sorted(s.value for s in statuses)
        if ids:
            where.append(f"name IN ({','.join('?' * len(ids))})")
            args += sorted(ids)
        if before is not None:
            where.append("created_at < ?")
            args.append(before.astimezone(UTC).isoformat())
        if after is not None:
            where.append("created_at > ?")
            args.append(after.astimezone(UTC).isoformat())
        if below is not None:
            where.append("(created_at < ? OR (created_at = ? AND name < ?))")
            args += [below[0], below[0], below[1]]
        sql = "SELECT name, created_at, spec FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, name DESC LIMIT ?"
        with self._connect() as db:
            return db.execute(sql, (*args, rows)).fetchall()

    def active_ranks(self, name: str) -> list[sqlite3.Row]:
        with self._connect() as db:
            return db.execute("SELECT * FROM ranks WHERE run = ? AND pid IS NOT NULL", (name,)).fetchall()

    def load(self, name: str) -> Run | None:
        with self._connect() as db:
            r = db.execute("SELECT * FROM runs WHERE name = ?", (name,)).fetchone()
            if r is None or _being_deleted(r):
                return None
            attempts = db.execute("SELECT * FROM attempts WHERE run = ? ORDER BY idx", (name,)).fetchall()
            ranks = db.execute("SELECT * FROM ranks WHERE run = ? ORDER BY attempt, rank", (name,)).fetchall()
            events = db.execute("SELECT * FROM events WHERE run = ? ORDER BY rowid", (name,)).fetchall()
        by_attempt: dict[int, list[RankState]] = {}
        for k in ranks:
            by_attempt.setdefault(k["attempt"], []).append(
                RankState(
                    rank=k["rank"],
                    status=RunStatus(k["status"]),
                    exit_code=k["exit_code"],
                    reason=k["reason"],
                    node="localhost",
                )
            )
        status = RunStatus(r["status"])
        spec = json.loads(r["spec"])
        retry_at: datetime | None = None
        if (
            status is RunStatus.PENDING
            and attempts
            and attempts[-1]["status"] == RunStatus.FAILED.value
            and attempts[-1]["ended_at"]
        ):
            # Waiting out the backoff (await_retry): the supervisor starts the next attempt then.
            retry_at = _at(attempts[-1]["ended_at"]) + timedelta(
                seconds=RetryPolicy.from_spec(spec).delay(attempts[-1]["idx"])
            )
        return Run(
            name=r["name"],
            backend="local",
            status=status,
            created_at=_at(r["created_at"]),
            spec=spec,
            retry_at=retry_at,
            cluster="local",
            started_at=_ts(r["started_at"]),
            ended_at=_ts(r["ended_at"]),
            reason=r["reason"],
            exit_code=r["exit_code"],
            attempts=[
                Attempt(
                    index=a["idx"],
                    status=RunStatus(a["status"]),
                    started_at=_ts(a["started_at"]),
                    ended_at=_ts(a["ended_at"]),
                    reason=a["reason"],
                    ranks=by_attempt.get(a["idx"], []),
                    failure_class=a["failure_class"],
                    evidence=a["evidence"],
                    last_step=a["last_step"],
                    progress_age=a["progress_age"],
                    setup_seconds=a["setup_seconds"],
                    resumed_from=a["resumed_from"],
                    resumed_step=a["resumed_step"],
                    stragglers=json.loads(a["stragglers"]) if a["stragglers"] else [],
                )
                for a in attempts
            ],
            events=[
                StatusEvent(status=RunStatus(e["status"]), at=_at(e["at"]), attempt=e["attempt"], reason=e["reason"])
                for e in events
            ],
        )
