"""The runs page's live updates, as server-sent events that carry what changed, never the
whole page again: the rows that are new or whose run changed (as row HTML, rendered by the
same template as the page), the names of the rows that left the page, and the navigation
and error lines when they changed.

A change is judged against a view: what a client's page shows (each row's version,
runs.version; its navigation; its error lines). The page, once drawn, and every event keep
their view here under an id (the page's `data-view`, the event's `id`), so a client that
connects, or reconnects with its Last-Event-ID, gets exactly what changed since. A view
that is not kept (the dashboard restarted, or it is among the oldest) is answered with
the whole page once (a `reset` event), as is the first listing after a failed one.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
import traceback
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from launcher.errors import LauncherError, internal_error_line
from launcher.ui.runs import Page, PageAt, RunFilter, RunsSource, version

UPDATE_SECONDS = 2.0
"""How often a stream lists its page again (more seldom for a slow listing: 3 times its cost)."""
KEPT_VIEWS = 256
FAILED = "failed"


@dataclass(frozen=True)
class View:
    rows: Mapping[str, str]
    """Each row's run name and version."""
    nav: str
    """The navigation line's HTML."""
    errors: tuple[str, ...]


class Views:
    """The latest KEPT_VIEWS views sent, by id. Ids start with a prefix of this process's
    own, so that one from an earlier dashboard is not taken for a view of this one."""

    def __init__(self, keep: int = KEPT_VIEWS):
        self.keep = keep
        self._prefix = secrets.token_hex(3)
        self._count = 0
        self._views: OrderedDict[str, View] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, view: View) -> str:
        with self._lock:
            self._count += 1
            key = f"{self._prefix}-{self._count}"
            self._views[key] = view
            while len(self._views) > self.keep:
                self._views.popitem(last=False)
            return key

    def get(self, key: str | None) -> View | None:
        with self._lock:
            return self._views.get(key) if key else None


@dataclass(frozen=True)
class Rendering:
    """How the page draws what an event carries (the app's templates)."""

    row: Callable[[Any], str]
    """A run's row, <tr>."""
    nav: Callable[[Page], str]
    """The navigation line."""
    rows: Callable[[Page], str]
    """The whole of #rows: error lines, table, navigation."""


def view_of(page: Page, draw: Rendering) -> View:
    return View({r.name: version(r) for r in page.runs}, draw.nav(page), page.errors)


def changes(old: View | None, new: View, page: Page, draw: Rendering) -> dict[str, Any] | None:
    """The event's data that turns a page showing `old` into `new` (None: nothing changed).
    A page that turns empty or stops being empty, or an unknown `old`, is drawn whole."""
    if old is None or (not old.rows) != (not new.rows):
        return {"reset": draw.rows(page)}
    changed = [
        {"name": r.name, "created_at": r.created_at.isoformat(), "html": draw.row(r)}
        for r in page.runs
        if old.rows.get(r.name) != new.rows[r.name]
    ]
    removed = [name for name in old.rows if name not in new.rows]
    data: dict[str, Any] = {}
    if changed:
        data["changed"] = changed
    if removed:
        data["removed"] = removed
    if new.nav != old.nav:
        data["nav"] = new.nav
    if new.errors != old.errors:
        data["errors"] = list(new.errors)
    return data or None


async def run_updates(
    source: RunsSource,
    where: RunFilter,
    at: PageAt,
    per_page: int,
    since: View | None,
    views: Views,
    draw: Rendering,
    *,
    seconds: float = UPDATE_SECONDS,
) -> AsyncIterator[dict]:
    """The page's events (sse-starlette dicts), for as long as the client stays: `runs`
    (id: the view it leaves the page in) when something changed since `since`, `failure`
    when the page cannot be listed (the next listing that works resets the page)."""
    view = since
    while True:
        try:
            page = await asyncio.to_thread(source.page, where, at, per_page)
        except Exception as e:  # noqa: BLE001 - the client shows it, the next tick tries again
            if isinstance(e, LauncherError):
                message = e.message
            else:  # a bug: its traceback to stderr, as uvicorn logs a failed request's
                traceback.print_exc()
                message = internal_error_line(e)
            # Its id is no view's: a client reconnecting after it gets the page whole.
            yield {"event": "failure", "id": FAILED, "data": json.dumps({"message": message})}
            view = None
            await asyncio.sleep(seconds)
            continue
        new = view_of(page, draw)
        data = changes(view, new, page, draw)
        if data is not None:
            yield {"event": "runs", "id": views.add(new), "data": json.dumps(data)}
            view = new
        await asyncio.sleep(max(seconds, 3 * page.cost))
