"""The dashboard over a Kubernetes profile (the fake API server): the same pages and API,
through the same Backend contract, with ranks that are pods."""

from __future__ import annotations

from starlette.testclient import TestClient

from launcher.backends.base import RunStatus
from launcher.ui.app import create_app
from launcher.ui.runs import RunsSource
from tests.kubernetes.conftest import make_backend
from tests.kubernetes.test_backend import follow, run_spec, worker
from tests.ui.conftest import read_log


def test_a_two_pod_run_is_listed_and_its_log_resumes_per_rank(fake_kube) -> None:
    backend = make_backend()
    try:
        run = backend.submit(run_spec("ui-k8s", worker("--lines", "6", "--interval", "0.02"), compute={"nodes": 2}), [])
        follow(backend, run.name)
    finally:
        backend.close()
    with TestClient(create_app(RunsSource())) as c:
        (row,) = [r for r in c.get("/api/runs").json()["runs"] if r["name"] == run.name]
        assert row["cluster"] == "fake" and row["status"] == "COMPLETED" and row["nodes"] == 2
        assert c.get(f"/api/runs/{run.name}").json()["attempts"][0]["ranks"][1]["exit_code"] == 0

        url = f"/api/runs/{run.name}/logs?follow=0"
        both, events = read_log(c, url)
        assert {f"rank {r} line 5" for r in (0, 1)} <= set(both)
        per_rank = {r: read_log(c, url + f"&rank={r}")[0] for r in (0, 1)}
        assert sorted(both) == sorted(per_rank[0] + per_rank[1])
        assert events[-1]["id"] == f"a1:0={len(per_rank[0])},1={len(per_rank[1])}"

        # Resuming from the middle of each rank gives each rank's rest, once.
        half = {r: len(lines) // 2 for r, lines in per_rank.items()}
        rest, _ = read_log(c, url + f"&cursor=a1:0={half[0]},1={half[1]}")
        assert sorted(rest) == sorted(per_rank[0][half[0] :] + per_rank[1][half[1] :])
        assert "rank 0 line 5" in rest and "rank 1 line 5" in rest


def test_the_dashboard_shows_a_restarted_run_and_writes_nothing(fake_kube) -> None:
    """The dashboard only reads: a run the JobSet controller restarted is shown with both
    attempts, and none of the dashboard's requests writes to the cluster."""
    from tests.conftest import wait_until

    backend = make_backend()
    spec = run_spec(
        "ui-restarted",
        worker("--lines", "1", "--fail-rank", "0", "--fail-attempt", "1"),
        scheduling={"max_retries": 1},
    )
    try:
        backend.submit(spec, [])
        wait_until(
            lambda: backend.get(spec.name).status is RunStatus.COMPLETED,
            60,
            message="attempt 2 to complete",
        )
        before = len(fake_kube.requests)
        with TestClient(create_app(RunsSource())) as c:
            (row,) = [r for r in c.get("/api/runs").json()["runs"] if r["name"] == spec.name]
            assert row["status"] == "COMPLETED"
            detail = c.get(f"/api/runs/{spec.name}").json()
            assert [a["attempt"] for a in detail["attempts"]] == [1, 2], detail
            read_log(c, f"/api/runs/{spec.name}/logs?follow=0")
        writes = [r for r in fake_kube.requests[before:] if r[2] not in ("get", "list", "watch", "log")]
        assert len(fake_kube.requests) > before and writes == []
    finally:
        backend.close()


def test_the_log_and_curve_of_a_run_whose_pods_are_gone_come_from_its_archive(fake_kube_factory, tmp_path) -> None:
    """With a log_store, the dashboard shows a finished run's log and loss curve after its pods
    are gone (here deleted, as a TTL or a node drain does), each line once."""
    from pathlib import Path

    from tests.conftest import wait_until

    kube = fake_kube_factory(profile={"log_store": str(tmp_path / "archive")})
    backend = make_backend()
    repo = Path(__file__).resolve().parents[2]
    try:
        run = backend.submit(
            run_spec(
                "ui-archived",
                worker("--lines", "8", "--interval", "0.02", "--metrics"),
                compute={"nodes": 2},
                env_variables={"PYTHONPATH": str(repo)},
            ),
            [],
        )
        follow(backend, run.name)
        with TestClient(create_app(RunsSource())) as c:
            live, _ = read_log(c, f"/api/runs/{run.name}/logs?follow=0")
        backend.api.delete_collection("Pod", f"launcher.dev/run={run.name}")
        wait_until(lambda: kube.pods(labels=f"launcher.dev/run={run.name}") == [], 30, message="the pods to go")
    finally:
        backend.close()
    with TestClient(create_app(RunsSource())) as c:
        archived, _ = read_log(c, f"/api/runs/{run.name}/logs?follow=0")
        assert sorted(archived) == sorted(live) and {f"rank {r} line 7" for r in (0, 1)} <= set(archived)
        per_rank = [read_log(c, f"/api/runs/{run.name}/logs?follow=0&rank={r}")[0] for r in (0, 1)]
        assert [t for t in per_rank[1] if t.startswith("rank 1 line")] == [f"rank 1 line {i}" for i in range(8)]
        body = c.get(f"/api/runs/{run.name}/metrics").json()
        (loss,) = body["series"]
        assert loss["metric"] == "loss/train/total" and loss["steps"] == list(range(8))
