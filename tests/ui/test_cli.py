"""`launcher ui` as a user starts it: the address it prints, the token off loopback."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

from tests.ui.browser import dashboard


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_loopback_serves_without_a_token_only_with_no_token(launcher_home: Path) -> None:
    with dashboard(launcher_home, "--no-token") as url:
        assert urlsplit(url).hostname == "127.0.0.1"
        status, body = get(url + "api/runs")
        assert status == 200 and json.loads(body)["runs"] == []


def test_any_other_address_gets_a_generated_token_that_every_request_needs(launcher_home: Path) -> None:
    with dashboard(launcher_home, "--host", "0.0.0.0") as url:
        parts = urlsplit(url)
        token = re.fullmatch(r"token=([\w-]{20,})", parts.query)
        assert token, url
        local = f"http://127.0.0.1:{parts.port}"
        assert get(local + "/api/runs")[0] == 401
        assert get(local + "/api/runs?token=not-it")[0] == 401
        assert get(local + f"/api/runs?token={token.group(1)}")[0] == 200


def test_a_busy_port_is_a_clear_error(launcher_home: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = subprocess.run(
            [sys.executable, "-m", "launcher", "ui", "--port", str(port)], capture_output=True, text=True, timeout=60
        )
    assert r.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in r.stderr and "Traceback" not in r.stderr
