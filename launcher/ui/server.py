"""The dashboard's HTTP server: uvicorn, with a deadline for each request to arrive and a
cap on connections, so that a dashboard on an open port cannot be held by clients that
never finish a request (slow loris)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

_TIMED_OUT = b"408: the request was not sent in time\n"
REQUEST_TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(_TIMED_OUT), _TIMED_OUT)
)
logger = logging.getLogger("uvicorn.error")


class DeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol, plus a deadline: a connection whose request (head and body)
    is not all in within `request_timeout` seconds of the connection being made, or of the
    previous response, is answered 408 (or, once the app has it, just closed). And a
    connection past `limit_concurrency` is closed as soon as it is accepted.

    uvicorn has no such timeout (its issue #157 plans `--timeout-request-start`; the pull
    request for it, #1685, was closed unmerged): `timeout_keep_alive` covers only the idle
    time after a response, is cancelled by any byte received, and is not armed on a new
    connection at all, so a client sending a byte every few seconds, or nothing, holds its
    connection for ever. ASGI middleware (the token check) runs only once a head is
    complete. And `limit_concurrency` answers 503 to a complete request head, so
    connections that never complete one pile up past it, each an open file.

    Always h11 (not httptools, when installed): the hooks used here are h11's."""

    def __init__(self, *args: Any, request_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.request_timeout = request_timeout
        self.request_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        full = self.limit_concurrency is not None and len(self.connections) >= self.limit_concurrency
        super().connection_made(transport)
        if full:
            logger.debug("closing a connection past the cap of %d", self.limit_concurrency)
            transport.abort()  # connection_lost() follows, and forgets it
            return
        self._arm_deadline()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._disarm_if_request_complete()

    def on_response_complete(self) -> None:
        # The next request's time starts now, unless this one is still being sent (a body
        # the app did not read): its deadline stands.
        if self.request_deadline is None:
            self._arm_deadline()
        super().on_response_complete()  # may handle a pipelined request already received
        self._disarm_if_request_complete()

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        self._disarm()  # the connection is the websocket protocol's from here
        super().handle_websocket_upgrade(event)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm_deadline(self) -> None:
        self._disarm()
        self.request_deadline = self.loop.call_later(self.request_timeout, self._request_timed_out)

    def _disarm(self) -> None:
        if self.request_deadline is not None:
            self.request_deadline.cancel()
            self.request_deadline = None

    def _disarm_if_request_complete(self) -> None:
        if self.conn.their_state in (h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.ERROR):
            self._disarm()

    def _request_timed_out(self) -> None:
        self.request_deadline = None
        if self.transport.is_closing():
            return
        logger.debug("closing a connection whose request was not in within %s s", self.request_timeout)
        if self.conn.their_state is h11.IDLE and self.conn.trailing_data[0]:
            # Part of a head came, so no app has the request: the 408 is its only response.
            # (A connection that sent nothing is closed without one, as an idle one is.)
            self.transport.write(REQUEST_TIMEOUT_RESPONSE)
        self.transport.close()


def server_config(app: Any, *, request_timeout: float, max_connections: int) -> uvicorn.Config:
    """uvicorn's configuration for the dashboard: up to `max_connections` connections (and
    requests) are served at once; a request on one more is answered 503; a connection
    past that is closed as soon as it is accepted. (uvicorn's `limit_concurrency` answers
    503 once that many connections are open, the one asking included: hence the + 1.)"""

    class Protocol(DeadlineProtocol):
        # uvicorn makes one per connection with its own arguments: this one adds the deadline.
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, request_timeout=request_timeout, **kwargs)

    return uvicorn.Config(
        app,
        http=Protocol,
        limit_concurrency=max_connections + 1,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=2,
    )
