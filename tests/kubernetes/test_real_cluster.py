"""The same scenarios against a real cluster (kind, with CPU pods), when KUBECONFIG is set.

    KUBECONFIG=~/.kube/config LAUNCHER_TEST_IMAGE=launcher:kind \
        .venv/bin/pytest -m cluster tests/kubernetes/test_real_cluster.py

LAUNCHER_TEST_IMAGE must hold the launcher (see docs/kubernetes.md); LAUNCHER_TEST_CONTEXT
and LAUNCHER_TEST_NAMESPACE (default: the current context, namespace default) choose
where. Each test deletes its runs and secrets.
"""

from __future__ import annotations

import os
import shlex
import time
import uuid

import pytest
import yaml

from launcher.backends.base import RunStatus
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.backends.kubernetes.secrets import KubernetesSecretStore
from launcher.config import load_config
from launcher.secrets.kinds import Secret, SecretKind
from launcher.spec.models import RunSpec
from tests.conftest import wait_until
from tests.kubernetes.specs import WORKER

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(
        not (os.environ.get("KUBECONFIG") and os.environ.get("LAUNCHER_TEST_IMAGE")),
        reason="needs KUBECONFIG and LAUNCHER_TEST_IMAGE (a real cluster)",
    ),
]
TIMEOUT = float(os.environ.get("LAUNCHER_TEST_TIMEOUT", "300"))


@pytest.fixture
def cluster(launcher_home):
    settings = {
        "backend": "kubernetes",
        "kubeconfig": os.environ["KUBECONFIG"],
        "namespace": os.environ.get("LAUNCHER_TEST_NAMESPACE", "default"),
        "image": os.environ["LAUNCHER_TEST_IMAGE"],
    }
    if os.environ.get("LAUNCHER_TEST_CONTEXT"):
        settings["context"] = os.environ["LAUNCHER_TEST_CONTEXT"]
    (launcher_home / "config.yaml").write_text(yaml.safe_dump({"current": "real", "clusters": {"real": settings}}))
    profile = load_config().profile("real")
    backend = KubernetesBackend(profile)
    store = KubernetesSecretStore(profile, api=backend.api)
    made: list[str] = []
    secrets: list[str] = []
    yield backend, store, made, secrets
    for name in made:
        try:
            backend.delete(name)
        except Exception:  # noqa: BLE001 - best-effort cleanup
            pass
    for name in secrets:
        try:
            store.delete(name)
        except Exception:  # noqa: BLE001
            pass
    backend.close()


def spec_with_worker(made: list[str], *args: str, **fields) -> RunSpec:
    """The test worker travels inline in an env variable: the image only needs the launcher."""
    name = f"kt-{uuid.uuid4().hex[:6]}"
    made.append(name)
    env = {"TEST_WORKER": WORKER.read_text()}
    command = 'python -c "$TEST_WORKER" ' + shlex.join(args)
    return RunSpec.model_validate({"name": name, "command": command, "env_variables": env, **fields})


def until_terminal(backend, name):
    """Follow the run to its end, reconciling it as `run --follow` does (a cluster without
    JobSet retries only then)."""
    start = time.monotonic()
    run = None
    for run in backend.watch(name, poll_seconds=0.5):
        assert time.monotonic() - start < TIMEOUT, f"{name}: still {run.status} ({run.reason})"
    return run


def test_two_nodes_complete_with_logs_and_masked_secret(cluster):
    backend, store, made, secrets = cluster
    secret_name = f"kt-tok-{uuid.uuid4().hex[:6]}"
    value = f"real-secret-{uuid.uuid4().hex}"
    store.create(Secret(secret_name, SecretKind.ENV, {"value": value}, {"env_key": "API_TOKEN"}))
    secrets.append(secret_name)
    spec = spec_with_worker(
        made,
        "--lines",
        "4",
        "--interval",
        "0.2",
        "--print-env",
        "API_TOKEN",
        compute={"nodes": 2},
        secrets=[secret_name],
    )
    backend.submit(spec, store.for_run([secret_name]))
    lines = list(backend.logs(spec.name, follow=True))
    assert until_terminal(backend, spec.name).status is RunStatus.COMPLETED
    for r in (0, 1):
        assert f"rank {r} line 3" in [ln.text for ln in lines if ln.rank == r]
    assert "the secret is ****" in [ln.text for ln in lines]
    assert not any(value in ln.text for ln in lines)


def test_failing_rank_restarts_the_group(cluster):
    backend, _, made, _ = cluster
    spec = spec_with_worker(
        made,
        "--lines",
        "4",
        "--fail-rank",
        "1",
        "--fail-attempt",
        "1",
        compute={"nodes": 2},
        scheduling={"max_retries": 1, "retry_backoff": {"first": "1s"}},
    )
    backend.submit(spec, [])
    final = until_terminal(backend, spec.name)
    assert final.status is RunStatus.COMPLETED, final.reason
    assert [a.status for a in final.attempts] == [RunStatus.FAILED, RunStatus.COMPLETED]
    assert "rank 1 fails with code 3" in [ln.text for ln in backend.logs(spec.name, attempt=1, rank=1)]


def test_unschedulable_is_queued_with_a_reason(cluster):
    backend, _, made, _ = cluster
    spec = spec_with_worker(made, compute={"gpus": 8, "gpu_type": "h100_80gb"})
    backend.submit(spec, [])
    run = wait_until(
        lambda: (run := backend.get(spec.name)).status is RunStatus.QUEUED and run.reason and run,
        60,
        interval=1,
        message="the run to be QUEUED with a reason",
    )
    assert "nodes are available" in run.reason
    assert backend.stop(spec.name).status is RunStatus.STOPPED


def test_missing_secret_fails_fast(cluster):
    backend, _, made, _ = cluster
    ghost = Secret(f"kt-ghost-{uuid.uuid4().hex[:6]}", SecretKind.ENV, {"value": "x" * 8}, {"env_key": "GHOST"})
    spec = spec_with_worker(made, secrets=[ghost.name])
    backend.submit(spec, [ghost])
    final = until_terminal(backend, spec.name)
    assert final.status is RunStatus.FAILED
    assert "CreateContainerConfigError" in final.reason and ghost.name in final.reason


def test_stop_then_delete(cluster):
    backend, _, made, _ = cluster
    spec = spec_with_worker(made, "--forever", "--interval", "0.5")
    backend.submit(spec, [])
    for run in backend.watch(spec.name):
        if run.status is RunStatus.RUNNING:
            break
    assert backend.stop(spec.name).status is RunStatus.STOPPED
    backend.delete(spec.name)
    made.remove(spec.name)
