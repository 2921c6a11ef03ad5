"""The dashboard's runs: one page at a time, asked of the stores the way `launcher get runs`
asks them (launcher.sdk.fanout.list_runs with a RunQuery: the filters, a limit, a created_at
cursor), so that a page costs what it shows, not the history.

Pages are kept for `max_age` seconds, so that tabs showing the same page, and the
updates streamed to them (launcher.ui.updates), share one listing.

Paging, newest first: the stores answer "the newest N runs created before T" from their
created_at indexes, and have no offset. So the "older" link of a page carries a cursor,
the created_at of its last row (and the runs created at that same moment that it showed:
a Kubernetes creation time is to the second, so several runs share one); the next page
is the newest runs at or before that moment less those, one page's worth whatever the
depth. A page asked by number alone (the "newer" links, an address typed in) lists its
number times the page size: page 1, the one that matters, costs one page.

A listing that fails on a bug, or on the launcher's own state, is the page's error (the
runs listed before are not shown: they may be stale); a cluster that cannot be listed is
an error line beside the others' runs.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from launcher.backends.base import Backend, Run, RunStatus
from launcher.backends.listing import RunQuery, is_glob
from launcher.backends.registry import open_backend
from launcher.config import load_config
from launcher.errors import InputError, LauncherError, internal_error_line
from launcher.sdk.fanout import list_runs, priced, resolve_run


@dataclass
class Snapshot:
    """The runs of the latest page listed, with their backends: a run page opened from a
    row asks the backend that row came from."""

    pairs: list[tuple[Backend, Run]]
    """(backend, run) for every run of that page, newest first."""
    taken_at: float = 0.0
    """time.time() when the listing finished."""

    @property
    def runs(self) -> list[Run]:
        return [run for _, run in self.pairs]

    def backend_of(self, name: str) -> Backend | None:
        for backend, run in self.pairs:
            if run.name == name:
                return backend
        return None


def cluster_of(run: Run) -> str:
    return run.cluster or run.backend


class ListingFailed(Exception):
    """The latest listing failed as a whole; `line` says why, in one line."""

    def __init__(self, line: str):
        super().__init__(line)
        self.line = line


# --- what a page asks for (pure) -------------------------------------------------------------


@dataclass(frozen=True)
class RunFilter:
    statuses: frozenset[RunStatus] = frozenset()
    cluster: str | None = None
    """A cluster profile's name: only its runs."""
    name: str | None = None
    """A substring, or a glob when it has * ? or [."""

    @property
    def names(self) -> tuple[str, ...]:
        """The name filter as RunQuery.names has it: a substring is the glob *substring*."""
        if not self.name:
            return ()
        return (self.name if is_glob(self.name) else f"*{self.name}*",)

    @property
    def any(self) -> bool:
        return bool(self.statuses or self.cluster or self.name)


_TICK = timedelta(microseconds=1)
"""The resolution of a run's created_at: `created <= t` is `created < t + _TICK`."""


@dataclass(frozen=True)
class PageAt:
    """Where a page starts: its number, and (on a page reached by an "older" link) the
    cursor: the newest runs created at or before `before`, less `shown`, the runs created
    at that very moment that the pages before showed."""

    page: int = 1
    before: datetime | None = None
    shown: tuple[str, ...] = ()

    @classmethod
    def parse(cls, page: int, before: str | None, shown: str | None) -> PageAt:
        """From the page's query parameters. Raises InputError for a cursor this module did not write."""
        if not before:
            return cls(page)
        try:
            at = datetime.fromisoformat(before)
        except ValueError:
            raise InputError(f"before must be a time as the page links write it, not {before!r}") from None
        if at.tzinfo is None:
            raise InputError(f"before must carry its time zone, not {before!r}")
        return cls(page, at.astimezone(UTC), tuple(n for n in (shown or "").split(",") if n))

    def params(self) -> dict[str, Any]:
        """The query parameters that ask for this page (none for page 1)."""
        out: dict[str, Any] = {} if self.page == 1 else {"page": self.page}
        if self.before is not None:
            out["before"] = self.before.isoformat()
            if self.shown:
                out["shown"] = ",".join(self.shown)
        return out

    def query(self, where: RunFilter, per_page: int) -> RunQuery:
        """What to ask the stores: one more run than the page shows, to know there are older ones."""
        if self.before is not None:
            return RunQuery(
                names=where.names,
                statuses=where.statuses,
                before=self.before + _TICK,
                limit=per_page + len(self.shown) + 1,
            )
        return RunQuery(names=where.names, statuses=where.statuses, limit=self.page * per_page + 1)

    def cut(self, runs: list[Run], per_page: int) -> tuple[list[Run], bool]:
        """This page's runs out of what `query` listed, and whether older runs are left."""
        if self.before is not None:
            shown = set(self.shown)
            rest = [r for r in runs if r.name not in shown]
        else:
            rest = runs[(self.page - 1) * per_page :]
        return rest[:per_page], len(rest) > per_page


@dataclass(frozen=True)
class Page:
    runs: list[Run]
    at: PageAt
    per_page: int
    more: bool
    """Older runs match past this page."""
    errors: tuple[str, ...] = ()
    """One line per cluster that could not be listed."""
    clusters: tuple[str, ...] = ()
    """Every cluster profile's name (the filter's choices)."""
    cost: float = 0.0
    """How long the listing took, in seconds."""
    taken_at: float = 0.0

    @property
    def page(self) -> int:
        return self.at.page

    @property
    def first(self) -> int:
        """The place of the page's first run among all the matches (from 1)."""
        return (self.page - 1) * self.per_page + 1

    @property
    def total(self) -> int | None:
        """How many runs match: known on the last page only (counting them all would cost
        a listing of the whole history)."""
        return None if self.more else self.first - 1 + len(self.runs)

    def older(self) -> PageAt | None:
        """The next page's cursor; None on the last page."""
        if not self.more or not self.runs:
            return None
        last = self.runs[-1].created_at
        same = tuple(r.name for r in self.runs if r.created_at == last)
        if self.at.before is not None and self.at.before == last:
            same = self.at.shown + same  # a moment that spans pages: what they all showed
        return PageAt(self.page + 1, last.astimezone(UTC), same)

    def newer(self) -> PageAt | None:
        """The previous page (by number: the stores list newest first); None on page 1."""
        return PageAt(self.page - 1) if self.page > 1 else None


class RunsSource:
    """The runs of every cluster profile, a page at a time, through the SDK's listing (the
    Backend contract). Backends are opened once per profile and kept (a Kubernetes backend
    holds connections); the config is re-read at every listing, so profiles added while
    the dashboard runs appear on the next one."""

    def __init__(self, max_age: float = 1.0):
        self.max_age = max_age
        self._backends: dict[tuple[str, str], Backend] = {}
        self._pages: dict[tuple[RunFilter, PageAt, int], Page] = {}
        self._snapshot: Snapshot | None = None
        self._failure: str | None = None
        """Why the latest listing failed, until one succeeds."""
        self._lock = threading.Lock()

    def _backend(self, profile) -> Backend:
        """The profile's backend, opened once and kept."""
        key = (profile.name, profile.backend)
        with self._lock:
            if key not in self._backends:
                self._backends[key] = open_backend(profile)
            return self._backends[key]

    def page(self, where: RunFilter, at: PageAt, per_page: int) -> Page:
        """The page's runs, listed at most `max_age` seconds ago. Raises the listing's
        error when no cluster could be listed (a LauncherError) or on a bug."""
        key = (where, at, per_page)
        with self._lock:
            kept = self._pages.get(key)
        if kept is not None and time.time() - kept.taken_at <= self.max_age:
            return kept
        try:
            page, pairs = self._list(where, at, per_page)
        except Exception as e:
            with self._lock:
                self._failure = e.message if isinstance(e, LauncherError) else internal_error_line(e)
            raise
        with self._lock:
            # Only pages asked within max_age are kept: a tab that left leaves nothing behind.
            now = time.time()
            self._pages = {k: p for k, p in self._pages.items() if now - p.taken_at <= self.max_age}
            self._pages[key] = page
            self._snapshot, self._failure = Snapshot(pairs, page.taken_at), None
        return page

    def _list(self, where: RunFilter, at: PageAt, per_page: int) -> tuple[Page, list[tuple[Backend, Run]]]:
        started = time.monotonic()
        current: list[str] = []
        try:
            config = load_config()
        except LauncherError as e:
            profiles, errors = [], [e.message]
        else:
            profiles, errors, current = config.profiles(), [], [config.current]
        clusters = tuple(sorted(p.name for p in profiles))
        if where.cluster:
            profiles = [p for p in profiles if p.name == where.cluster]
        pairs, warnings = list_runs(profiles, at.query(where, per_page), opener=self._backend, prefer=current)
        runs, more = at.cut([run for _, run in pairs], per_page)
        kept = {run.name for run in runs}
        shown = [(backend, run) for backend, run in pairs if run.name in kept]
        page = Page(
            runs, at, per_page, more, tuple(errors + warnings), clusters, time.monotonic() - started, time.time()
        )
        return page, shown

    def snapshot(self) -> Snapshot:
        """The latest page listed (empty before the first). Raises ListingFailed while the
        latest listing has failed."""
        with self._lock:
            snap, failure = self._snapshot, self._failure
        if failure is not None:
            raise ListingFailed(failure)
        return snap if snap is not None else Snapshot([])

    def warm_quietly(self, per_page: int) -> None:
        """List the first page in the background (the backends open, their modules load),
        so that the first visit need not wait for that. A failure is the page's to show."""
        try:
            self.page(RunFilter(), PageAt(), per_page)
        except Exception:  # noqa: BLE001 - the first page asked lists again and shows it
            pass

    def find(self, name: str) -> tuple[Backend, Run]:
        """The backend of the run `name` means and its current record: a run name, or what
        `launcher describe run NAME` takes (the spec's name for its latest run, a unique
        start of a run name), resolved as describe resolves it (fanout.resolve_run).
        Raises NotFoundError, or InputError for a start several run names share."""
        try:
            snap: Snapshot | None = self.snapshot()
        except ListingFailed:
            snap = None  # look for it on its own below
        backend = snap.backend_of(name) if snap is not None else None
        if backend is not None:
            return backend, priced(backend, backend.get(name))  # its cost on the page, as in a listing

        return resolve_run(name)  # submitted since the last snapshot, or not a run's full name

    def close(self) -> None:
        for backend in self._backends.values():
            backend.close()


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


def version(run: Run) -> str:
    """A short digest of what a run's row shows: a row whose version is unchanged is not
    sent again (launcher.ui.updates)."""
    return hashlib.blake2b(json.dumps(summary(run), sort_keys=True).encode(), digest_size=6).hexdigest()
