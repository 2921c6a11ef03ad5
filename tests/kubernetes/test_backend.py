"""The Kubernetes backend end to end: the real kubernetes client against the fake API server,
whose kubelet runs each pod's entrypoint as a local process."""

from __future__ import annotations

import shlex
import time

import pytest

from launcher.backends.base import RunStatus
from launcher.backends.kubernetes.secrets import KubernetesSecretStore
from launcher.config import load_config
from launcher.errors import InputError, NotFoundError
from launcher.secrets.kinds import Secret, SecretKind
from launcher.spec.models import RunSpec
from tests.conftest import wait_until
from tests.kubernetes.specs import WORKER

SECRET = "tok-Very-Secret-987"


def worker(*args: str) -> str:
    return shlex.join(["python", str(WORKER), *args])


def run_spec(name: str, command: str, **fields) -> RunSpec:
    return RunSpec.model_validate({"name": name, "command": command, **fields})


def follow(backend, name: str, timeout: float = 60) -> list:
    """The run's statuses until it ends, as `run --follow` sees them."""
    seen = []
    start = time.monotonic()
    for run in backend.watch(name, poll_seconds=0.05):
        seen.append(run)
        assert time.monotonic() - start < timeout, f"{name} did not end in {timeout}s: {seen[-1]}"
    return seen


def test_two_node_run_completes_with_both_ranks_logs_and_masked_secret(backend, fake_kube):
    store = KubernetesSecretStore(load_config().profile("fake"))
    secret = Secret("api-token", SecretKind.ENV, {"value": SECRET}, {"env_key": "API_TOKEN"})
    store.create(secret)
    spec = run_spec(
        "hello-abc123",
        worker("--lines", "5", "--interval", "0.05", "--print-env", "API_TOKEN"),
        compute={"nodes": 2},
        secrets=["api-token"],
    )
    run = backend.submit(spec, store.for_run(["api-token"]))
    assert run.status is RunStatus.PENDING and run.backend == "kubernetes"

    lines = list(backend.logs(run.name, follow=True))
    seen = follow(backend, run.name)
    assert seen[-1].status is RunStatus.COMPLETED and seen[-1].exit_code == 0

    by_rank = {r: [ln.text for ln in lines if ln.rank == r] for r in (0, 1)}
    for r in (0, 1):
        assert [t for t in by_rank[r] if t.startswith(f"rank {r} line")] == [f"rank {r} line {i}" for i in range(5)]
        assert "the secret is ****" in by_rank[r]
    assert not any(SECRET in ln.text for ln in lines)
    # Masked at the source: the value never reached the pod log either.
    assert not any(SECRET in text for c in fake_kube.containers.values() for _, text in c.lines)
    assert all(ln.timestamp is not None and ln.attempt == 1 for ln in lines)

    final = backend.get(run.name)
    assert final.status is RunStatus.COMPLETED
    assert [r.status for r in final.attempts[0].ranks] == [RunStatus.COMPLETED, RunStatus.COMPLETED]
    assert {e.status for e in final.events} >= {RunStatus.PENDING, RunStatus.RUNNING, RunStatus.COMPLETED}
    assert final.spec["name"] == run.name

    # Non-follow logs, one rank, and a tail.
    rank1 = list(backend.logs(run.name, rank=1))
    assert {ln.rank for ln in rank1} == {1} and "rank 1 done" in [ln.text for ln in rank1]
    assert len(list(backend.logs(run.name, rank=0, tail=2))) == 2


def test_failed_rank_fails_the_run_with_its_exit_code(backend, fake_kube):
    spec = run_spec(
        "fails-abc123", worker("--lines", "4", "--fail-rank", "1", "--fail-code", "3"), compute={"nodes": 2}
    )
    backend.submit(spec, [])
    seen = follow(backend, spec.name)
    final = seen[-1]
    assert final.status is RunStatus.FAILED
    assert final.reason.startswith("rank 1 exited with code 3; "), final.reason  # and what the JobSet says
    assert final.exit_code == 3
    assert len(final.attempts) == 1
    assert "rank 1 fails with code 3" in [ln.text for ln in backend.logs(spec.name, rank=1)]
    # --previous: with restartPolicy Never the crashed container is the pod's only one.
    assert "rank 1 fails with code 3" in [ln.text for ln in backend.logs(spec.name, rank=1, previous=True)]


def test_stop_keeps_the_record_and_delete_removes_everything(backend, fake_kube):
    spec = run_spec("forever-abc123", worker("--forever", "--interval", "0.05"), compute={"nodes": 2})
    backend.submit(spec, [])
    for run in backend.watch(spec.name, poll_seconds=0.05):
        if run.status is RunStatus.RUNNING:
            break
    stopped = backend.stop(spec.name)
    assert stopped.status is RunStatus.STOPPED
    assert stopped.reason == "stopped by the user", stopped.warnings
    wait_until(
        lambda: fake_kube.pods(labels=f"launcher.dev/run={spec.name}") == [],
        20,
        interval=0.1,
        message="the stopped run's pods to go",
    )
    again = backend.get(spec.name)
    assert again.status is RunStatus.STOPPED and again.attempts[-1].status is RunStatus.STOPPED
    assert [r.name for r in backend.list()] == [spec.name]
    assert backend.stop(spec.name).status is RunStatus.STOPPED  # stopping twice is harmless
    # No log_store: the stopped attempt's log is kept with the record.
    kept = fake_kube.list("ConfigMap", "default", f"launcher.dev/logs-of={spec.name}")[0]
    assert [k["metadata"]["name"] for k in kept] == [f"{spec.name}-logs-1"]

    backend.delete(spec.name)
    with pytest.raises(NotFoundError):
        backend.get(spec.name)
    for kind in ("JobSet", "Job", "ConfigMap", "Pod"):
        assert fake_kube.list(kind, "default", f"launcher.dev/run={spec.name}")[0] == []
    assert fake_kube.list("ConfigMap", "default", f"launcher.dev/logs-of={spec.name}")[0] == []
    with pytest.raises(NotFoundError):
        backend.delete(spec.name)


def test_submit_creates_a_jobset_and_its_record_owned_by_it(backend, fake_kube):
    spec = run_spec("owned-abc123", worker("--lines", "1"), compute={"nodes": 3})
    before = fake_kube.count(method="POST")
    backend.submit(spec, [])
    assert fake_kube.count(method="POST") - before == 2
    jobset = fake_kube.get("JobSet", "default", spec.name)
    refs = fake_kube.get("ConfigMap", "default", spec.name)["metadata"]["ownerReferences"]
    assert refs == [
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "name": spec.name,
            "uid": jobset["metadata"]["uid"],
            "controller": False,
        }
    ]
    with pytest.raises(InputError, match="already exists"):
        backend.submit(spec, [])
    assert follow(backend, spec.name)[-1].status is RunStatus.COMPLETED
    # Deleting the JobSet alone (background) takes the ConfigMap with it.
    backend.api.delete("JobSet", spec.name, propagation="Background")
    wait_until(
        lambda: fake_kube.list("ConfigMap", "default", f"launcher.dev/run={spec.name}")[0] == [],
        10,
        message="the ConfigMap to go with its JobSet",
    )
    assert fake_kube.list("Service", "default", f"launcher.dev/run={spec.name}")[0] == []


def test_list_is_newest_first(backend, fake_kube):
    backend.submit(run_spec("first-abc123", "true"), [])
    # creationTimestamp has one-second resolution: the second run is created a second later.
    submitted = int(time.time())
    wait_until(lambda: int(time.time()) > submitted, 5, message="the next whole second")
    backend.submit(run_spec("second-abc123", "true"), [])
    names = [r.name for r in backend.list()]
    assert names == ["second-abc123", "first-abc123"]
    assert all(r.cluster == "fake" for r in backend.list())


def test_unknown_run_is_not_found(backend):
    with pytest.raises(NotFoundError, match="no run named 'nope' in namespace default of cluster fake"):
        backend.get("nope")
