"""A namespace that enforces the `restricted` Pod Security Standard, against the fake run as
a program (its API server refuses pods as the real PodSecurity admission does): a profile
with `pod_security: restricted` runs there, a run on the default profile ends at once with
the API server's own words in `run --follow` and `describe`, never a hang."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.fakes.kube.runc import runc_check
from tests.forked_cli import launcher_command
from tests.kubernetes.test_backend import worker
from tests.kubernetes.test_runc import IMAGES

pytestmark = pytest.mark.skipif(
    shutil.which("kubectl") is None, reason="kubectl is not installed (.ci/run installs it)"
)
RESTRICTED = "pod-security.kubernetes.io/enforce=restricted"
SECRET = "file-secret-Value-4242\n"
REFUSED = (
    'violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "main" must set '
    'securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "main" must set '
    'securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "main" must set '
    "securityContext.runAsNonRoot=true)"
)


def kubectl(kube, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["kubectl", "--kubeconfig", str(kube.kubeconfig), *args], capture_output=True, text=True, timeout=60
    )


def launcher(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*launcher_command(dict(os.environ)), *args], capture_output=True, text=True, timeout=timeout, env=os.environ
    )


def spec_file(tmp_path: Path, name: str, command: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    spec = {
        "name": name,
        "image": "ghcr.io/example/launcher:test",
        "command": command,
        "compute": {"gpu_type": "none", "nodes": 2},
    }
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture
def restricted_namespace(fake_kube_program):
    """The fake with 2 nodes, its namespace default labelled as an administrator would. Its
    pods are host processes (the host's Python, which only root may reach here): the runc
    test below runs them in containers as a non-root user."""

    def start(*args: str, **profile):
        args = args or ("--runtime", "process")
        kube = fake_kube_program("--nodes", "2", *args, profile={"entrypoint_mode": "image", **profile})
        done = kubectl(kube, "label", "ns", "default", RESTRICTED)
        assert done.returncode == 0, done.stderr
        assert "namespace/default labeled" in done.stdout
        return kube

    return start


def test_a_restricted_profile_runs_in_a_namespace_that_enforces_restricted(restricted_namespace, tmp_path):
    kube = restricted_namespace(pod_security="restricted", run_as_user=1000)
    done = launcher(
        "run", "-f", str(spec_file(tmp_path, "secure", worker("--lines", "3"))), "--cluster", "fake", "--follow"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rank 0 done" in done.stdout and "completed" in done.stderr
    pods = kubectl(kube, "get", "pods", "-o", "yaml")
    assert pods.returncode == 0, pods.stderr
    [pod, _] = yaml.safe_load(pods.stdout)["items"]
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert pod["spec"]["automountServiceAccountToken"] is False


@pytest.mark.skipif(runc_check() is not None, reason=f"runc runtime unavailable: {runc_check()}")
@pytest.mark.parametrize("user", ["profile", "image"])
def test_in_runc_containers_the_ranks_run_as_a_non_root_user_and_read_a_file_secret(
    restricted_namespace, tmp_path, user
):
    """Issue 35's done-when: 2 nodes, a namespace enforcing restricted, a non-root user (the
    profile's run_as_user, or the image's own USER), a file secret the command reads."""
    image = "registry.example/debian:test"
    rootfs = IMAGES / "bookworm-python3"
    if not rootfs.is_dir():
        pytest.skip("image bookworm-python3 is not built: scripts/build_images.sh bookworm-python3")
    by_image = ("--image-user", f"{image}=1000:1000") if user == "image" else ()
    profile = {"run_as_user": 1000} if user == "profile" else {}
    restricted_namespace(
        "--runtime",
        "runc",
        "--image",
        f"{image}={rootfs}",
        *by_image,
        entrypoint_mode="zipapp",  # the image's own python3 runs the entrypoint
        pod_security="restricted",
        **profile,
    )
    source = tmp_path / "token.txt"
    source.write_text(SECRET)
    created = launcher(
        "secret", "create", "file", "tok", "--from", str(source), "--mount-path", "/mnt/tok", "--cluster", "fake"
    )
    assert created.returncode == 0, created.stderr
    command = "python3 -c 'import os; print(\"uid\", os.getuid())'; sha256sum /mnt/tok/secret"
    path = tmp_path / "non-root.yaml"
    body = {"name": "non-root", "image": image, "command": command, "compute": {"gpu_type": "none", "nodes": 2}}
    path.write_text(yaml.safe_dump({**body, "secrets": ["tok"]}))
    done = launcher("run", "-f", str(path), "--cluster", "fake", "--follow")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("uid 1000") == 2, done.stdout
    assert done.stdout.count(f"{hashlib.sha256(SECRET.encode()).hexdigest()}  /mnt/tok/secret") == 2, done.stdout
    assert SECRET.strip() not in done.stdout + done.stderr


def test_a_pod_the_namespace_refuses_ends_the_run_with_the_api_servers_words(restricted_namespace, tmp_path):
    kube = restricted_namespace()  # the default profile: pod_security baseline
    started = time.monotonic()
    done = launcher(
        "run", "-f", str(spec_file(tmp_path, "rooted", worker("--lines", "1"))), "--cluster", "fake", "--follow"
    )
    assert time.monotonic() - started < 60  # not a hang
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "the cluster refused the run's pods: pods \"rooted-" in out and REFUSED in out
    assert "a profile with pod_security: restricted renders pods this namespace admits" in out
    # The follow ends with the run's reason (no log to show: its container never started).
    named = re.search(r"Run (rooted-\S+) failed: the cluster refused the run's pods", out)
    assert named, out
    name = named.group(1)
    described = launcher("describe", "run", name)
    assert described.returncode == 0, described.stderr
    assert "FAILED" in described.stdout and REFUSED in described.stdout
    # The run was ended as `launcher stop` ends one: nothing is left retrying its pods.
    jobsets = kubectl(kube, "get", "jobsets", "-o", "name")
    assert jobsets.returncode == 0 and jobsets.stdout.strip() == "", jobsets.stdout + jobsets.stderr


def _failed_create(job: dict, message: str, when: str) -> dict:
    involved = {"kind": "Job", "name": job["metadata"]["name"], "uid": job["metadata"]["uid"]}
    return {
        "reason": "FailedCreate",
        "type": "Warning",
        "involvedObject": involved,
        "message": message,
        "lastTimestamp": when,
    }


def test_only_a_pod_security_refusal_is_final_and_only_this_jobs_counts():
    from launcher.backends.base import RunStatus
    from launcher.backends.kubernetes.attempts import attempt_view
    from launcher.spec.retry import FATAL

    job = {"metadata": {"name": "r-node-0", "uid": "u2"}, "status": {}}
    earlier = {"metadata": {"name": "r-node-0", "uid": "u1"}}
    quota = 'Error creating: pods "r-node-0-0-abcde" is forbidden: exceeded quota: gpus, requested: nvidia.com/gpu=8'
    attempt, failure, _ = attempt_view(1, job, [], [_failed_create(job, quota, "2026-01-01T00:00:01Z")], 2)
    assert attempt.status is RunStatus.PENDING and failure is None
    assert attempt.reason == f"the cluster does not create the run's pods: {quota.removeprefix('Error creating: ')}"
    refused = f'Error creating: pods "r-node-0-0-abcde" is forbidden: {REFUSED}'
    attempt, failure, _ = attempt_view(1, job, [], [_failed_create(earlier, refused, "2026-01-01T00:00:02Z")], 2)
    assert attempt.status is RunStatus.PENDING and attempt.reason is None  # an earlier Job of the same name
    attempt, failure, _ = attempt_view(1, job, [], [_failed_create(job, refused, "2026-01-01T00:00:02Z")], 2)
    assert attempt.status is RunStatus.FAILED and failure == FATAL
    assert (attempt.reason or "").startswith(
        'the cluster refused the run\'s pods: pods "r-node-0-0-abcde" is forbidden: violates'
    )


@pytest.mark.skipif(runc_check() is not None, reason=f"runc runtime unavailable: {runc_check()}")
def test_a_root_image_under_restricted_fails_at_once_with_the_kubelets_words(restricted_namespace, tmp_path):
    """pod_security: restricted and an image whose USER is root, no run_as_user: the kubelet
    refuses the container (CreateContainerConfigError), and the run ends with its message."""
    restricted_namespace("--runtime", "runc", pod_security="restricted")
    done = launcher("run", "-f", str(spec_file(tmp_path, "as-root", "true")), "--cluster", "fake", "--follow")
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "CreateContainerConfigError: container has runAsNonRoot and image will run as root" in out
