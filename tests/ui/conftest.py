"""Fixtures for the dashboard's tests: real local runs, submitted with the real CLI into a
private LAUNCHER_HOME shared by a module's tests; reading the SSE log stream."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.cli.conftest import CLI
from tests.conftest import needs

needs("starlette", reason="the dashboard needs the ui extra: pip install -e '.[ui]'")

if TYPE_CHECKING:
    from starlette.testclient import TestClient


class Runs(CLI):
    """The CLI, plus submitting a run."""

    def submit(self, name: str, body: str) -> str:
        spec = self.spec(name, body)
        r = self("run", "-f", str(spec))
        assert r.returncode == 0, r.stdout + r.stderr
        m = re.search(r"Run (\S+) submitted", r.stdout + r.stderr)
        assert m, r.stdout + r.stderr
        return m.group(1)


@pytest.fixture(scope="module")
def chromium() -> Iterator[object]:
    """A headless chromium for one test module (tests/ui/browser.py); skips without one."""
    from tests.ui.browser import browser, chromium_path

    executable = chromium_path()
    if executable is None:
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium; .ci/run installs it)")
    pytest.importorskip("playwright.sync_api", reason="needs playwright (the dev extra), which drives chromium")
    with browser(executable) as b:
        yield b


@pytest.fixture(scope="module")
def module_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    """A LAUNCHER_HOME for one test module, set in this process too (the app reads it)."""
    root = tmp_path_factory.mktemp("ui-home")
    (root / "home").mkdir()
    (root / "work").mkdir()
    runs = Runs(root / "home", root / "work")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LAUNCHER_HOME", str(root / "home"))
        yield runs


def gate_command(lines_before: int, lines_after: int, gate: Path) -> str:
    """A command that prints some lines, waits (at most a minute) for `gate` to exist, then
    prints more: a log that grows while a test watches."""
    return (
        f'for i in $(seq 1 {lines_before}); do echo "line $i"; done\n'
        f"for t in $(seq 1 600); do [ -e {gate} ] && break; sleep 0.1; done\n"
        f'for i in $(seq {lines_before + 1} {lines_before + lines_after}); do echo "line $i"; done\n'
    )


def metric_script(path: Path) -> Path:
    """A stand-in trainer: logs loss records as the built-in trainer does; the first attempt
    dies at step 6, the retry resumes from a checkpoint at step 4 and goes to step 300, its losses 3 higher."""
    path.write_text(
        "import json, os, time\n"
        f"marker = {str(path) + '.attempted'!r}\n"
        "retry = os.path.exists(marker)\n"
        "open(marker, 'w').close()\n"
        "steps = range(5, 301) if retry else range(1, 7)\n"
        "def rec(r): print('@@launcher.metrics ' + json.dumps(r), flush=True)\n"
        "rec({'event': 'fit_start', 'step': steps.start - 1, 'time': time.time(), 'rank': 0})\n"
        "for s in steps:\n"
        "    print(f'training step {s}')\n"
        "    rec({'step': s, 'time': time.time(), 'rank': 0,\n"
        "         'metrics': {'loss/train/total': 10.0 / s + (3.0 if retry else 0.0), 'lr': 0.001}})\n"
        "raise SystemExit(0 if retry else 7)\n"
    )
    return path


def sse_events(lines: Iterator[str]) -> Iterator[dict]:
    """Parse a text/event-stream into events: {event, id, data}."""
    event: dict = {}
    for line in lines:
        if line == "":
            if "data" in event:
                yield event
            event = {}
        elif line.startswith(":"):
            continue
        else:
            key, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            event[key] = event[key] + "\n" + value if key == "data" and key in event else value


def read_log(
    client: TestClient, url: str, *, until: int | None = None, headers: dict | None = None
) -> tuple[list[str], list[dict]]:
    """The log lines and events of a stream; with `until`, disconnect once that many lines came."""
    texts: list[str] = []
    events: list[dict] = []
    with client.stream("GET", url, headers=headers or {}, timeout=60) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        for ev in sse_events(r.iter_lines()):
            events.append(ev)
            if ev.get("event") == "lines":
                texts += [line["text"] for line in json.loads(ev["data"])["lines"]]
            if ev.get("event") == "end" or (until is not None and len(texts) >= until):
                break
    return texts, events
