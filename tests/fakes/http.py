"""The HTTP server every fake uses: threaded, on loopback, quiet about clients that hang up.

Tests drop connections on purpose (a log stream cut mid-run, a client timing out), and
the standard server prints a traceback for each; those are not failures.
"""

from __future__ import annotations

import sys
from http.server import ThreadingHTTPServer


class LoopbackServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, handler) -> None:
        super().__init__(("127.0.0.1", 0), handler)

    def handle_error(self, request, client_address) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)
