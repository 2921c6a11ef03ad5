"""The fake's Pod Security admission, through real kubectl against the fake run as a
program: a labelled namespace refuses pods with the real server's words, warns of a Job
whose pods it would refuse (whose controller then records FailedCreate), refuses a level
that does not exist and warns of existing pods when relabelled. And the checks one by one."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.conftest import wait_until
from tests.fakes.kube.podsecurity import violations

KUBECTL = shutil.which("kubectl")

ROOT_POD = """
apiVersion: v1
kind: Pod
metadata: {name: rooted}
spec:
  restartPolicy: Never
  containers:
  - {name: main, image: busybox, command: ["sleep", "60"]}
"""
RESTRICTED_POD = """
apiVersion: v1
kind: Pod
metadata: {name: confined}
spec:
  restartPolicy: Never
  securityContext: {runAsNonRoot: true, runAsUser: 1000, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: main
    image: busybox
    command: ["true"]
    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL], add: [NET_BIND_SERVICE]}}
"""
JOB = """
apiVersion: batch/v1
kind: Job
metadata: {name: rooted-job}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: main, image: busybox, command: ["true"]}
"""
REFUSED = (
    'violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "main" must set '
    'securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "main" must set '
    'securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "main" must set '
    'securityContext.runAsNonRoot=true), seccompProfile (pod or container "main" must set '
    'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")'
)


@pytest.fixture
def cluster(tmp_path):
    from tests.fakes.kube.fixtures import KubeProgram

    prog = KubeProgram(tmp_path, "--nodes", "1")
    try:
        yield prog
    finally:
        prog.stop()


def kubectl(cluster, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ["PATH"], "HOME": str(cluster.kubeconfig.parent), "KUBECONFIG": str(cluster.kubeconfig)}
    return subprocess.run(
        [KUBECTL or "kubectl", *args], input=stdin, capture_output=True, text=True, timeout=30, env=env
    )


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (.ci/run installs it)")
def test_a_restricted_namespace_through_kubectl(cluster):
    assert kubectl(cluster, "apply", "-f", "-", stdin=ROOT_POD).returncode == 0  # not enforced yet
    labelled = kubectl(cluster, "label", "ns", "default", "pod-security.kubernetes.io/enforce=restricted")
    assert labelled.returncode == 0, labelled.stderr
    assert 'Warning: existing pods in namespace "default" violate the new PodSecurity enforce level' in labelled.stderr
    assert "Warning: rooted: allowPrivilegeEscalation != false, unrestricted capabilities" in labelled.stderr

    refused = kubectl(cluster, "create", "-f", "-", stdin=ROOT_POD.replace("rooted", "second"))
    assert refused.returncode == 1
    assert (
        refused.stderr.strip()
        == f'Error from server (Forbidden): error when creating "STDIN": pods "second" is forbidden: {REFUSED}'
    )
    assert kubectl(cluster, "create", "-f", "-", stdin=RESTRICTED_POD).stdout.strip() == "pod/confined created"

    job = kubectl(cluster, "create", "-f", "-", stdin=JOB)
    assert job.returncode == 0 and job.stdout.strip() == "job.batch/rooted-job created"
    assert "Warning: " + REFUSED.replace("violates", "would violate", 1) in job.stderr

    def failed_create() -> str:
        events = kubectl(cluster, "get", "events", "--field-selector", "reason=FailedCreate", "-o", "name").stdout
        return events.strip()

    wait_until(failed_create, 20, interval=0.2, message="the Job controller's FailedCreate event")
    described = kubectl(cluster, "describe", "job", "rooted-job").stdout
    assert "FailedCreate" in described and 'Error creating: pods "rooted-job-' in described

    bad = kubectl(cluster, "label", "--overwrite", "ns", "default", "pod-security.kubernetes.io/enforce=strict")
    assert bad.returncode == 1
    assert 'Invalid value: "strict": must be one of privileged, baseline, restricted' in bad.stderr


def pod(**spec) -> tuple[dict, dict]:
    return {}, {"containers": [{"name": "c", "image": "x"}], **spec}


def test_baseline_refuses_host_access_and_privilege_and_allows_a_plain_pod():
    assert violations("baseline", *pod()) == []
    assert violations(
        "baseline",
        *pod(
            hostNetwork=True,
            hostPID=True,
            volumes=[{"name": "root", "hostPath": {"path": "/"}}],
            containers=[
                {
                    "name": "c",
                    "image": "x",
                    "ports": [{"containerPort": 80, "hostPort": 80}],
                    "securityContext": {"privileged": True, "capabilities": {"add": ["SYS_ADMIN", "CHOWN"]}},
                }
            ],
        ),
    ) == [
        'non-default capabilities (container "c" must not include "SYS_ADMIN" in securityContext.capabilities.add)',
        "host namespaces (hostNetwork=true, hostPID=true)",
        'hostPath volumes (volume "root")',
        'hostPort (container "c" uses hostPort 80)',
        'privileged (container "c" must not set securityContext.privileged=true)',
    ]
    assert violations("baseline", *pod(securityContext={"seccompProfile": {"type": "Unconfined"}})) == [
        'seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")'
    ]
    assert violations("privileged", *pod(hostNetwork=True)) == []


def test_restricted_names_each_container_and_volume():
    sc = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    good = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    two = [{"name": "a", "image": "x", "securityContext": sc}, {"name": "b", "image": "x"}]
    assert violations("restricted", *pod(securityContext=good, containers=two)) == [
        'allowPrivilegeEscalation != false (container "b" must set securityContext.allowPrivilegeEscalation=false)',
        'unrestricted capabilities (container "b" must set securityContext.capabilities.drop=["ALL"])',
    ]
    assert violations(
        "restricted",
        *pod(
            securityContext={**good, "runAsUser": 0},
            containers=[{"name": "a", "image": "x", "securityContext": {**sc, "runAsNonRoot": False}}],
            volumes=[{"name": "n", "nfs": {"server": "s", "path": "/"}}, {"name": "e", "emptyDir": {}}],
        ),
    ) == [
        'restricted volume types (volume "n" uses restricted volume type "nfs")',
        'runAsNonRoot != true (container "a" must not set securityContext.runAsNonRoot=false)',
        "runAsUser=0 (pod must not set runAsUser=0)",
    ]
    assert (
        violations(
            "restricted", *pod(securityContext=good, containers=[{"name": "a", "image": "x", "securityContext": sc}])
        )
        == []
    )
