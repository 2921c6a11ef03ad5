"""Races between launcher processes: a stop during a retry's restart, two reconcilers at
once, and a reconciler that restarts a run while a read command looks at it."""

from __future__ import annotations

import threading
import time

from launcher.backends.base import RunStatus
from tests.conftest import wait_until
from tests.kubernetes.conftest import make_backend
from tests.kubernetes.test_backend import run_spec, worker

RESTART = "launcher.dev/restart"


def restarting(kube, name: str) -> bool:
    try:
        return bool((kube.get("ConfigMap", "default", name)["metadata"].get("annotations") or {}).get(RESTART))
    except Exception:  # noqa: BLE001 - not there yet
        return False


def test_stop_during_a_restart_lets_no_pod_of_the_next_attempt_run(fake_kube_factory):
    # The old Job takes a while to go (the orphan finalizer): the window in which another
    # launcher process, an eager reconciler here, waits to create attempt 2.
    kube = fake_kube_factory(orphan_delay=1.5)
    spec = run_spec(
        "race-abc123",
        worker("--lines", "2", "--fail-rank", "0", "--fail-attempt", "1"),
        scheduling={"max_retries": 1, "retry_backoff": {"first": "0.1s"}},
    )
    backend = make_backend()
    backend.submit(spec, [])
    observer = make_backend()
    done = threading.Event()

    def observe() -> None:
        while not done.is_set():
            try:
                observer.reconcile(spec.name)
            except Exception:  # noqa: BLE001 - a pass may race the stop; the next one sees it
                pass
            time.sleep(0.05)  # not a wait: the other process's cadence, a pass every 50 ms

    looker = threading.Thread(target=observe, daemon=True)
    looker.start()
    try:
        wait_until(lambda: restarting(kube, spec.name), timeout=30, message="the restart")
        stopped = backend.stop(spec.name)
        assert stopped.status is RunStatus.STOPPED
        # A stated window, kept as a sleep: past the old Job's deletion (1.5 s), when attempt 2
        # would be created, nothing creates it.
        time.sleep(3.0)
    finally:
        done.set()
        looker.join(10)
        observer.close()
    assert kube.pods(labels=f"launcher.dev/run={spec.name},launcher.dev/attempt=2") == []
    assert kube.list("Job", "default", f"launcher.dev/run={spec.name}")[0] == []
    final = backend.get(spec.name)
    assert final.status is RunStatus.STOPPED
    assert [a.index for a in final.attempts] == [1]
    backend.close()


def test_a_read_never_waits_for_somebody_elses_restart(fake_kube_factory):
    kube = fake_kube_factory(orphan_delay=3.0)
    spec = run_spec(
        "reader-abc123",
        worker("--lines", "2", "--fail-rank", "0", "--fail-attempt", "1"),
        scheduling={"max_retries": 1, "retry_backoff": {"first": "0.1s"}},
    )
    backend = make_backend()
    backend.submit(spec, [])
    # The attempt fails; a reconciler's pass starts the restart, and must not wait out the old
    # Job's deletion; nor must a read.
    reconciler = make_backend()
    wait_until(
        lambda: reconciler.reconcile(spec.name)[0].status is RunStatus.PENDING and restarting(kube, spec.name),
        timeout=30,
        message="the failure and restart",
    )
    for look in (backend.get, lambda name: reconciler.reconcile(name)[0]):
        started = time.monotonic()
        run = look(spec.name)
        took = time.monotonic() - started
        assert run.status is RunStatus.PENDING and run.reason == "restarting the group: attempt 2"
        assert took < 2.0, f"a look took {took:.1f}s"  # the old Job needs 3 s to go
    # The next passes carry the restart through: attempt 2 runs and completes.
    final = wait_until(
        lambda: (r := reconciler.reconcile(spec.name)[0]).status.is_terminal and r,
        timeout=60,
        message="the end of attempt 2",
    )
    reconciler.close()
    assert final.status is RunStatus.COMPLETED and [a.index for a in final.attempts] == [1, 2]
    backend.close()


def test_a_job_left_without_its_record_is_removed_once_no_submit_can_be_on_its_way(fake_kube):
    """A submit that died between the Job and its record (the cluster went away, so it could
    not clean up) leaves a Job whose pods wait for a ConfigMap forever."""
    from launcher.backends.kubernetes.render import plan_run

    backend = make_backend()
    young = run_spec("young-abc123", worker("--lines", "1"))
    old = run_spec("old-abc123", worker("--lines", "1"))
    for spec in (young, old):
        _, _, job = plan_run(spec, backend.profile, [], jobset=False).manifests  # the Job form
        fake_kube.create("Job", "default", job)
    with fake_kube.lock:  # time passes for one of them (an API server keeps creationTimestamp unchangeable)
        fake_kube.objects[("Job", "default", old.name)]["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"
    assert backend.get(young.name).status is not RunStatus.FAILED  # a submit may still be on its way
    seen = backend.get(old.name)  # a read says so, and leaves the Job to a reconciler
    assert seen.status is RunStatus.FAILED
    assert seen.reason == "its submit never finished (no record); its Job is left until `launcher reconcile` removes it"
    assert fake_kube.get("Job", "default", old.name) is not None
    [run] = backend.reconcile(old.name)
    assert run.status is RunStatus.FAILED and run.reason == "its submit never finished (no record); its Job was removed"
    wait_until(
        lambda: not fake_kube.list("Job", "default", f"launcher.dev/run={old.name}")[0],
        timeout=30,
        message="the Job's removal",
    )
    assert fake_kube.list("Job", "default", f"launcher.dev/run={young.name}")[0]
    backend.close()


def test_a_jobset_left_without_its_record_is_seen_and_removed(fake_kube_factory):
    """The same in the JobSet form: a JobSet whose record never came holds its nodes (its pods
    wait for the ConfigMap) and, having no record, was not even listed."""
    from launcher.backends.kubernetes.render import plan_run

    kube = fake_kube_factory(jobset=True, profile={"jobset": True})
    backend = make_backend()
    young = run_spec("young-abc123", worker("--lines", "1"))
    old = run_spec("old-abc123", worker("--lines", "1"))
    for spec in (young, old):
        jobset = plan_run(spec, backend.profile, [], jobset=True).manifests[-1]
        assert jobset["kind"] == "JobSet"
        kube.create("JobSet", "default", jobset)
    wait_until(
        lambda: kube.list("Job", "default", f"launcher.dev/run={old.name}")[0],
        timeout=30,
        message="the JobSet's child Job",
    )
    with kube.lock:
        kube.objects[("JobSet", "default", old.name)]["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"
    listed = {r.name: r for r in backend.list()}
    assert listed[young.name].status is not RunStatus.FAILED  # a submit may still be on its way
    assert listed[old.name].status is RunStatus.FAILED
    assert listed[old.name].reason == (
        "its submit never finished (no record); its JobSet is left until `launcher reconcile` removes it"
    )
    assert kube.get("JobSet", "default", old.name) is not None  # a listing only reads
    reconciled = {r.name: r for r in backend.reconcile()}
    assert reconciled[young.name].status is not RunStatus.FAILED
    assert reconciled[old.name].reason == "its submit never finished (no record); its JobSet was removed"
    wait_until(
        lambda: not kube.list("JobSet", "default", f"launcher.dev/run={old.name}")[0],
        timeout=30,
        message="the JobSet's removal",
    )
    wait_until(
        lambda: not kube.list("Job", "default", f"launcher.dev/run={old.name}")[0],
        timeout=30,
        message="its Job's removal",
    )
    assert kube.list("JobSet", "default", f"launcher.dev/run={young.name}")[0]
    assert backend.get(young.name).status is not RunStatus.FAILED
    backend.close()


def test_a_stop_while_the_next_attempt_is_being_created_wins(fake_kube):
    # The create of attempt 2's Job is held at the server; the stop comes and returns
    # meanwhile. The Job then appears, but held (suspended), and the restarter's
    # compare-and-swap on the record fails on the stop's write: the Job goes unstarted.
    spec = run_spec(
        "held-abc123",
        worker("--lines", "2", "--fail-rank", "0", "--fail-attempt", "1"),
        scheduling={"max_retries": 1, "retry_backoff": {"first": "0.1s"}},
    )
    backend = make_backend()
    backend.submit(spec, [])
    held = fake_kube.faults.inject("create", "jobs", delay=1.5, times=1)
    restarter = make_backend()
    failures: list[BaseException] = []

    def restart() -> None:
        try:
            wait_until(
                lambda: restarter.reconcile(spec.name)[0].current_attempt == 2 or held.fired,
                timeout=30,
                message="a restart",
            )
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            failures.append(e)

    looker = threading.Thread(target=restart, daemon=True)
    looker.start()
    wait_until(lambda: held.fired, timeout=30, message="the create of attempt 2")
    assert backend.stop(spec.name).status is RunStatus.STOPPED
    seen_pods = set()
    # A stated window, watched for 4 s: the held create lands, and is undone before a pod runs.
    deadline = time.monotonic() + 4.0
    while time.monotonic() < deadline:
        seen_pods |= {
            p["metadata"]["name"] for p in fake_kube.pods(labels=f"launcher.dev/run={spec.name},launcher.dev/attempt=2")
        }
        time.sleep(0.05)
    looker.join(30)
    restarter.close()
    assert not failures, failures
    assert seen_pods == set(), f"pods of attempt 2 ran after the stop: {sorted(seen_pods)}"
    wait_until(
        lambda: not fake_kube.list("Job", "default", f"launcher.dev/run={spec.name}")[0],
        timeout=30,
        message="the held Job's removal",
    )
    assert backend.get(spec.name).status is RunStatus.STOPPED
    backend.close()


def test_a_connection_cut_while_the_record_is_created_still_gives_one_whole_run(fake_kube):
    # The server goes away (connections cut, then refused for a moment) while the submit
    # creates the ConfigMap: the create is retried when the server is back, and the run
    # is whole (not a Job without its record, STARTING forever).
    backend = make_backend()
    spec = run_spec("cut-abc123", worker("--lines", "1"))
    held = fake_kube.faults.inject("create", "configmaps", delay=0.5, times=1)

    def cut_when_held() -> None:
        wait_until(lambda: held.fired, timeout=30, message="the ConfigMap create")
        fake_kube.faults.refuse_connections(0.7)

    cutter = threading.Thread(target=cut_when_held, daemon=True)
    cutter.start()
    backend.submit(spec, [])
    cutter.join(10)
    for kind in ("Job", "ConfigMap", "Service"):
        assert len(fake_kube.list(kind, "default", f"launcher.dev/run={spec.name}")[0]) == 1, kind
    final = wait_until(
        lambda: (r := backend.get(spec.name)).status.is_terminal and r, timeout=30, message="the run's end"
    )
    assert final.status is RunStatus.COMPLETED
    backend.close()
