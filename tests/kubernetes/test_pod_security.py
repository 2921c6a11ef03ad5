"""A namespace that enforces the `restricted` Pod Security Standard, against the fake run as
a program (its API server refuses pods as the real PodSecurity admission does): a profile
with `pod_security: restricted` runs there, a run on the default profile ends at once with
the API server's own words in `run --follow` and `describe`, never a hang."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.fakes.kube.fixtures import test_runtime
from tests.kubernetes.test_backend import worker

LAUNCHER = [sys.executable, "-m", "launcher"]
pytestmark = pytest.mark.skipif(
    shutil.which("kubectl") is None, reason="kubectl is not installed (.ci/run installs it)"
)
RESTRICTED = "pod-security.kubernetes.io/enforce=restricted"
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
    return subprocess.run([*LAUNCHER, *args], capture_output=True, text=True, timeout=timeout, env=os.environ)


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
    """The fake with 2 nodes, its namespace default labelled as an administrator would."""

    def start(**profile):
        kube = fake_kube_program("--nodes", "2", profile={"entrypoint_mode": "image", **profile})
        done = kubectl(kube, "label", "ns", "default", RESTRICTED)
        assert done.returncode == 0, done.stderr
        assert "namespace/default labeled" in done.stdout
        return kube

    return start


def test_a_restricted_profile_runs_in_a_namespace_that_enforces_restricted(restricted_namespace, tmp_path):
    kube = restricted_namespace(pod_security="restricted", run_as_user=1000)
    command = f"python -c 'import os; print(\"uid\", os.getuid())' && {worker('--lines', '3', '--interval', '0.05')}"
    done = launcher("run", "-f", str(spec_file(tmp_path, "secure", command)), "--cluster", "fake", "--follow")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rank 0 done" in done.stdout and "completed" in done.stderr
    if test_runtime() == "runc":  # process mode runs pods as the test's own user
        assert "uid 1000" in done.stdout
    pods = kubectl(kube, "get", "pods", "-o", "yaml")
    assert pods.returncode == 0, pods.stderr
    [pod, _] = yaml.safe_load(pods.stdout)["items"]
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert pod["spec"]["automountServiceAccountToken"] is False


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
    name = re.search(r"run (rooted-\S+) never", out).group(1)
    described = launcher("describe", "run", name)
    assert described.returncode == 0, described.stderr
    assert "FAILED" in described.stdout and REFUSED in described.stdout
    # The run was ended as `launcher stop` ends one: nothing is left retrying its pods.
    jobsets = kubectl(kube, "get", "jobsets", "-o", "name")
    assert jobsets.returncode == 0 and jobsets.stdout.strip() == "", jobsets.stdout + jobsets.stderr
