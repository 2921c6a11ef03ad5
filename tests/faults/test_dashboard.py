"""Item 7 of the hardening issue: the dashboard on an open port. Every case is the real
`launcher ui` in a subprocess (tests/ui/browser.py's `dashboard`), bound to 0.0.0.0 and
spoken to over raw sockets, as an attacker would."""

from __future__ import annotations

import contextlib
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest

from tests.conftest import needs, wait_until
from tests.ui.browser import dashboard

needs("starlette", reason="the dashboard needs the ui extra: pip install -e '.[ui]'")

HALF_SENT = 300  # the audit's count; the default cap (500) is above it
REQUEST_TIMEOUT = 1.5


@contextlib.contextmanager
def open_dashboard(home: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> Iterator[tuple[int, str]]:
    """`launcher ui --host 0.0.0.0` with the LAUNCHER_UI_* variables `env`; yields its port and token."""
    for key, value in env.items():
        monkeypatch.setenv(f"LAUNCHER_UI_{key.upper()}", value)
    with dashboard(home, "--host", "0.0.0.0") as url:
        token = re.fullmatch(r"token=(\S+)", urlsplit(url).query)
        assert token, url
        yield urlsplit(url).port, token.group(1)


@contextlib.contextmanager
def sockets() -> Iterator[list[socket.socket]]:
    """A list to open sockets into; every one is closed at the end."""
    opened: list[socket.socket] = []
    try:
        yield opened
    finally:
        for s in opened:
            s.close()


def connect(port: int, opened: list[socket.socket], first: bytes = b"") -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    opened.append(s)
    if first:
        s.sendall(first)
    s.setblocking(False)
    return s


def ask(port: int, target: str, token: str | None = None, host: str = "127.0.0.1") -> tuple[int, dict[str, str], bytes]:
    """One GET over a raw socket (no client library rewrites the target): status, headers, body."""
    head = f"GET {target} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n"
    head += f"X-Launcher-Token: {token}\r\n" if token else ""
    data = b""
    with socket.create_connection((host, port), timeout=20) as s:
        try:
            s.sendall(head.encode() + b"\r\n")
            while chunk := s.recv(65536):
                data += chunk
        except (ConnectionResetError, BrokenPipeError):
            pass
    if not data:
        return 0, {}, b""  # closed without an answer
    raw_head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = raw_head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, body


def closed_with(s: socket.socket, got: dict[socket.socket, bytes]) -> bytes | None:
    """Everything the server sent on `s` (kept in `got` meanwhile), once it has closed it;
    None while it is open."""
    try:
        while chunk := s.recv(65536):
            got[s] = got.get(s, b"") + chunk
    except BlockingIOError:
        return None
    except ConnectionResetError:
        pass
    return got.get(s, b"")


def test_item7_half_sent_requests_are_closed_within_the_request_timeout(launcher_home, monkeypatch):
    with (
        open_dashboard(launcher_home, monkeypatch, request_timeout=str(REQUEST_TIMEOUT)) as (port, token),
        sockets() as opened,
    ):
        began = time.monotonic()
        silent = [connect(port, opened) for _ in range(HALF_SENT // 3)]
        half_heads = [
            connect(port, opened, b"GET /api/runs HTTP/1.1\r\nHost: x\r\nX-Launcher-To")
            for _ in range(HALF_SENT - len(silent) - 2)
        ]
        # A byte every 0.2 s, which held uvicorn's keep-alive timer off for ever; and a body
        # that never ends, after a head the app answered without reading it.
        trickle = connect(port, opened, b"G")
        body = connect(
            port,
            opened,
            f"GET /api/runs HTTP/1.1\r\nHost: x\r\nX-Launcher-Token: {token}\r\n"
            "Content-Length: 100000\r\n\r\nsome".encode(),
        )
        assert len(opened) == HALF_SENT

        # While they are open, a whole request is served, and so is one after it.
        status, _, answer = ask(port, "/api/runs", token)
        assert status == 200 and b'"runs":[]' in answer.replace(b" ", b"")
        assert ask(port, "/api/runs")[0] == 401

        pending: dict[socket.socket, bytes | None] = dict.fromkeys(opened)
        got: dict[socket.socket, bytes] = {}

        def all_closed() -> bool:
            for s in [s for s, said in pending.items() if said is None]:
                if s in (trickle, body):
                    with contextlib.suppress(OSError):
                        s.send(b"E" if s is trickle else b"x")
                pending[s] = closed_with(s, got)
            return all(said is not None for said in pending.values())

        wait_until(
            all_closed,
            REQUEST_TIMEOUT + 15,
            interval=0.2,
            message=lambda: (
                f"the server to close all {HALF_SENT} half-sent connections "
                f"({sum(said is None for said in pending.values())} still open)"
            ),
        )
        took = time.monotonic() - began
        assert took < REQUEST_TIMEOUT + 10, took
        assert all(pending[s] == b"" for s in silent)  # an empty 408 would be noise to a port scan
        for s in (*half_heads, trickle):
            assert pending[s].startswith(b"HTTP/1.1 408 "), pending[s][:200]
        # One response, the 200 (no 408 after it); its body may hold any digits (a view id).
        assert pending[body].startswith(b"HTTP/1.1 200 ") and pending[body].count(b"HTTP/1.1 ") == 1
        assert ask(port, "/api/runs", token)[0] == 200


def test_item7_connections_past_the_cap_get_503_then_are_closed(launcher_home, monkeypatch):
    cap = 4
    with (
        open_dashboard(launcher_home, monkeypatch, max_connections=str(cap), request_timeout="60") as (port, token),
        sockets() as opened,
    ):
        for _ in range(cap):
            connect(port, opened, b"GET / HTTP/1.1\r\n")
        assert ask(port, "/api/runs", token)[0] == 503  # one past the cap: told so

        # With one more held, a further connection is closed unanswered at once, before
        # anything is read from it (the one held for it is past the cap too).
        connect(port, opened, b"GET / HTTP/1.1\r\n")
        began = time.monotonic()
        assert ask(port, "/api/runs", token) == (0, {}, b"")
        assert time.monotonic() - began < 5

        for s in opened:
            s.close()
        wait_until(
            lambda: ask(port, "/api/runs", token)[0] == 200,
            15,
            message="a request to be served once the held connections closed",
        )


def test_item7_a_short_or_blank_token_is_refused(cli):
    # Any address, loopback too (192.0.2.1 is not this machine's: refused before binding).
    for host, token in (
        ("0.0.0.0", "a"),
        ("0.0.0.0", " "),
        ("0.0.0.0", "fifteen-chars-x"),
        ("0.0.0.0", "sixteen chars xx"),
        ("192.0.2.1", "a"),
        ("127.0.0.1", "a"),
    ):
        r = cli("ui", "--port", "0", "--host", host, "--token", token, timeout=15)
        assert r.returncode == 2, (token, r.stderr)
        assert "a dashboard token needs at least 128 random bits" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
        if len(token) > 4:
            assert token not in r.stderr  # the token is a secret
    cli.env["LAUNCHER_UI_TOKEN"] = "short"
    r = cli("ui", "--port", "0", "--host", "0.0.0.0", timeout=15)
    assert r.returncode == 2 and "--token (or LAUNCHER_UI_TOKEN) holds at most 24 bits" in r.stderr, r.stderr
    assert "short" not in r.stderr
    del cli.env["LAUNCHER_UI_TOKEN"]

    # 22 random characters are enough, anywhere; none given: one is generated, printed in
    # the address, and needed.
    for host, token in (("0.0.0.0", "Zk3-q_Vb8xYw2LmN0pRt7A"), ("127.0.0.1", "Zk3-q_Vb8xYw2LmN0pRt7A")):
        with dashboard(cli.home, "--host", host, "--token", token) as url:
            port = urlsplit(url).port
            assert ask(port, "/api/runs")[0] == 401
            assert ask(port, "/api/runs", token)[0] == 200
    with dashboard(cli.home, "--host", "0.0.0.0") as url:
        generated = re.fullmatch(r"token=([\w-]+)", urlsplit(url).query)
        assert generated and len(generated.group(1)) >= 22, url
        assert ask(urlsplit(url).port, "/api/runs", generated.group(1))[0] == 200


def test_item7_the_token_redirect_never_leaves_the_origin(launcher_home, monkeypatch):
    with open_dashboard(launcher_home, monkeypatch) as (port, token):
        origin = f"http://127.0.0.1:{port}"
        for target in (
            "//evil.example/",
            "///evil.example/",
            "/\\evil.example/",
            "/%2F%2Fevil.example/",
            "/%5Cevil.example/",
            "/%09/evil.example/",
            "/%0A/evil.example/",
            "/%2F/evil.example/",
            "/./%2F/evil.example/",
            "/%2e%2e/%2e%2e//evil.example/",
        ):
            status, headers, _ = ask(port, f"{target}?token={token}&page=2")
            assert status == 303, (target, status)
            location = headers["location"]
            # Where a browser goes: tabs and newlines dropped, a backslash read as a slash.
            browser = re.sub(r"[\t\n\r]", "", location).replace("\\", "/")
            assert urlsplit(urljoin(origin + "/", browser))[:2] == ("http", f"127.0.0.1:{port}"), (target, location)
            assert re.match(r"/[^/\\]", location) and location.endswith("?page=2"), (target, location)
            assert "launcher_ui_token=" in headers["set-cookie"]
        # The redirect it is for still lands on the page asked for.
        status, headers, _ = ask(port, f"/runs/some-run?token={token}&a=1")
        assert status == 303 and headers["location"] == "/runs/some-run?a=1"
