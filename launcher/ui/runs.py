"""The dashboard's view of every run: a snapshot of all backends, refreshed in the background.

Listing every cluster can take a while (a thousand local runs, a slow API server), and
the runs page polls it every few seconds from each open tab. So pages are served from
the latest snapshot, and a request that finds it older than `max_age` starts one
refresh in a thread (stale-while-revalidate): a page never waits for a listing except
the very first one.

A listing that fails on a bug, or on the launcher's own state (a cluster that cannot be
listed is only an error line beside the others' runs), is not hidden behind the last
snapshot: until a listing succeeds again, pages and the API answer its error.
"""

from __future__ import annotations

import fnmatch
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from launcher.backends.base import Backend, Run, RunStatus
from launcher.backends.registry import open_backend
from launcher.config import load_config
from launcher.errors import LauncherError, internal_error_line
from launcher.sdk.fanout import ask_each, find_run


@dataclass
class Snapshot:
    pairs: list[tuple[Backend, Run]]
    """(backend, run) for every run, newest first."""
    errors: list[str] = field(default_factory=list)
    """One line per cluster that could not be listed."""
    taken_at: float = 0.0
    """time.time() when the listing finished."""
    cost: float = 0.0
    """How long the listing took, in seconds."""

    @property
    def runs(self) -> list[Run]:
        return [run for _, run in self.pairs]

    def backend_of(self, name: str) -> Backend | None:
        for backend, run in self.pairs:
            if run.name == name:
                return backend
        return None

    @property
    def clusters(self) -> list[str]:
        return sorted({cluster_of(run) for run in self.runs})


def cluster_of(run: Run) -> str:
    return run.cluster or run.backend


class ListingFailed(Exception):
    """The latest listing failed as a whole; `line` says why, in one line. The runs listed
    before are not shown in its place: they may be stale by now."""

    def __init__(self, line: str):
        super().__init__(line)
        self.line = line


class RunsSource:
    """Every run of every cluster profile, through the Backend contract only. Backends are
    opened once per profile and kept (a Kubernetes backend holds connections)."""

    def __init__(self, max_age: float = 1.0):
        self.max_age = max_age
        self._backends: dict[tuple[str, str], Backend] = {}
        self._snapshot: Snapshot | None = None
        self._failure: str | None = None
        """Why the latest listing failed, until one succeeds."""
        self._lock = threading.Lock()
        self._refreshing = threading.Lock()
        self._first = threading.Event()

    def _backend(self, profile) -> Backend:
        """The profile's backend, opened once and kept."""
        key = (profile.name, profile.backend)
        with self._lock:
            if key not in self._backends:
                self._backends[key] = open_backend(profile)
            return self._backends[key]

    def refresh(self) -> Snapshot:
        """List every profile (the config is re-read: profiles added while the dashboard runs
        appear on the next refresh) the way `launcher get runs` does: all at once, an
        unreachable cluster costing its short timeout and one error line."""
        with self._refreshing:
            try:
                snap = self._list()
            except Exception as e:
                with self._lock:
                    self._failure = e.message if isinstance(e, LauncherError) else internal_error_line(e)
                raise
            finally:
                self._first.set()  # a request waiting for the first listing goes on either way
            with self._lock:
                self._snapshot, self._failure = snap, None
            return snap

    def _list(self) -> Snapshot:
        started = time.monotonic()
        try:
            profiles = load_config().profiles()
        except LauncherError as e:
            profiles, errors = [], [e.message]
        else:
            errors = []

        def list_one(backend: Backend) -> list[tuple[Backend, Run]]:
            return [(backend, run) for run in backend.list()]

        answers, failed = ask_each(profiles, list_one, opener=self._backend)
        pairs = [pair for profile in profiles for pair in answers.get(profile.name, [])]
        errors += [e.message for e in failed.values()]
        pairs.sort(key=lambda pair: pair[1].created_at, reverse=True)
        return Snapshot(pairs, errors, time.time(), time.monotonic() - started)

    def snapshot(self) -> Snapshot:
        """The latest listing. Raises ListingFailed while the latest refresh has failed."""
        with self._lock:
            snap, failure = self._snapshot, self._failure
        if snap is None:
            if self._refreshing.locked():  # the first listing is under way: wait for it
                self._first.wait()
                with self._lock:
                    snap = self._snapshot
            return snap if snap is not None else self.refresh()
        # A slow listing (thousands of runs) is repeated less often, so an open tab does not
        # keep a core busy listing: at most a quarter of the time goes to it.
        if time.time() - snap.taken_at > max(self.max_age, 3 * snap.cost) and not self._refreshing.locked():
            threading.Thread(target=self.refresh_quietly, daemon=True, name="runs-refresh").start()
        if failure is not None:
            raise ListingFailed(failure)
        return snap

    def refresh_quietly(self) -> None:
        """A refresh in the background. Its failure is kept for the pages (snapshot raises
        it); a bug's traceback also goes to stderr, as uvicorn logs a failed request's."""
        if self._refreshing.locked():
            return
        try:
            self.refresh()
        except LauncherError:
            pass
        except Exception:  # noqa: BLE001 - kept for the pages; the next request tries again
            traceback.print_exc()

    def find(self, name: str) -> tuple[Backend, Run]:
        """The backend of run `name` and its current record. Raises NotFoundError."""
        try:
            snap: Snapshot | None = self.snapshot()
        except ListingFailed:
            snap = None  # look for it on its own below
        backend = snap.backend_of(name) if snap is not None else None
        if backend is not None:
            return backend, backend.get(name)

        return find_run(name)  # submitted since the last snapshot

    def close(self) -> None:
        for backend in self._backends.values():
            backend.close()


# --- filtering and pages (pure) -------------------------------------------------------------


@dataclass(frozen=True)
class RunFilter:
    statuses: frozenset[RunStatus] = frozenset()
    cluster: str | None = None
    name: str | None = None
    """A substring, or a glob when it has * ? or [."""

    def matches(self, run: Run) -> bool:
        if self.statuses and run.status not in self.statuses:
            return False
        if self.cluster and cluster_of(run) != self.cluster:
            return False
        if self.name:
            if any(c in self.name for c in "*?["):
                return fnmatch.fnmatchcase(run.name, self.name)
            return self.name in run.name
        return True


@dataclass(frozen=True)
class Page:
    runs: list[Run]
    total: int
    page: int
    per_page: int

    @property
    def pages(self) -> int:
        return max((self.total + self.per_page - 1) // self.per_page, 1)


def select(runs: list[Run], where: RunFilter, page: int, per_page: int) -> Page:
    matched = [r for r in runs if where.matches(r)]
    pages = max((len(matched) + per_page - 1) // per_page, 1)
    page = min(max(page, 1), pages)
    return Page(matched[(page - 1) * per_page : page * per_page], len(matched), page, per_page)


def summary(run: Run) -> dict[str, Any]:
    """A run as one row of the runs page and of /api/runs."""
    compute = run.spec.get("compute") or {}
    gpus = int(compute.get("gpus") or 0)
    return {
        "name": run.name,
        "cluster": cluster_of(run),
        "backend": run.backend,
        "status": run.status.value,
        "nodes": run.nodes,
        "gpus": gpus,
        "gpus_per_node": gpus // run.nodes if gpus else 0,
        "gpu_type": compute.get("gpu_type"),
        "created_at": run.created_at.isoformat(),
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "ended_at": run.ended_at.isoformat() if run.ended_at else None,
        "reason": run.reason,
        "attempts": run.current_attempt,
    }
