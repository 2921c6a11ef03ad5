"""exec, connect and port-forward go to a pod of the run's own JobSet: its controller chain
(pod -> Job -> the JobSet the run's record names, by uid), never a pod that only carries the
run's labels. An impostor pod that anyone with `create pods` makes, with the run's labels and
attempt 999, must not receive the user's session."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import urllib.request

from tests.conftest import wait_until
from tests.kubernetes.test_exec import free_port, start_run

RUN = "owned-abc123"


def impostor(fake_kube, name: str, command: str) -> None:
    """A pod with the run's labels, rank 0 and attempt 999, created through the API server by
    the real Kubernetes client (as any user allowed to create pods would)."""
    from kubernetes import client, config

    real = fake_kube.pods("default", f"launcher.dev/run={RUN}")[0]["metadata"]
    api = client.CoreV1Api(config.new_client_from_config(os.environ["LAUNCHER_HOME"] + "/kubeconfig", context="fake"))
    api.create_namespaced_pod(
        "default",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "labels": {**real["labels"], "launcher.dev/attempt": "999"},
                "annotations": {"batch.kubernetes.io/job-completion-index": "0"},
            },
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {"name": "main", "image": "ghcr.io/example/launcher:test", "command": ["sh", "-c", command]}
                ],
            },
        },
    )
    wait_until(
        lambda: (
            next(p for p in fake_kube.pods("default") if p["metadata"]["name"] == name)["status"].get("phase")
            == "Running"
        ),
        60,
        message="the impostor pod to run",
    )


def launcher(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "launcher", *args], capture_output=True, text=True, timeout=60, env=os.environ
    )


def test_exec_goes_to_the_runs_own_pod_not_an_impostor_with_its_labels(backend, fake_kube):
    start_run(backend, fake_kube, RUN, "sleep 120", nodes=1)
    try:
        impostor(fake_kube, "impostor-pod", "sleep 120")
        done = launcher("exec", RUN, "--", "sh", "-c", "echo pod=$HOSTNAME")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"pod={RUN}-node-0-0", done.stdout
    finally:
        backend.stop(RUN)


def test_port_forward_goes_to_the_runs_own_pod_not_an_impostor(backend, fake_kube):
    port = free_port()
    serve = f"mkdir -p site && cd site && echo the-run > who && python -m http.server {port} --bind 127.0.0.1"
    start_run(backend, fake_kube, RUN, serve, nodes=1)
    ready: list[int] = []
    stop = threading.Event()
    try:
        impostor(fake_kube, "impostor-web", "sleep 120")
        forwarder = threading.Thread(
            target=backend.port_forward,
            args=(RUN,),
            kwargs={"rank": 0, "local_port": 0, "remote_port": port, "ready": ready.append, "stop": stop},
            daemon=True,
        )
        forwarder.start()
        wait_until(lambda: ready, 10, message="the local port to listen")

        def answer() -> str | None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ready[0]}/who", timeout=5) as resp:
                    return resp.read().decode().strip()
            except OSError:
                return None  # not listening yet (or the impostor, which has no server)

        assert wait_until(answer, 30, message="the run's server to answer") == "the-run"
        # Which pod the API server was asked to forward to (in process mode every pod shares
        # the host's network, so the answer alone cannot tell).
        real = {p["metadata"]["name"] for p in fake_kube.pods("default", f"launcher.dev/run={RUN}")} - {"impostor-web"}
        assert {pod for kind, pod in fake_kube.stream_pods if kind == "portforward"} == real
    finally:
        stop.set()
        backend.stop(RUN)
