"""launcher.errors.connection_failure: one set of words for a failed connection, whichever
client failed (a bare socket, urllib3 as the Kubernetes client uses it, requests as the
storage SDKs do, the text MLflow keeps). Real failures against 127.0.0.1."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import urllib3

from launcher.errors import (
    CONNECT_FAILED,
    CONNECT_TIMEOUT,
    READ_TIMEOUT,
    TLS,
    UNREACHABLE,
    ConnectionFailure,
    connection_failure,
)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def silent_server(answer: bytes | None = None) -> Iterator[int]:
    """A server that accepts and sends `answer` (None: nothing, ever)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    held: list[socket.socket] = []

    def serve():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)
            if answer is not None:
                conn.recv(65536)
                conn.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()
        for conn in held:
            conn.close()


def failure_of(call) -> BaseException:
    try:
        call()
    except Exception as e:  # noqa: BLE001 - what the client raised, whatever it is
        return e
    pytest.fail("the call did not fail")


def test_a_refused_connection_reads_the_same_from_a_socket_urllib3_and_requests():
    port = closed_port()
    bare = failure_of(lambda: socket.create_connection(("127.0.0.1", port), timeout=2))
    assert connection_failure(bare, connecting=True) == ConnectionFailure("connection refused", CONNECT_FAILED)
    pool = urllib3.PoolManager(retries=False)
    through_urllib3 = failure_of(lambda: pool.request("GET", f"http://127.0.0.1:{port}/"))
    assert connection_failure(through_urllib3) == ("connection refused", CONNECT_FAILED)
    requests = pytest.importorskip("requests")
    through_requests = failure_of(lambda: requests.get(f"http://127.0.0.1:{port}/", timeout=2))
    assert connection_failure(through_requests) == ("connection refused", CONNECT_FAILED)
    assert CONNECT_FAILED in UNREACHABLE


def test_a_server_that_never_answers_is_a_read_timeout_not_an_unreachable_host():
    with silent_server() as port:
        pool = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(connect=2, read=0.2))
        e = failure_of(lambda: pool.request("GET", f"http://127.0.0.1:{port}/"))
    failure = connection_failure(e)
    assert failure == ("the server did not answer in time", READ_TIMEOUT) and failure.reason not in UNREACHABLE


def test_a_bare_socket_timeout_is_the_connects_only_when_connecting():
    e = TimeoutError("timed out")
    assert connection_failure(e, connecting=True) == ("connecting timed out", CONNECT_TIMEOUT)
    assert connection_failure(e).reason == READ_TIMEOUT


def test_tls_to_a_server_that_speaks_plain_http_says_tls_failed():
    with silent_server(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n") as port:
        pool = urllib3.PoolManager(retries=False, timeout=2, cert_reqs="CERT_NONE")
        e = failure_of(lambda: pool.request("GET", f"https://127.0.0.1:{port}/"))
    words, reason = connection_failure(e)
    assert reason == TLS and words.startswith("TLS failed: "), words
    assert "\n" not in words and "object at 0x" not in words


def test_an_unresolvable_host_and_mlflows_text_only_failure():
    gaierror = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    assert connection_failure(gaierror) == ("cannot resolve the host name (name or service not known)", CONNECT_FAILED)
    # MlflowException keeps only the text of the requests error it caught.
    text_only = Exception(
        "API request to http://127.0.0.1:9/api/2.0/mlflow/runs/create failed with exception "
        "HTTPConnectionPool(host='127.0.0.1', port=9): Max retries exceeded with url: /api "
        "(Caused by NewConnectionError('<urllib3.connection.HTTPConnection object at 0x7f>: "
        "Failed to establish a new connection: [Errno 111] Connection refused'))"
    )
    assert connection_failure(text_only) == ("connection refused", CONNECT_FAILED)
    assert connection_failure(Exception("something else")) == ("Exception: something else", "ConnectionError")
