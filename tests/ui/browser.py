"""Driving the dashboard in a real browser: Debian's chromium under Playwright (no browser
download), and a `launcher ui` server in a subprocess. Shared by tests/ui and bench/."""

from __future__ import annotations

import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser")


def chromium_path() -> str | None:
    for name in CHROMIUM_CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


SERVER_LOGS: dict[str, collections.deque[str]] = {}


def _drain(stream, url: str) -> None:
    tail = SERVER_LOGS.setdefault(url, collections.deque(maxlen=400))
    for line in stream:
        tail.append(line)


def server_log(url: str) -> str:
    """The last lines the dashboard at `url` wrote to stderr."""
    return "".join(SERVER_LOGS.get(url, ()))


@contextmanager
def dashboard(home: Path, *args: str, timeout: float = 30) -> Iterator[str]:
    """`launcher ui --port 0` on LAUNCHER_HOME=home; yields its address; stops it after."""
    env = {**os.environ, "LAUNCHER_HOME": str(home)}
    drain = None
    # cwd: `python -m` imports from the working directory first, so that must not be a checkout
    # other than the one PYTHONPATH names.
    proc = subprocess.Popen(
        [sys.executable, "-m", "launcher", "ui", "--port", "0", *args],
        env=env,
        cwd=home,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + timeout
        said = []
        url = None
        while url is None:
            line = proc.stderr.readline()  # printed once the socket is bound
            if not line:
                raise RuntimeError("launcher ui exited: " + "".join(said))
            said.append(line)
            m = re.search(r"Dashboard at (\S+)", line)
            if m:
                url = m.group(1)
            if time.monotonic() > deadline:
                raise RuntimeError("launcher ui did not start: " + "".join(said))
        # Keep reading its stderr (tracebacks, uvicorn's lines): a pipe nobody reads fills
        # up and then blocks the server mid-request. The tail is kept for failure messages.
        drain = threading.Thread(target=_drain, args=(proc.stderr, url), name="ui-stderr", daemon=True)
        drain.start()
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if drain is not None:
            drain.join(10)  # the server is gone: its stderr ends
        if proc.stderr and (drain is None or not drain.is_alive()):
            proc.stderr.close()


@contextmanager
def browser(executable: str) -> Iterator[object]:
    """A headless Playwright Browser on the given chromium binary."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=executable,
            headless=True,
            args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
            timeout=60_000,
        )
        try:
            yield b
        finally:
            b.close()


# Counts the canvas pixels of a colour close to `rgb` (a chart line), so a test can tell
# a drawn curve from empty axes.
COUNT_PIXELS_JS = """([canvas, rgb]) => {
  const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4)
    if (d[i + 3] > 200 && Math.abs(d[i] - rgb[0]) < 40 && Math.abs(d[i + 1] - rgb[1]) < 40 && Math.abs(d[i + 2] - rgb[2]) < 40) n++;
  return n;
}"""

BLUE, RED = (0x25, 0x63, 0xEB), (0xDC, 0x26, 0x26)
"""The first two colours of Charts.PALETTE (static/charts.js)."""
