"""The runs page over a history longer than a page: it lists one page at a time (older
pages through a created_at cursor), searches the whole history server-side, and its update
stream carries only the runs that changed."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from launcher import sdk
from launcher.ui.app import create_app
from launcher.ui.runs import RunsSource
from tests.conftest import wait_until
from tests.ui.conftest import Runs, gate_command, sse_events

RUNS = 12
PER_PAGE = 5


@dataclass
class History:
    names: list[str]
    """Newest first; names[-1], the oldest, is the only one named `paging-needle`."""
    gated: str
    """The newest run: RUNNING until `gate` exists."""
    gate: Path


@pytest.fixture(scope="module")
def history(module_runs: Runs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[History]:
    gate = tmp_path_factory.mktemp("ui-paging") / "gate"
    names = [sdk.create_run({"name": "paging-needle", "command": "true"}, backend="local").name]
    names += [sdk.create_run({"name": "paging", "command": "true"}, backend="local").name for _ in range(RUNS - 2)]
    command = gate_command(1, 1, gate)
    names.append(sdk.create_run({"name": "paging-gated", "command": command}, backend="local").name)
    for name in names[:-1]:
        module_runs.wait_status(name, {"COMPLETED"}, timeout=120)
    module_runs.wait_status(names[-1], {"RUNNING"}, timeout=120)
    yield History(names[::-1], names[-1], gate)
    gate.touch()
    module_runs.wait_status(names[-1], {"COMPLETED"}, timeout=120)


@pytest.fixture(scope="module")
def client(history: History) -> Iterator[TestClient]:
    # max_age=0: every listing is fresh (a page is otherwise kept a second), so a test sees a change at once.
    with TestClient(create_app(RunsSource(max_age=0))) as c:
        yield c


def rows(page: str) -> list[str]:
    return re.findall(r'<tr data-run="([^"]+)"', page)


def nav(page: str) -> tuple[str, str | None, str | None]:
    """The navigation line's words, and its newer and older links."""
    words = re.search(r'<nav class="pages".*?<span>(.*?)</span>', page, re.S)
    assert words, page
    newer = re.search(r'<a href="([^"]+)" data-page="\d+">‹ newer</a>', page)
    older = re.search(r'<a href="([^"]+)" data-page="\d+">older ›</a>', page)
    return words.group(1), newer and html.unescape(newer.group(1)), older and html.unescape(older.group(1))


def test_the_runs_page_shows_page_one_of_many_and_links_each_next(client: TestClient, history: History) -> None:
    every = [r.name for r in sdk.get_runs()]  # newest first; other tests may have added some
    assert every[-RUNS:] == history.names and len(every) > 2 * PER_PAGE
    first = client.get(f"/?per_page={PER_PAGE}").text
    assert rows(first) == every[:PER_PAGE]
    words, newer, older = nav(first)
    assert words == f"page 1 · runs 1–{PER_PAGE} of more than {PER_PAGE}" and newer is None and older

    # Each "older" link to the last page: every run once, in order, each page's words its place.
    shown, number = rows(first), 1
    while older is not None:
        assert "before=" in older and f"page={number + 1}" in older
        page = client.get(older).text
        number += 1
        assert rows(page) == every[len(shown) : len(shown) + PER_PAGE]
        start, end = len(shown) + 1, len(shown) + len(rows(page))
        shown += rows(page)
        words, newer, older = nav(page)
        of = f"of more than {end}" if older else f"of {len(every)}"
        assert words == f"page {number} · runs {start}–{end} {of}" or words == f"page {number} · run {start} {of}"
        assert newer == (f"/?per_page={PER_PAGE}" if number == 2 else f"/?per_page={PER_PAGE}&page={number - 1}")
        assert rows(client.get(newer).text) == every[(number - 2) * PER_PAGE : (number - 1) * PER_PAGE]
    assert shown == every and number == (len(every) + PER_PAGE - 1) // PER_PAGE

    body = client.get(f"/api/runs?per_page={PER_PAGE}").json()
    assert [r["name"] for r in body["runs"]] == every[:PER_PAGE]
    assert body["more"] and body["total"] is None and body["first"] == 1
    assert client.get("/?before=yesterday").status_code == 400


def test_search_finds_a_run_past_the_first_page(client: TestClient, history: History) -> None:
    needle = history.names[-1]  # the oldest: on the last page
    assert needle not in rows(client.get(f"/?per_page={PER_PAGE}").text)
    found = client.get(f"/?per_page={PER_PAGE}&name=needle").text
    assert rows(found) == [needle] and nav(found)[0] == "page 1 · run 1 of 1"
    assert [r["name"] for r in client.get("/api/runs?per_page=5&name=paging-ne*dle-*").json()["runs"]] == [needle]
    done = client.get(f"/api/runs?per_page={PER_PAGE}&status=COMPLETED&name=needle").json()
    assert [r["name"] for r in done["runs"]] == [needle] and done["total"] == 1
    assert client.get(f"/api/runs?per_page={PER_PAGE}&status=FAILED&name=needle").json()["runs"] == []


def runs_events(client: TestClient, url: str, wanted: int) -> list[dict]:
    """The first `wanted` `runs` events' data of the update stream at `url`."""
    got: list[dict] = []
    with client.stream("GET", url, timeout=60) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        for ev in sse_events(r.iter_lines()):
            if ev.get("event") == "runs":
                got.append({"id": ev["id"], **json.loads(ev["data"])})
                if len(got) == wanted:
                    return got
    raise AssertionError(f"the stream ended after {got}")


def test_an_update_after_a_status_change_carries_that_run_only(client: TestClient, history: History) -> None:
    page = client.get(f"/?per_page={PER_PAGE}").text
    view = re.search(r'data-view="([^"]+)"', page).group(1)
    assert f'<tr data-run="{history.gated}" data-status="RUNNING"' in page

    history.gate.touch()
    wait_until(lambda: sdk.get_run(history.gated).status.value == "COMPLETED", 60, message="the gated run to end")
    (update,) = runs_events(client, f"/api/events/runs?per_page={PER_PAGE}&since={view}", 1)
    assert [c["name"] for c in update["changed"]] == [history.gated]
    assert f'data-run="{history.gated}" data-status="COMPLETED"' in update["changed"][0]["html"]
    assert "removed" not in update and "reset" not in update and "nav" not in update

    # From that event's view on (a reconnect's Last-Event-ID), a new run is the one change,
    # and the run it pushes off the page the one removed.
    on_page = [r["name"] for r in client.get(f"/api/runs?per_page={PER_PAGE}").json()["runs"]]
    new = sdk.create_run({"name": "paging-new", "command": "true"}, backend="local").name
    wait_until(lambda: sdk.get_run(new).status.value == "COMPLETED", 60, message="the new run to end")
    url = f"/api/events/runs?per_page={PER_PAGE}"
    (added,) = runs_events(client, url + "&since=unknown", 1)  # an unknown view: the page whole
    assert rows(added["reset"]) == [new, *on_page[: PER_PAGE - 1]]
    with client.stream("GET", url, headers={"Last-Event-ID": update["id"]}, timeout=60) as r:
        ev = next(e for e in sse_events(r.iter_lines()) if e.get("event") == "runs")
    data = json.loads(ev["data"])
    assert [c["name"] for c in data["changed"]] == [new]
    assert data["removed"] == [on_page[PER_PAGE - 1]] and "before=" in data["nav"]


@pytest.fixture
def chromium_page() -> Iterator[object]:
    """A page of headless chromium, under the dashboard's CSP (no bypass: locators wait
    without eval); what the page said on its console is in `page.said`."""
    from tests.ui.browser import browser, chromium_path

    executable = chromium_path()
    if executable is None:
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    pytest.importorskip("playwright.sync_api", reason="needs playwright (the dev extra), which drives chromium")
    with browser(executable) as b:
        context = b.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.said = []
        page.on("console", lambda m: page.said.append(m.text))
        page.on("pageerror", lambda e: page.said.append(str(e)))
        yield page
        context.close()


def test_the_page_patches_its_rows_in_place(module_runs: Runs, history: History, chromium_page, tmp_path) -> None:
    """In chromium: a run that ends turns COMPLETED in its row, a new run appears on top and
    the last row leaves, without a reload, under the page's CSP."""
    from tests.ui.browser import dashboard

    page = chromium_page
    gate = tmp_path / "gate"
    gated = sdk.create_run({"name": "paging-live", "command": gate_command(1, 1, gate)}, backend="local").name
    module_runs.wait_status(gated, {"RUNNING"}, timeout=120)
    with dashboard(module_runs.home, "--no-token") as url:
        page.goto(url + f"?per_page={PER_PAGE}")
        row = page.locator(f'tr[data-run="{gated}"]')
        assert row.locator(".status").text_content() == "RUNNING"
        page.evaluate("window.__notReloaded = true")
        before = page.locator("tr[data-run]").all_text_contents()
        gate.touch()
        page.locator(f'tr[data-run="{gated}"][data-status="COMPLETED"]').wait_for()
        new = sdk.create_run({"name": "paging-live-new", "command": "true"}, backend="local").name
        page.locator(f'tr[data-run="{new}"][data-status="COMPLETED"]').wait_for()
        names = page.eval_on_selector_all("tr[data-run]", "rows => rows.map(r => r.dataset.run)")
        assert names[0] == new and len(names) == PER_PAGE and len(before) == PER_PAGE
        assert page.evaluate("window.__notReloaded === true")
        assert re.fullmatch(r"\d+s ago", row.locator("td.ago").text_content() or "")
        page.screenshot(path=str(tmp_path / "runs-patched.png"), full_page=True)
    assert not [m for m in page.said if "Content Security Policy" in m or "Refused to" in m], page.said
