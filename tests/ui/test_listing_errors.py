"""The dashboard when listing the runs fails as a whole (a bug, or the launcher's own state):
the API and the pages say so, instead of showing the runs listed before, which may be stale."""

from __future__ import annotations

import html
import sqlite3
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from launcher.ui.app import create_app
from launcher.ui.runs import RunsSource
from tests.conftest import wait_until
from tests.ui.conftest import Runs

ERROR = "internal error: ValueError: 'ARCHIVED' is not a valid RunStatus"


def set_status(home: Path, name: str, status: str) -> None:
    with sqlite3.connect(home / "state.db") as db:
        db.execute("UPDATE runs SET status = ? WHERE name = ?", (status, name))


def test_a_failed_listing_shows_its_error_until_a_listing_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("LAUNCHER_HOME", str(home))
    runs = Runs(home, work)
    name = runs.submit("done", "name: ui-listed\ncommand: echo listed\n")
    runs.wait_status(name, {"COMPLETED"}, timeout=120)
    # A bug answers 500 (and the server logs it), as uvicorn serves it: not raised here.
    with TestClient(create_app(RunsSource(max_age=0)), raise_server_exceptions=False) as client:
        assert [r["name"] for r in client.get("/api/runs").json()["runs"]] == [name]

        # A status this launcher does not know (as a newer one might write): listing fails on it.
        set_status(home, name, "ARCHIVED")
        failed = wait_until(
            lambda: (r := client.get("/api/runs")).status_code == 500 and r,
            timeout=30,
            message="the API to answer the listing's error",
        )
        assert failed.json() == {"error": ERROR}
        for path in ("/", "/?partial=rows"):
            page = client.get(path)
            assert page.status_code == 500
            assert ERROR in html.unescape(page.text) and name not in page.text
        assert client.get(f"/api/runs/{name}").status_code == 500  # the run itself cannot be read either

        set_status(home, name, "COMPLETED")
        listed = wait_until(
            lambda: (r := client.get("/api/runs")).status_code == 200 and r,
            timeout=30,
            message="a listing to succeed again",
        )
        assert [r["name"] for r in listed.json()["runs"]] == [name]
        assert name in client.get("/").text
