"""From a profile to its backend and secret store; from a run name to where it runs.

Every submission from this machine is recorded in a small index
($LAUNCHER_HOME/index.db: name, profile, backend, time), so `logs NAME` and
`describe` find a run without asking every cluster, and "the latest run" is one
query.
"""

from __future__ import annotations

import importlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from launcher.backends.base import Backend, Run
from launcher.config import Config, Profile, launcher_home, load_config
from launcher.errors import ClusterUnreachable, InputError, LauncherError, NotFoundError, RunNotFound, StateFileError

if TYPE_CHECKING:
    import sqlite3

    from launcher.secrets.store import SecretStore

T = TypeVar("T")


@dataclass(frozen=True)
class BackendKind:
    """Where one backend's class lives, imported only when a profile of it is opened (so
    `launcher --help` and a look at an unreachable cluster stay light), and the cheap
    check, from the raw profile settings, of whether its service can be reached at all."""

    backend: str
    """module:Class of the Backend."""
    reachable: str | None = None
    """module:function(profile name, raw settings) that raises a LauncherError naming the
    profile when its service cannot be reached (see kubernetes/reach.py); None: always."""
    listing: tuple[str, ...] = ()
    """The modules a look across profiles that lists runs (ask_each: a listing, one run's
    record) imports on its way; they are imported before its requests, one profile at a
    time (see load_for_looks)."""
    beyond_listing: tuple[str, ...] = ()
    """What the other looks (GPU and queue usage, a spec's check, free GPUs) import
    besides; a listing does without them (the local backend's are pydantic models)."""


# The one table of backends: a profile's `backend` names a row. What each can do is its
# class's `capabilities`.
BACKENDS: dict[str, BackendKind] = {
    "local": BackendKind("launcher.backends.local.backend:LocalBackend",
                         listing=("launcher.backends.local.state",),
                         beyond_listing=("launcher.backends.kubernetes.profiles", "launcher.rank_exec",
                                         "resource")),
    "kubernetes": BackendKind("launcher.backends.kubernetes.backend:KubernetesBackend",
                              reachable="launcher.backends.kubernetes.reach:check_reachable",
                              listing=("launcher.backends.kubernetes.kubeapi", "launcher.backends.kubernetes.observe",
                                       "launcher.backends.kubernetes.reconcile"),
                              beyond_listing=("launcher.backends.kubernetes.usage",
                                              "launcher.backends.kubernetes.kueue",
                                              "launcher.backends.kubernetes.quota", "launcher.rank_exec")),
}


def _attribute(where: str) -> Any:
    module, _, attribute = where.partition(":")
    return getattr(importlib.import_module(module), attribute)


def _kind(profile: Profile) -> BackendKind:
    kind = BACKENDS.get(profile.backend)
    if kind is None:
        raise InputError(f"unknown backend {profile.backend!r} in profile {profile.name!r}")
    return kind


def backend_class(name: str) -> type[Backend]:
    """The class of the backend named `name` (imported now)."""
    kind = BACKENDS.get(name)
    if kind is None:
        raise InputError(f"unknown backend {name!r} (known: {', '.join(BACKENDS)})")
    return _attribute(kind.backend)


def open_backend(profile: Profile) -> Backend:
    """The profile's backend, its settings parsed once; it contacts nothing yet."""
    return _attribute(_kind(profile).backend).open(profile, launcher_home())


# Python 3.11 does not import safely in parallel: two threads importing overlapping modules
# (the kubernetes client's and the local backend's both reach logging) can trip its import
# deadlock detector, which hands one of them a module still half run ("partially initialized
# module 'logging' has no attribute 'getLogger'": one `get runs` in a few hundred, in CI).
# So the threads of a look take turns to import (load_for_looks); their requests overlap.
# Threads of this process that import on their own (a dashboard's) are not covered.
_IMPORTING = threading.Lock()


def load_for_looks(profile: Profile, *, listing_only: bool = False) -> None:
    """Import the profile's backend and the modules its part of a look imports on its way
    (BackendKind.listing, and .beyond_listing unless `listing_only`); at once where they
    are imported already. ask_each does it under _IMPORTING. tests/cli/test_look_imports.py
    checks that a look, once these are loaded, imports nothing more."""
    kind = _kind(profile)
    for where in (kind.backend, *kind.listing, *(() if listing_only else kind.beyond_listing)):
        importlib.import_module(where.partition(":")[0])


def check_reachable(profile: Profile) -> None:
    """Raise a LauncherError naming the profile when its service cannot be reached at all;
    cheap, and done before the backend is opened (see kubernetes/reach.py). May block for
    a connect timeout (half a second)."""
    check = _reach_check(profile)
    if check is not None:
        check(profile.name, profile.settings)


def _reach_check(profile: Profile) -> Callable[[str, dict], None] | None:
    """The profile's backend's reach check (BackendKind.reachable), imported; None: it has none."""
    reachable = _kind(profile).reachable
    return _attribute(reachable) if reachable is not None else None


def open_secret_store(profile: Profile) -> SecretStore:
    """Where runs of this profile find their secrets."""
    return open_backend(profile).secret_store()


def resolve_profile(cluster: str | None = None, backend: str | None = None, *, config: Config | None = None) -> Profile:
    """--cluster names a profile; --backend picks the first profile of that backend
    (the current one if it matches). `config`: the one the command already read."""
    config = config or load_config()
    if cluster:
        profile = config.profile(cluster)
        if backend and profile.backend != backend:
            raise InputError(f"cluster {cluster!r} uses the {profile.backend} backend, not {backend}")
        return profile
    current = config.profile()
    if backend is None or current.backend == backend:
        return current
    for p in config.profiles():
        if p.backend == backend:
            return p
    raise InputError(f"no cluster profile uses the {backend} backend", hint="add one with `launcher cluster add`")


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
                self.path, e, forgets="`launcher logs NAME` then asks every cluster profile for a run") from None

    def record(self, name: str, profile: Profile) -> None:
        with self._db() as db:
            db.execute("INSERT OR REPLACE INTO submissions VALUES (?, ?, ?, ?)",
                       (name, profile.name, profile.backend, datetime.now(timezone.utc).isoformat()))

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
                db.execute("UPDATE submissions SET profile = ?, backend = ? WHERE name = ?",
                           (profile, state.get("backend", "kubernetes"), name))
        return True

    def withdrawn(self) -> set[tuple[str, str]]:
        """(run name, profile) of every copy of a run that was withdrawn from a cluster when
        the run moved on: they keep their record there, and listings leave them out."""
        with self._placements() as db:
            rows = db.execute("SELECT name, state FROM placements").fetchall()
        return {(name, move["from"]) for name, state in rows for move in json.loads(state).get("moves") or []
                if move.get("withdrawn")}


def find_run(name: str | None) -> tuple[Backend, Run]:
    """The backend holding run `name` and its record; None means the latest run. A run
    this machine did not submit is looked for in every profile at once."""
    index = RunIndex()
    if name is None:
        name = index.latest()
        if name is None:
            raise RunNotFound("there are no runs yet", hint="start one with `launcher run -f SPEC`")
    config = load_config()
    recorded = index.profile_of(name)
    candidates = [p for p in config.profiles() if p.name == recorded] if recorded else config.profiles()
    if len(candidates) == 1:
        backend = open_backend(candidates[0])
        return backend, backend.get(name)

    def get_one(profile: Profile) -> tuple[Backend, Run] | None:
        backend = open_backend(profile)
        try:
            return backend, backend.get(name)
        except NotFoundError:
            return None

    answers, failed = ask_each(candidates, get_one, listing_only=True)
    for profile in candidates:
        if answers.get(profile.name) is not None:
            return answers[profile.name]
    unasked = [e.message for e in failed.values()]
    if len(failed) == len(candidates):
        # No profile could be asked: that is the answer, not that the run does not exist.
        first = next(iter(failed.values()))
        raise type(first)(first.message, exit_code=first.exit_code, hint=first.hint, warnings=unasked[1:])
    # Not found where we could look; each profile we could not ask is a warning.
    raise RunNotFound(f"no run named {name!r}", hint="list runs with `launcher get runs`", warnings=unasked)


# How long one look across every profile waits for the slowest: a stalled cluster becomes a warning.
LIST_SECONDS = 8.0


def ask_each(profiles: list[Profile], ask: Callable[[Profile], T], *, seconds: float = LIST_SECONDS,
             listing_only: bool = False) -> tuple[dict[str, T], dict[str, LauncherError]]:
    """ask(profile) for every profile at once: the answers, and for each profile that
    failed or did not answer within `seconds`, a LauncherError whose message is one
    line that names it. An unreachable cluster costs its connect timeout once, not a
    turn in a queue, and not the import of its client either (check_reachable).
    `listing_only`: ask only lists runs or reads one (BackendKind.listing)."""
    answers: dict[str, T] = {}
    failures: dict[str, BaseException] = {}
    past_deadline = threading.Event()
    for profile in profiles:  # what every thread calls first, imported here, before there are threads
        with suppress(LauncherError):  # an unknown backend: that profile's thread reports it
            _reach_check(profile)

    def ask_one(profile: Profile) -> None:
        try:
            check_reachable(profile)
            with _IMPORTING:
                if past_deadline.is_set():
                    return  # too late to be an answer: import nothing beside the caller
                load_for_looks(profile, listing_only=listing_only)
            answers[profile.name] = ask(profile)
        except BaseException as e:  # noqa: BLE001 - reported below, in the caller's thread
            failures[profile.name] = e

    # Daemon threads: one that hangs on a stalled server must not hold up the process's exit.
    threads = [threading.Thread(target=ask_one, args=(p,), name=f"ask-{p.name}", daemon=True) for p in profiles]
    for t in threads:
        t.start()
    deadline = time.monotonic() + seconds
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() for t in threads):
        # A thread still importing finishes before the caller goes on to import (its output,
        # its next step); one not yet begun never begins.
        past_deadline.set()
        with _IMPORTING:
            pass
    failed: dict[str, LauncherError] = {}
    for profile in profiles:
        name = profile.name
        if name in answers:
            continue
        e = failures.get(name)
        if e is None:
            failed[name] = LauncherError(f"cluster {name}: no answer within {seconds:g} s")
            continue
        if not isinstance(e, LauncherError) or isinstance(e, StateFileError):
            raise e  # a bug, or our own state file is broken: not a cluster being away
        message = e.message.splitlines()[0] if e.message else type(e).__name__
        if not message.startswith(f"cluster {name}"):
            message = f"cluster {name}: {message}"
        # A cluster that is away stays one (the SDK's ClusterUnreachable), in the profile's words.
        kind = ClusterUnreachable if isinstance(e, ClusterUnreachable) else LauncherError
        failed[name] = kind(message, exit_code=e.exit_code, hint=e.hint)
    return answers, failed


def list_runs(profiles: list[Profile]) -> tuple[list[tuple[Backend, Run]], list[str]]:
    """(backend, run) for every run of these profiles, newest first, and one warning per
    profile that could not be listed. When not one of them could be (one profile that is
    down, or all of them), that is the error: an empty listing would say there are no runs."""

    def list_one(profile: Profile) -> list[tuple[Backend, Run]]:
        backend = open_backend(profile)
        return [(backend, run) for run in backend.list()]

    answers, warnings = ask_some(profiles, list_one, "listed", listing_only=True)
    withdrawn = RunIndex().withdrawn()  # a run that moved on is listed where it is now
    pairs = [pair for profile in profiles for pair in answers.get(profile.name, [])
             if (pair[1].name, profile.name) not in withdrawn]
    pairs.sort(key=lambda pair: pair[1].created_at, reverse=True)
    return pairs, warnings


def ask_some(profiles: list[Profile], ask: Callable[[Profile], T], done: str, *,
             listing_only: bool = False) -> tuple[dict[str, T], list[str]]:
    """ask_each, when an answer from some profiles is an answer: the answers, and one
    warning per profile that could not be asked. When not one of them could be (one
    profile that is down, or all of them), that is the error: an empty answer would say
    there is nothing. `done`: what was asked of them, for that error ("listed")."""
    answers, failed = ask_each(profiles, ask, listing_only=listing_only)
    if profiles and len(failed) == len(profiles):
        errors = list(failed.values())
        if len(errors) == 1:
            raise errors[0]
        # Bad input (a kubeconfig, credentials) everywhere is exit 2; a cluster that is away, 1.
        kind = ClusterUnreachable if all(isinstance(e, ClusterUnreachable) for e in errors) else LauncherError
        raise kind(f"none of the {len(errors)} cluster profiles could be {done}",
                            exit_code=2 if all(e.exit_code == 2 for e in errors) else 1,
                            warnings=[e.message for e in errors])
    return answers, [e.message for e in failed.values()]
