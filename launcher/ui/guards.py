"""What the dashboard's every response carries, and its cap on log streams: ASGI
middleware around the app (this module imports no starlette: `launcher ui` reads its caps)."""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # `launcher ui` reads the caps below before it imports starlette
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Each log stream keeps reading its run's log (on Kubernetes, the cluster's log streams);
# 300 of them made /api/runs take 9.5 s. A browser opens one per run page.
MAX_STREAMS = 64
MAX_STREAMS_PER_CLIENT = 8

# The pages load their scripts, styles and data from the dashboard alone and are framed by
# no page (clickjacking); scripts set styles through the DOM (uPlot), which style-src allows.
SECURITY_HEADERS = [
    (b"x-frame-options", b"DENY"),
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


class SecurityHeaders:
    """Adds SECURITY_HEADERS to every HTTP response, the token check's 401 included."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)


RUNS_UPDATES = "/api/events/runs"
"""The runs page's updates: a stream too, that lists its page every few seconds."""


def is_stream(path: str) -> bool:
    """The dashboard's server-sent event streams: /api/runs/NAME/logs and the runs page's updates."""
    return path == RUNS_UPDATES or (path.startswith("/api/runs/") and path.endswith("/logs") and path.count("/") == 4)


_UPDATES_COUNT = " (a runs page's live updates count as one)"


class StreamCap:
    """At most `total` streams (is_stream: a run's log, a runs page's updates) at once, and `per_client` for one client address; one
    more is answered 503 with Retry-After. A stream's slot is given back when its response
    ends in any way (finished, the client gone, the server stopping)."""

    def __init__(self, app: ASGIApp, *, total: int, per_client: int):
        self.app = app
        self.total = total
        self.per_client = per_client
        self._lock = threading.Lock()
        self._open: dict[str, int] = {}

    def _take(self, client: str) -> str | None:
        """None when a slot is taken for `client`; else why not."""
        with self._lock:
            if sum(self._open.values()) >= self.total:
                return f"this dashboard serves at most {self.total} log streams at once{_UPDATES_COUNT}"
            if self._open.get(client, 0) >= self.per_client:
                return (
                    f"this dashboard serves at most {self.per_client} log streams at once to one client{_UPDATES_COUNT}"
                )
            self._open[client] = self._open.get(client, 0) + 1
            return None

    def _give(self, client: str) -> None:
        with self._lock:
            left = self._open.get(client, 0) - 1
            if left > 0:
                self._open[client] = left
            else:
                self._open.pop(client, None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_stream(scope["path"]):
            await self.app(scope, receive, send)
            return
        client = (scope.get("client") or ("?", 0))[0]
        refused = self._take(client)
        if refused:
            body = json.dumps({"error": refused, "hint": "close another run's page and try again"}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 503,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"retry-after", b"5"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self._give(client)
