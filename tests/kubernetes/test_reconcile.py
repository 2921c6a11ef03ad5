"""Reads are reads, and reconciling is named: a run whose Job-form retry is due is shown as
such by get, list, logs and describe, which write nothing (a read-only identity can run
them); `launcher reconcile` and Backend.reconcile start the retry, from the Job kept at
submit; two reconcilers at once start attempt 2 once."""

from __future__ import annotations

import json
import threading

from launcher.backends.base import RunStatus
from launcher.cli.error_report import run_cli
from launcher.cli.main import cli
from tests.conftest import wait_until
from tests.kubernetes.conftest import make_backend
from tests.kubernetes.test_backend import run_spec, worker

WRITES = ("create", "update", "patch", "delete", "deletecollection")
DUE = "a retry is due (`launcher reconcile` starts it)"


def writes(kube) -> list[tuple[str, str, str]]:
    return [r for r in kube.requests if r[2] in WRITES]


def jobs_added(kube, name: str) -> list[dict]:
    """Every Job of the run the API server ever added, oldest first (its watch history)."""
    with kube.lock:
        return [
            obj
            for (_, kind, _, type_, obj) in kube.store.history
            if kind == "Job" and type_ == "ADDED" and obj["metadata"]["name"] == name
        ]


def failing_once(name: str, **fields):
    """Attempt 1 fails (rank 0 exits 3); attempt 2 completes."""
    return run_spec(
        name,
        worker("--lines", "2", "--fail-rank", "0", "--fail-attempt", "1", "--fail-code", "3"),
        scheduling={"max_retries": 1, "retry_backoff": {"first": "0.1s"}},
        **fields,
    )


def due(backend, name: str):
    run = backend.get(name)
    return run if run.reason and DUE in run.reason else None


def test_reads_of_a_run_whose_retry_is_due_write_nothing(fake_kube, capsys):
    backend = make_backend()
    spec = failing_once("due-abc123")
    backend.submit(spec, [])
    run = wait_until(lambda: due(backend, spec.name), 30, message="attempt 1 to fail with its retry due")
    assert run.status is RunStatus.PENDING
    assert run.reason == f"attempt 1 failed (rank 0 exited with code 3); {DUE}"
    before = len(writes(fake_kube))

    # Every read, from a fresh process's view: get, list, logs, describe and get runs.
    reader = make_backend()
    assert reader.get(spec.name).reason == run.reason
    assert {r.name: r.reason for r in reader.list()}[spec.name] == run.reason
    assert "rank 0 fails with code 3" in [ln.text for ln in reader.logs(spec.name, rank=0)]
    assert run_cli(cli, ["describe", spec.name]) == 0
    assert f"Status:     PENDING ({run.reason})" in capsys.readouterr().out
    assert run_cli(cli, ["get", "runs", "-o", "json"]) == 0
    assert [(r["name"], r["reason"]) for r in json.loads(capsys.readouterr().out)] == [(spec.name, run.reason)]
    for args in (["--attempt", "1"], []):  # the run waits, PENDING, but attempt 1 ran and keeps its logs
        assert run_cli(cli, ["logs", spec.name, *args]) == 0
        assert "rank 0 fails with code 3" in capsys.readouterr().out
    assert run_cli(cli, ["logs", spec.name, "-f"]) == 0  # attempt 1 is over: it ends, saying what is due
    assert f"attempt 1 of run {spec.name} ended (FAILED); the run is PENDING: {run.reason}" in capsys.readouterr().err
    assert writes(fake_kube)[before:] == [], "a read wrote to the cluster"
    assert [j["metadata"]["annotations"]["launcher.dev/attempt"] for j in jobs_added(fake_kube, spec.name)] == ["1"]

    # A read-only identity: every write is forbidden, and no read notices.
    for verb in WRITES:
        fake_kube.faults.inject(verb, None, status=403, times=0)
    readonly = make_backend()
    assert readonly.get(spec.name).reason == run.reason
    assert readonly.list()[0].name == spec.name
    assert run_cli(cli, ["get", "runs"]) == 0
    captured = capsys.readouterr()
    assert "403" not in captured.out + captured.err and "Forbidden" not in captured.out + captured.err
    fake_kube.faults.clear()

    # Reconciling is what starts attempt 2; it completes.
    # One pass carries the restart through (the old Job gone, attempt 2's Job created and
    # released), not just its first step: nothing else will act on the run after it.
    assert run_cli(cli, ["reconcile", spec.name]) == 0
    assert "attempt 2" in capsys.readouterr().out
    assert [j["metadata"]["annotations"]["launcher.dev/attempt"] for j in jobs_added(fake_kube, spec.name)] == [
        "1",
        "2",
    ]
    final = wait_until(
        lambda: (r := reader.get(spec.name)).status.is_terminal and r,
        60,
        message="the end of attempt 2, read without reconciling",
    )
    assert final.status is RunStatus.COMPLETED and [a.index for a in final.attempts] == [1, 2]
    for b in (backend, reader, readonly):
        b.close()


def test_two_reconcilers_at_once_start_attempt_2_once(fake_kube_factory):
    """Two reconcilers, each with its own client, see the same failure at once. The first
    write of the record (one of their restarts) is held at the server until the other has
    carried the whole restart through: it then lands on a record that changed, and the
    compare-and-swap (with the old Job's uid precondition behind it) turns it away."""
    kube = fake_kube_factory(orphan_delay=0.5)
    spec = failing_once("twice-abc123", compute={"nodes": 2})
    make_backend().submit(spec, [])
    looker = make_backend()
    wait_until(lambda: due(looker, spec.name), 30, message="attempt 1 to fail with its retry due")
    held = kube.faults.inject("patch", "configmaps", delay=4.0, times=1)
    start = threading.Barrier(2)
    outcomes: list[object] = []

    def reconciler() -> None:
        backend = make_backend()
        try:
            start.wait(10)
            outcomes.append(
                wait_until(
                    lambda: (r := backend.reconcile(spec.name)[0]).status.is_terminal and r,
                    60,
                    interval=0.01,
                    message="the run's end",
                )
            )
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            outcomes.append(e)
        finally:
            backend.close()

    threads = [threading.Thread(target=reconciler, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert held.fired == 1
    assert len(outcomes) == 2 and all(not isinstance(o, BaseException) for o in outcomes), outcomes
    assert [o.status for o in outcomes] == [RunStatus.COMPLETED] * 2
    added = [j["metadata"]["annotations"]["launcher.dev/attempt"] for j in jobs_added(kube, spec.name)]
    assert added == ["1", "2"], f"Jobs created: attempts {added}"
    assert len(kube.pods(labels=f"launcher.dev/run={spec.name},launcher.dev/attempt=2")) == 2
    job = kube.get("Job", "default", spec.name)
    assert job["metadata"]["annotations"]["launcher.dev/attempt"] == "2" and not job["metadata"].get(
        "deletionTimestamp"
    )
    # The late write was turned away: it neither recorded attempt 1 again nor restarted anything.
    notes = kube.get("ConfigMap", "default", spec.name)["metadata"]["annotations"]
    assert [a["index"] for a in json.loads(notes["launcher.dev/attempts"])] == [1]
    assert "launcher.dev/restart" not in notes
    assert [a.index for a in looker.get(spec.name).attempts] == [1, 2]
    looker.close()


def test_a_retry_is_the_job_kept_at_submit_not_the_reconcilers_profile(fake_kube, launcher_home):
    """The reconciler's profile differs from the submitter's (another image, another port):
    attempt 2 is still the Job the submit rendered, renumbered."""
    import yaml

    backend = make_backend()
    spec = failing_once("kept-abc123")
    backend.submit(spec, [])
    submitted = kube_job(fake_kube, spec.name)
    wait_until(lambda: due(backend, spec.name), 30, message="attempt 1 to fail with its retry due")
    config = launcher_home / "config.yaml"
    settings = yaml.safe_load(config.read_text())
    settings["clusters"]["fake"].update({"master_port": 29999, "service_account": "someone-elses"})
    config.write_text(yaml.safe_dump(settings))
    other = make_backend()
    wait_until(
        lambda: (r := other.reconcile(spec.name)[0]).status.is_terminal and r, 60, message="the end of attempt 2"
    )
    again = kube_job(fake_kube, spec.name)
    assert again["metadata"]["annotations"]["launcher.dev/attempt"] == "2"
    template, first = again["spec"]["template"], submitted["spec"]["template"]
    assert template["metadata"]["labels"]["launcher.dev/attempt"] == "2"
    env = {e["name"]: e.get("value") for e in template["spec"]["containers"][0]["env"]}
    assert env["LAUNCHER_ATTEMPT"] == "2"
    assert (
        env["MASTER_PORT"]
        == {e["name"]: e.get("value") for e in first["spec"]["containers"][0]["env"]}["MASTER_PORT"]
        != "29999"
    )
    assert template["spec"].get("serviceAccountName") == first["spec"].get("serviceAccountName")
    for b in (backend, other):
        b.close()


def kube_job(kube, name: str) -> dict:
    return kube.get("Job", "default", name)


def test_reconcile_watch_carries_a_run_through_its_retry_until_interrupted(fake_kube):
    """`launcher reconcile --watch`, as the in-cluster Deployment runs it: a separate process
    that prints each change and stops on SIGINT."""
    import os
    import signal
    import subprocess
    import sys

    backend = make_backend()
    spec = failing_once("watched-abc123")
    backend.submit(spec, [])
    wait_until(lambda: due(backend, spec.name), 30, message="attempt 1 to fail with its retry due")
    proc = subprocess.Popen(
        [sys.executable, "-m", "launcher", "reconcile", "--watch", "--cluster", "fake", "--every", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ,
    )
    try:
        final = wait_until(
            lambda: (r := backend.get(spec.name)).status.is_terminal and r,
            60,
            message="the reconciler to carry the run through attempt 2",
        )
        assert final.status is RunStatus.COMPLETED and [a.index for a in final.attempts] == [1, 2]
        assert proc.poll() is None, "reconcile --watch ended by itself"
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Stopped reconciling." in err
    lines = [ln for ln in out.splitlines() if spec.name in ln]
    # What it started is printed (its last pass may have come before or after the end).
    assert lines[0].startswith("PENDING") and lines[-1].endswith(f"{spec.name}  attempt 2"), out
    backend.close()


# Where each kind lives, as an RBAC rule names it.
RESOURCES = {
    "ConfigMap": ("", "configmaps"),
    "Pod": ("", "pods"),
    "Event": ("", "events"),
    "Service": ("", "services"),
    "Secret": ("", "secrets"),
    "Job": ("batch", "jobs"),
    "JobSet": ("jobset.x-k8s.io", "jobsets"),
}


def test_the_reconcilers_role_grants_what_its_passes_use(fake_kube):
    """docs/reconciler.yaml's Role against the requests of real passes (a retry, a run that
    cannot start, a Job a dead submit left): each request is granted, and each verb granted
    for the Job form is used."""
    from pathlib import Path

    import kubernetes_validate
    import yaml

    from launcher.backends.kubernetes.render import plan_run

    manifests = list(yaml.safe_load_all((Path(__file__).parents[2] / "docs" / "reconciler.yaml").read_text()))
    for manifest in manifests:
        kubernetes_validate.validate(manifest, kubernetes_validate.utils.latest_version(), strict=True)
    [profile] = [m for m in manifests if m["kind"] == "ConfigMap"]
    from launcher.backends.kubernetes.profiles import load_profile
    from launcher.config import Profile

    settings = yaml.safe_load(profile["data"]["config.yaml"])["clusters"]["cluster"]
    assert load_profile(Profile("cluster", settings.pop("backend"), settings)).namespace == "training"
    [role] = [m for m in manifests if m["kind"] == "Role"]
    granted = {
        (g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    }
    [deployment] = [m for m in manifests if m["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["command"][-4:] == [
        "reconcile",
        "--watch",
        "--cluster",
        "cluster",
    ]

    backend = make_backend()
    retried = failing_once("retried-abc123")
    fake_kube.faults.bad_images.add("ghcr.io/example/missing:1")
    unpulled = run_spec("unpulled-abc123", worker(), image="ghcr.io/example/missing:1")
    for spec in (retried, unpulled):
        backend.submit(spec, [])
    left = run_spec("left-abc123", worker("--lines", "1"))
    _, _, job = plan_run(left, backend.profile, [], jobset=False).manifests
    fake_kube.create("Job", "default", job)
    with fake_kube.lock:  # older than any submit still on its way
        fake_kube.objects[("Job", "default", left.name)]["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"
    wait_until(
        lambda: due(backend, retried.name) and backend.get(unpulled.name).status is RunStatus.FAILED,
        30,
        message="a retry due and a run that cannot start",
    )

    first = len(fake_kube.requests)
    reconciler = make_backend()
    final = wait_until(
        lambda: (runs := {r.name: r for r in reconciler.reconcile()})[retried.name].status.is_terminal and runs,
        60,
        interval=0.1,
        message="the passes to carry the retry through",
    )
    assert final[retried.name].status is RunStatus.COMPLETED
    for gone in (unpulled, left):
        wait_until(
            lambda: not fake_kube.list("Job", "default", f"launcher.dev/run={gone.name}")[0],
            10,
            message=f"the Job of {gone.name} to go",
        )
    used = {(*RESOURCES[kind], verb) for _, kind, verb in fake_kube.requests[first:]}
    assert used - granted == set(), "the Role lacks these"
    assert {g for g in granted if g[0] != "jobset.x-k8s.io"} - used == set(), "the Role grants more than is used"
    for b in (backend, reconciler):
        b.close()


def test_a_record_from_before_the_kept_job_is_retried_by_rendering_it_again(fake_kube):
    """A run an older launcher submitted has no `launcher.dev/job` in its record: its retry
    is rendered again from the spec, with the reconciler's profile, as every retry was then."""
    backend = make_backend()
    spec = failing_once("older-abc123")
    backend.submit(spec, [])
    fake_kube.patch("ConfigMap", "default", spec.name, {"metadata": {"annotations": {"launcher.dev/job": None}}})
    assert "launcher.dev/job" not in fake_kube.get("ConfigMap", "default", spec.name)["metadata"]["annotations"]
    wait_until(lambda: due(backend, spec.name), 30, message="attempt 1 to fail with its retry due")
    final = wait_until(
        lambda: (r := backend.reconcile(spec.name)[0]).status.is_terminal and r, 60, message="the end of attempt 2"
    )
    assert final.status is RunStatus.COMPLETED and [a.index for a in final.attempts] == [1, 2]
    assert fake_kube.get("Job", "default", spec.name)["metadata"]["annotations"]["launcher.dev/attempt"] == "2"
    backend.close()
