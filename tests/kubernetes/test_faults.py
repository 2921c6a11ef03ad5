"""Fault scripts against the fake API server: dropped log streams, 410 Gone, a failed or
preempted pod (the group restarts), a pod that cannot be scheduled, secrets and images
that are missing, API errors, deadlines and a queue that suspends the Job."""

from __future__ import annotations

import time

import pytest

from launcher.backends.base import RunStatus
from launcher.errors import LauncherError
from launcher.secrets.kinds import Secret, SecretKind
from tests.conftest import wait_until
from tests.kubernetes.conftest import make_backend
from tests.kubernetes.test_backend import follow, run_spec, worker


def wait_for(backend, name: str, status: RunStatus, timeout: float = 30):
    """The run once it is `status`."""
    return wait_until(
        lambda: (run := backend.get(name)).status is status and run,
        timeout,
        interval=0.1,
        message=lambda: f"{name} to be {status} (it is {backend.get(name).status})",
    )


@pytest.mark.parametrize("resolution_ns", [1_000_000, 1_000_000_000], ids=["ms", "s"])
def test_dropped_log_stream_loses_and_repeats_no_line(fake_kube_factory, resolution_ns):
    # Coarse timestamps: many lines share one (with whole seconds, nearly all of them), so
    # a resume must count lines per timestamp, and new lines at that timestamp are not repeats.
    kube = fake_kube_factory(log_resolution_ns=resolution_ns)
    kube.faults.drop_logs_after = 7
    kube.faults.drop_logs_count = 3
    backend = make_backend()
    spec = run_spec("drops-abc123", worker("--lines", "60", "--interval", "0.002"), compute={"nodes": 2})
    backend.submit(spec, [])
    lines = list(backend.logs(spec.name, follow=True))
    assert kube.faults.drop_logs_count == 0, "the fault never fired"
    for r in (0, 1):
        mine = [ln.text for ln in lines if ln.rank == r and ln.text.startswith(f"rank {r} line")]
        assert mine == [f"rank {r} line {i}" for i in range(60)]
        assert [ln.text for ln in lines if ln.rank == r].count(f"rank {r} done") == 1
    backend.close()


def test_watch_relists_after_410_gone(fake_kube, backend):
    fake_kube.faults.gone_watches = 3
    spec = run_spec("gone-abc123", worker("--lines", "3", "--interval", "0.1"), compute={"nodes": 2})
    backend.submit(spec, [])
    lists_before = fake_kube.count(verb="list")
    seen = follow(backend, spec.name)
    assert seen[-1].status is RunStatus.COMPLETED
    assert fake_kube.faults.gone_watches == 0
    # Three informers listed once each, and again after each 410.
    assert fake_kube.count(verb="list") - lists_before >= 3 + 3


def test_failed_pod_restarts_the_group_as_attempt_2(fake_kube, backend):
    spec = run_spec(
        "retry-abc123",
        worker("--lines", "6", "--interval", "0.02", "--fail-rank", "1", "--fail-attempt", "1", "--fail-code", "3"),
        compute={"nodes": 2},
        scheduling={"max_retries": 1, "retry_backoff": {"first": "0.1s"}},
    )
    backend.submit(spec, [])
    seen = follow(backend, spec.name)
    final = seen[-1]
    assert final.status is RunStatus.COMPLETED, final.reason
    assert [(a.index, a.status) for a in final.attempts] == [(1, RunStatus.FAILED), (2, RunStatus.COMPLETED)]
    assert final.attempts[0].reason == "rank 1 exited with code 3"
    assert any(r.current_attempt == 2 for r in seen)
    # The JobSet controller deleted attempt 1's pods: without a log_store its log is gone, and
    # the error says so (tests/kubernetes/test_history.py reads it from an archive).
    with pytest.raises(LauncherError, match=r"attempt 1 is gone \(JobSet restart\); set log_store"):
        list(backend.logs(spec.name, attempt=1, rank=1))
    second = [ln.text for ln in backend.logs(spec.name, rank=1)]
    assert "rank 1 attempt 2 starting" in second and "rank 1 done" in second
    # The JobSet controller re-created its one child Job; the record still belongs to the JobSet.
    job = fake_kube.get("Job", "default", f"{spec.name}-node-0")
    assert job["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "1"
    jobset = fake_kube.get("JobSet", "default", spec.name)
    refs = fake_kube.get("ConfigMap", "default", spec.name)["metadata"]["ownerReferences"]
    assert [r["uid"] for r in refs] == [jobset["metadata"]["uid"]]


def test_retries_run_out(fake_kube, backend):
    spec = run_spec(
        "out-abc123",
        worker("--lines", "2", "--fail-rank", "0", "--fail-code", "5"),
        scheduling={"max_retries": 1, "retry_backoff": {"first": "0.1s"}},
    )
    backend.submit(spec, [])
    final = follow(backend, spec.name)[-1]
    assert final.status is RunStatus.FAILED and final.reason.startswith("rank 0 exited with code 5; "), final.reason
    assert [a.status for a in final.attempts] == [RunStatus.FAILED, RunStatus.FAILED]


def test_preemption_is_a_free_retry_with_retry_on_system_failure(fake_kube, backend):
    spec = run_spec(
        "preempt-abc123",
        worker("--lines", "40", "--interval", "0.05"),
        compute={"nodes": 2},
        scheduling={"max_retries": 0, "retry_on_system_failure": True, "retry_backoff": {"first": "0.1s"}},
    )
    backend.submit(spec, [])
    wait_for(backend, spec.name, RunStatus.RUNNING)
    pod = next(
        p
        for p in fake_kube.pods(labels=f"launcher.dev/run={spec.name}")
        if p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "1"
    )
    fake_kube.evict(pod["metadata"]["name"])
    final = follow(backend, spec.name, timeout=90)[-1]
    assert final.status is RunStatus.COMPLETED, final.reason
    assert [a.status for a in final.attempts] == [RunStatus.FAILED, RunStatus.COMPLETED]
    assert "stopped by the cluster" in final.attempts[0].reason


def test_unschedulable_pod_is_queued_with_the_scheduler_reason(fake_kube, backend):
    spec = run_spec("big-abc123", worker(), compute={"gpus": 16, "gpu_type": "h100_80gb"})
    backend.submit(spec, [])
    run = wait_for(backend, spec.name, RunStatus.QUEUED)
    assert "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector." in run.reason
    seen = next(iter(backend.watch(spec.name, poll_seconds=0.05)))
    assert seen.status is RunStatus.QUEUED and "didn't match" in seen.reason
    assert backend.stop(spec.name).status is RunStatus.STOPPED


def test_insufficient_gpus_are_explained(fake_kube_factory):
    nodes = [
        {
            "name": f"gpu-{i}",
            "gpus": 8,
            "labels": {"kubernetes.io/hostname": f"gpu-{i}", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        }
        for i in range(2)
    ]
    kube = fake_kube_factory(nodes=nodes)
    backend = make_backend()
    busy = run_spec(
        "busy-abc123", worker("--forever", "--interval", "0.2"), compute={"gpus": 16, "gpu_type": "h100_80gb"}
    )
    backend.submit(busy, [])
    wait_for(backend, busy.name, RunStatus.RUNNING)
    waiting = run_spec("waits-abc123", worker(), compute={"gpus": 8, "gpu_type": "h100_80gb"})
    backend.submit(waiting, [])
    run = wait_for(backend, waiting.name, RunStatus.QUEUED)
    assert "0/2 nodes are available: 2 Insufficient nvidia.com/gpu." in run.reason
    backend.stop(busy.name)
    # The GPUs come free: the queued run starts and completes.
    assert follow(backend, waiting.name)[-1].status is RunStatus.COMPLETED
    assert len(kube.nodes) == 2
    backend.close()


def test_missing_env_secret_fails_fast_and_clearly(fake_kube, backend):
    ghost = Secret("ghost", SecretKind.ENV, {"value": "never-created-value"}, {"env_key": "GHOST"})
    spec = run_spec("ghost-abc123", worker(), compute={"nodes": 2}, secrets=["ghost"])
    started = time.monotonic()
    backend.submit(spec, [ghost])
    final = follow(backend, spec.name)[-1]
    assert time.monotonic() - started < 15
    assert final.status is RunStatus.FAILED
    assert final.reason == 'rank 0: CreateContainerConfigError: secret "ghost" not found'
    # Nothing is left pending: the follower ended it (the JobSet and its Job are gone), the record stays.
    assert fake_kube.list("Job", "default", f"launcher.dev/run={spec.name}")[0] == []
    assert backend.get(spec.name).status is RunStatus.FAILED
    assert "never-created-value" not in str(fake_kube.objects)


def test_missing_file_secret_fails_fast(fake_kube, backend):
    ghost = Secret("ghost-file", SecretKind.FILE, {"value": "x"})
    spec = run_spec("ghostfile-abc123", worker(), secrets=["ghost-file"])
    backend.submit(spec, [ghost])
    final = follow(backend, spec.name)[-1]
    assert final.status is RunStatus.FAILED
    assert 'secret "ghost-file" not found' in final.reason


def test_image_pull_error_fails_fast(fake_kube, backend):
    fake_kube.faults.bad_images.add("ghcr.io/example/missing:1")
    spec = run_spec("pull-abc123", worker(), image="ghcr.io/example/missing:1")
    backend.submit(spec, [])
    final = follow(backend, spec.name)[-1]
    assert final.status is RunStatus.FAILED
    assert final.reason.startswith("rank 0: ErrImagePull: failed to pull")


def test_transient_api_errors_are_retried(fake_kube, backend):
    spec = run_spec("flaky-abc123", worker("--lines", "1"))
    fake_kube.faults.api_errors = 2
    backend.submit(spec, [])
    assert fake_kube.faults.api_errors == 0
    assert follow(backend, spec.name)[-1].status is RunStatus.COMPLETED


def test_max_duration_ends_the_run(fake_kube, backend):
    spec = run_spec(
        "slow-abc123",
        worker("--forever", "--interval", "0.1"),
        scheduling={"max_duration": 0.0005, "max_retries": 3, "retry_backoff": {"first": "0.1s"}},
    )
    backend.submit(spec, [])
    final = follow(backend, spec.name)[-1]
    assert final.status is RunStatus.FAILED
    assert final.reason.startswith("exceeded max_duration")
    assert len(final.attempts) == 1  # a deadline is not retried


def test_suspended_job_is_queued_not_failed(fake_kube_factory):
    kube = fake_kube_factory(profile={"queue": "team-a"})
    backend = make_backend()
    spec = run_spec("kueue-abc123", worker("--lines", "2"), compute={"nodes": 2})
    # Created suspended, as Kueue's webhook would make it, until Kueue admits it.
    submitted = backend.submit(spec, [])
    jobset = kube.get("JobSet", "default", spec.name)
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert jobset["spec"]["suspend"] is True
    # This fake serves no Kueue: the submit says nothing will admit it, and so does the run.
    assert any("serves no Kueue API (kueue.x-k8s.io)" in w for w in submitted.warnings), submitted.warnings
    run = wait_for(backend, spec.name, RunStatus.QUEUED)
    assert "Kueue (kueue.x-k8s.io) is not served by this cluster" in run.reason
    assert backend.get(spec.name).status is RunStatus.QUEUED  # the launcher never releases it
    assert kube.get("JobSet", "default", spec.name)["spec"]["suspend"] is True
    kube.patch("JobSet", "default", spec.name, {"spec": {"suspend": False}})  # admitted
    assert follow(backend, spec.name)[-1].status is RunStatus.COMPLETED
    backend.close()


def test_a_cut_one_shot_read_resumes_without_loss(fake_kube, backend):
    spec = run_spec("cut-abc123", worker("--lines", "40", "--interval", "0"), compute={"nodes": 1})
    backend.submit(spec, [])
    wait_for(backend, spec.name, RunStatus.COMPLETED)
    fake_kube.faults.drop_finished_reads = True
    fake_kube.faults.drop_logs_after = 9
    fake_kube.faults.drop_logs_count = 3
    lines = [ln.text for ln in backend.logs(spec.name) if ln.text.startswith("rank 0 line")]
    assert fake_kube.faults.drop_logs_count == 0, "the fault never fired"
    assert lines == [f"rank 0 line {i}" for i in range(40)]
