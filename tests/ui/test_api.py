"""The dashboard's JSON API and pages, with Starlette's TestClient, over real local runs."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from launcher.ui.app import LOOPBACK_HOSTS, create_app
from launcher.ui.runs import RunsSource
from tests.conftest import wait_until
from tests.ui.conftest import Runs, gate_command, metric_script, read_log


class Named:
    def __init__(self, runs: Runs, tmp: Path):
        self.gate = tmp / "gate"
        self.failed = runs.submit(
            "fail",
            """\
            name: ui-fail
            command: |
              echo "about to fail"
              exit 3
            """,
        )
        self.trained = runs.submit(
            "metrics",
            f"""\
            name: ui-metrics
            command: python3 {metric_script(tmp / "fake_trainer.py")}
            scheduling: {{max_retries: 1, retry_backoff: {{first: 0.1s}}}}
            """,
        )
        self.gated = runs.submit(
            "gated",
            "name: ui-gated\ncommand: |\n"
            + "".join(f"  {line}\n" for line in gate_command(5, 5, self.gate).splitlines()),
        )
        runs.wait_status(self.failed, {"FAILED"}, timeout=120)
        runs.wait_status(self.trained, {"COMPLETED"}, timeout=120)
        runs.wait_status(self.gated, {"RUNNING"}, timeout=120)


@pytest.fixture(scope="module")
def named(module_runs: Runs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Named]:
    runs = Named(module_runs, tmp_path_factory.mktemp("ui-api"))
    yield runs
    runs.gate.touch()  # lets the gated run end, should a test have stopped early
    module_runs.wait_status(runs.gated, {"COMPLETED", "FAILED"}, timeout=120)


@pytest.fixture(scope="module")
def client(named: Named) -> Iterator[TestClient]:
    with TestClient(create_app(RunsSource())) as c:
        yield c


def test_runs_are_listed_newest_first_filtered_and_paged(client: TestClient, named: Named) -> None:
    body = client.get("/api/runs").json()
    assert [r["name"] for r in body["runs"]] == [named.gated, named.trained, named.failed]
    assert body["total"] == 3 and not body["more"] and body["older"] is None and body["clusters"] == ["local"]
    failed = body["runs"][2]
    assert failed["status"] == "FAILED" and failed["reason"] == "rank 0 exited with code 3"
    assert failed["nodes"] == 1 and failed["gpus"] == 0 and failed["cluster"] == "local"

    assert [r["name"] for r in client.get("/api/runs?status=failed").json()["runs"]] == [named.failed]
    assert [r["name"] for r in client.get("/api/runs?status=COMPLETED,FAILED").json()["runs"]] == [
        named.trained,
        named.failed,
    ]
    assert [r["name"] for r in client.get("/api/runs?name=metr").json()["runs"]] == [named.trained]
    assert [r["name"] for r in client.get("/api/runs?name=ui-*-*").json()["runs"]] == [
        named.gated,
        named.trained,
        named.failed,
    ]
    assert client.get("/api/runs?cluster=elsewhere").json()["total"] == 0
    second = client.get("/api/runs?per_page=2&page=2").json()
    assert [r["name"] for r in second["runs"]] == [named.failed] and second["total"] == 3 and not second["more"]

    bad = client.get("/api/runs?status=DONE")
    assert bad.status_code == 400 and "'DONE' is not a status" in bad.json()["error"]
    assert client.get("/api/runs?per_page=0").status_code == 400


def test_a_run_record_has_its_spec_attempts_ranks_and_events(client: TestClient, named: Named) -> None:
    rec = client.get(f"/api/runs/{named.failed}").json()
    assert rec["status"] == "FAILED" and rec["exit_code"] == 3
    assert rec["attempts"][0]["ranks"][0]["exit_code"] == 3
    assert "exit 3" in rec["spec"]["command"]
    assert [e["status"] for e in rec["events"]][-1] == "FAILED"

    retried = client.get(f"/api/runs/{named.trained}").json()
    assert [a["status"] for a in retried["attempts"]] == ["FAILED", "COMPLETED"]


def test_a_missing_run_is_404_everywhere(client: TestClient) -> None:
    for path in ("/api/runs/no-such-run", "/api/runs/no-such-run/metrics", "/api/runs/no-such-run/logs"):
        r = client.get(path)
        assert r.status_code == 404, path
        assert r.json()["error"] == "no run named 'no-such-run'"
    page = client.get("/runs/no-such-run")
    assert page.status_code == 404 and "no run named" in page.text


def test_metrics_are_downsampled_keeping_the_ends_and_mark_the_retry(client: TestClient, named: Named) -> None:
    body = client.get(f"/api/runs/{named.trained}/metrics").json()
    assert body["metrics"] == ["loss/train/total", "lr"] and body["status"] == "COMPLETED"
    (loss,) = body["series"]
    assert loss["metric"] == "loss/train/total" and loss["points"] == 300
    # Attempt 2 resumed at step 5: its points replace attempt 1's from there.
    assert loss["steps"] == list(range(1, 301))
    assert loss["values"][:4] == [10.0 / s for s in range(1, 5)] and loss["values"][-1] == 10.0 / 300 + 3.0
    assert body["restarts"] == [{"attempt": 2, "step": 5}]
    assert len(loss["smoothed"]) == 300 and loss["smoothed"][-1] > loss["values"][-1]

    few = client.get(f"/api/runs/{named.trained}/metrics?metric=loss/train/total&points=50&smoothing=0").json()
    (curve,) = few["series"]
    assert len(curve["steps"]) == 50 and curve["points"] == 300
    assert curve["steps"][0] == 1 and curve["steps"][-1] == 300 and curve["values"][-1] == 10.0 / 300 + 3.0
    assert "smoothed" not in curve
    # The jump where the retry took over (its losses are 3 higher) stays visible: attempt
    # 1's low point at step 4 is kept, and the points after it are higher.
    assert curve["steps"][1] == 4 and curve["values"][1] == 2.5 and curve["values"][2] > 4

    both = client.get(f"/api/runs/{named.trained}/metrics?metric=*").json()
    assert [s["metric"] for s in both["series"]] == ["loss/train/total", "lr"]

    unknown = client.get(f"/api/runs/{named.trained}/metrics?metric=loss/train/totl")
    assert unknown.status_code == 400 and "did you mean 'loss/train/total'" in unknown.json()["error"]
    assert client.get(f"/api/runs/{named.trained}/metrics?smoothing=1.5").status_code == 400

    none = client.get(f"/api/runs/{named.failed}/metrics").json()
    assert none["metrics"] == [] and none["series"] == []


def test_a_client_that_leaves_a_quiet_run_s_log_leaves_no_reader_behind(client: TestClient, named: Named) -> None:
    """The gated run waits, silent, after its fifth line: the thread that read its log for a
    client that left must end now, not at the run's next line (here: once a test opens the gate)."""
    before = {t.ident for t in threading.enumerate()}
    first, _ = read_log(client, f"/api/runs/{named.gated}/logs", until=6 + 5)
    assert first[-1] == "line 5"

    def readers() -> list[str]:
        return [t.name for t in threading.enumerate() if t.ident not in before and t.name == "log-stream"]

    wait_until(lambda: not readers(), 5, message=lambda: f"the log readers to end (left: {readers()})")


def test_log_stream_follows_and_a_reconnect_resumes_from_its_cursor(client: TestClient, named: Named) -> None:
    url = f"/api/runs/{named.gated}/logs"
    mine = lambda texts: [t for t in texts if not t.startswith("[launcher]")]  # noqa: E731 - the entrypoint's lines
    first, events = read_log(client, url, until=6 + 5)  # its six opening lines, then line 1-5
    assert mine(first) == [f"line {i}" for i in range(1, 6)]
    cursor = [e for e in events if e.get("event") == "lines"][-1]["id"]
    assert cursor == f"a1:0={len(first)}"

    named.gate.touch()
    rest, events = read_log(client, url, headers={"Last-Event-ID": cursor})
    assert mine(rest) == [f"line {i}" for i in range(6, 11)]
    assert rest[-1].startswith("[launcher] exit code 0")
    end = json.loads(events[-1]["data"])
    assert events[-1]["event"] == "end" and end["status"] == "COMPLETED" and end["attempt"] == 1

    # The whole log once more, without following: the two reads were it, nothing lost or repeated.
    everything, _ = read_log(client, url + "?follow=0")
    assert everything == first + rest
    last, _ = read_log(client, url + "?follow=0&tail=3")
    assert last == everything[-3:]
    assert read_log(client, url + f"?follow=0&cursor=a1:0={len(everything) - 1}")[0] == everything[-1:]
    assert client.get(url + "?cursor=somewhere").status_code == 400


def test_log_stream_picks_the_rank_and_the_attempt(client: TestClient, named: Named) -> None:
    url = f"/api/runs/{named.trained}/logs?follow=0"
    first, events = read_log(client, url + "&attempt=1&rank=0")
    assert [t for t in first if t.startswith("training step")] == [f"training step {s}" for s in range(1, 7)]
    assert json.loads(events[-1]["data"])["attempt"] == 1
    latest, _ = read_log(client, url)
    assert next(t for t in latest if t.startswith("training step")) == "training step 5"
    assert client.get(url + "&rank=1").status_code == 400
    assert client.get(url + "&attempt=3").status_code == 400


def test_the_log_view_hides_metric_records_unless_raw(client: TestClient, named: Named) -> None:
    url = f"/api/runs/{named.trained}/logs?follow=0"
    shown, events = read_log(client, url)
    raw, raw_events = read_log(client, url + "&raw=1")
    assert not [t for t in shown if "@@launcher.metrics" in t]
    assert len([t for t in raw if "@@launcher.metrics" in t]) == 1 + 296  # attempt 2: fit_start, steps 5..300
    assert shown == [t for t in raw if "@@launcher.metrics" not in t]
    assert "training step 300" in shown
    # The cursor counts the log as written, records too, so a reconnect resumes at the same place.
    assert events[-1]["id"] == raw_events[-1]["id"]
    # A tail counts the lines shown: the records between them take none of its places.
    last, _ = read_log(client, url + "&tail=3")
    assert last == shown[-3:]
    assert 'id="log-raw"' in client.get(f"/runs/{named.trained}").text


def test_pages_show_runs_statuses_and_a_run_in_full(client: TestClient, named: Named) -> None:
    page = client.get("/")
    assert page.status_code == 200
    rows = re.findall(r'<tr data-run="([^"]+)" data-status="([A-Z]+)"', page.text)
    assert rows[1:] == [(named.trained, "COMPLETED"), (named.failed, "FAILED")]
    assert 'class="status status-FAILED"' in page.text and "rank 0 exited with code 3" in page.text
    partial = client.get("/?status=FAILED&partial=rows")
    assert "<html" not in partial.text and named.failed in partial.text and named.trained not in partial.text
    paged = client.get("/?per_page=1&page=2&partial=rows").text  # page 2 by number, as a "newer" link asks it
    newer, older = re.findall(r'href="/\?([^"]+)"', paged)
    assert newer == "per_page=1", newer
    assert re.fullmatch(rf"per_page=1&amp;page=3&amp;before=[^&]+&amp;shown={named.trained}", older), older
    assert "page 2 · run 2 of more than 2" in paged

    run = client.get(f"/runs/{named.failed}")
    assert run.status_code == 200
    assert "exit 3" in run.text and "rank 0 exited with code 3" in run.text  # the spec, the reason
    assert re.search(
        r"<td>0</td><td>localhost</td>\s*<td><span class=\"status status-FAILED\">FAILED</span></td>\s*"
        r"<td>3</td>",
        run.text,
    )
    assert "/static/uplot/uPlot.iife.min.js" in run.text
    assert client.get("/static/uplot/uPlot.iife.min.js").status_code == 200
    assert client.get(f"/compare?runs={named.trained},{named.failed}").status_code == 200


def test_nothing_can_be_changed(client: TestClient, named: Named) -> None:
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        for path in ("/api/runs", f"/api/runs/{named.failed}", f"/runs/{named.failed}"):
            assert client.request(method, path).status_code == 405, (method, path)
    assert client.get(f"/api/runs/{named.failed}").json()["status"] == "FAILED"


def test_the_token_is_required_on_every_request(named: Named) -> None:
    app = create_app(RunsSource(), token="t0ken-for-tests")
    with TestClient(app) as c:
        for path in ("/", "/api/runs", f"/api/runs/{named.failed}/logs?follow=0", "/static/app.css"):
            assert c.get(path).status_code == 401, path
        assert c.get("/api/runs", headers={"X-Launcher-Token": "wrong"}).status_code == 401
        assert c.get("/api/runs", headers={"X-Launcher-Token": "t0ken-for-tests"}).status_code == 200
        assert c.get("/api/runs", headers={"Authorization": "Bearer t0ken-for-tests"}).status_code == 200
        # The address `launcher ui` prints: the token moves into a cookie and out of the URL.
        r = c.get("/?status=FAILED&token=t0ken-for-tests", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/?status=FAILED"
        assert "HttpOnly" in r.headers["set-cookie"] and "SameSite=strict" in r.headers["set-cookie"]
        assert c.get("/?status=FAILED").status_code == 200  # the cookie now
    with TestClient(app) as fresh:
        assert fresh.get("/api/runs?token=t0ken-for-tests").status_code == 200
        assert fresh.get("/api/runs").status_code == 200  # the API call set the cookie too


def test_a_loopback_dashboard_refuses_other_host_names(named: Named) -> None:
    app = create_app(RunsSource(), allowed_hosts=LOOPBACK_HOSTS)
    with TestClient(app, base_url="http://127.0.0.1:8765") as c:
        assert c.get("/api/runs").status_code == 200
    with TestClient(app, base_url="http://rebound.example:8765") as c:
        assert c.get("/api/runs").status_code == 400


def test_a_spec_name_means_its_latest_run_as_describe_takes_it(client: TestClient, named: Named) -> None:
    """`launcher describe run ui-fail` shows the latest run of the spec ui-fail; so do the
    dashboard's pages and API for that name."""
    record = client.get("/api/runs/ui-fail")
    assert record.status_code == 200, record.text
    assert record.json()["name"] == named.failed and record.json()["status"] == "FAILED"
    assert client.get("/api/runs/UI-Fail").json()["name"] == named.failed  # as describe takes a spec name
    assert client.get(f"/api/runs/{named.failed[:-3]}").json()["name"] == named.failed  # a unique start

    lines, _ = read_log(client, "/api/runs/ui-fail/logs?follow=0&tail=5")
    assert "about to fail" in lines
    assert client.get("/api/runs/ui-metrics/metrics").json()["run"] == named.trained

    # The page moves to the run's own address, so that it stays on that run.
    moved = client.get("/runs/ui-fail?tab=log", follow_redirects=False)
    assert moved.status_code == 307 and moved.headers["location"] == f"/runs/{named.failed}?tab=log"
    page = client.get("/runs/ui-fail")
    assert page.status_code == 200 and f'data-run="{named.failed}"' in page.text

    # A name that is none of them: 404 with describe's did-you-mean.
    missing = client.get("/api/runs/ui-fial")
    assert missing.status_code == 404
    assert missing.json() == {
        "error": "no run named 'ui-fial'",
        "hint": "did you mean 'ui-fail'? list runs with `launcher get runs`",
    }
