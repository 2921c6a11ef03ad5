"""How a cluster admin reviews and applies a run: `launcher run --dry-run -o yaml | kubectl
apply -f -`, with kubectl's validation on, against the fake run as a program. The dry-run
prints a `kind: List`, which kubectl validates itself, from the fake's /openapi/v2 (a
ConfigMap and a JobSet; without JobSet a ConfigMap, a Service and a Job). The applied run
is then a run like any other: `launcher get runs` sees it complete."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import wait_until
from tests.forked_cli import launcher_command
from tests.kubernetes.test_backend import worker

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (.ci/run installs it)")
LAUNCHER = [sys.executable, "-m", "launcher"]


@pytest.fixture
def cluster(fake_kube_program):
    return fake_kube_program("--nodes", "2", profile={"entrypoint_mode": "image"})


def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "reviewed",
                "image": "ghcr.io/example/launcher:test",
                "command": worker("--lines", "3"),
                "compute": {"gpu_type": "none", "nodes": 2},
                "secrets": [],  # none: the pods need no Secret of the run's (see the test below)
            }
        )
    )
    return path


def sh(command: str, cluster, *, stdin: str | None = None) -> subprocess.CompletedProcess:
    # HOME: kubectl's discovery and OpenAPI caches go beside the fake's kubeconfig, not into ~/.kube.
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "HOME": str(cluster.kubeconfig.parent)}
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", command], input=stdin, capture_output=True, text=True, timeout=120, env=env
    )


def dry_run(tmp_path: Path) -> str:
    done = subprocess.run(
        [*LAUNCHER, "run", "-f", str(spec_file(tmp_path)), "--cluster", "fake", "--dry-run", "-o", "yaml"],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def runs() -> list[dict]:
    done = subprocess.run(
        [*LAUNCHER, "get", "runs", "--cluster", "fake", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_piped_dry_run_is_validated_by_kubectl_applied_and_seen_by_get_runs(cluster, tmp_path):
    launcher = " ".join(LAUNCHER)
    done = sh(
        f"{launcher} run -f {spec_file(tmp_path)} --cluster fake --dry-run -o yaml | {KUBECTL} apply -f -", cluster
    )
    assert done.returncode == 0, done.stderr
    assert "validate=false" not in done.stderr
    created = done.stdout.split()
    name = created[0].split("/")[1]
    kinds = ["configmap", "jobset.jobset.x-k8s.io"]
    assert created == [w for kind in kinds for w in (f"{kind}/{name}", "created")], done.stdout
    run = wait_until(
        lambda: next((r for r in runs() if r["name"] == name and r["status"] == "COMPLETED"), None),
        90,
        interval=0.5,
        message=lambda: f"run {name} to complete: {runs()}",
    )
    assert run["cluster"] == "fake"


def test_an_invalid_field_gets_kubectls_own_validation_error(cluster, tmp_path):
    doc = yaml.safe_load(dry_run(tmp_path))
    workload = doc["items"][-1]
    job = workload["spec"]["replicatedJobs"][0]["template"]
    job["spec"]["parallelism"] = "two"
    job["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    workload["spec"]["replicatedJobs"][0]["replica"] = 2
    creates = cluster.count(verb="create")
    done = sh(f"{KUBECTL} apply -f -", cluster, stdin=yaml.safe_dump(doc))
    assert done.returncode == 1
    err = done.stderr
    assert err.startswith('error: error validating "STDIN": error validating data: '), err
    assert err.rstrip().endswith("if you choose to ignore these errors, turn validation off with --validate=false")
    where = "io.x-k8s.jobset.v1alpha2.JobSet.spec.replicatedJobs"
    assert f'ValidationError(JobSet.spec.replicatedJobs[0]): unknown field "replica" in {where}' in err
    assert (
        "ValidationError(JobSet.spec.replicatedJobs[0].template.spec.parallelism): invalid type for "
        f'{where}.template.spec.parallelism: got "string", expected "integer"'
    ) in err
    assert (
        "ValidationError(JobSet.spec.replicatedJobs[0].template.spec.template.spec.containers[0]): "
        f'unknown field "imagePullPolicyy" in {where}.template.spec.template.spec.containers' in err
    )
    assert cluster.count(verb="create") == creates  # refused before anything reached the server


def dry_run_with_secret(tmp_path: Path, command: str) -> tuple[str, str]:
    """A dry-run of a spec that uses the stored secret hf-token: its YAML and its stderr."""
    path = tmp_path / "secret-spec.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "reviewed",
                "image": "ghcr.io/example/launcher:test",
                "command": command,
                "compute": {"gpu_type": "none", "nodes": 1},
                "secrets": ["hf-token"],
            }
        )
    )
    done = subprocess.run(
        [*LAUNCHER, "run", "-f", str(path), "--cluster", "fake", "--dry-run", "-o", "yaml"],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, done.stderr


def launcher_out(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*launcher_command(dict(os.environ)), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ,
    )


TOKEN = "hf_ReviewedApplyToken4242"


def test_an_applied_dry_run_needs_the_runs_secret_and_says_which_command_makes_it(cluster, tmp_path):
    made = launcher_out("secret", "create", "hf", "hf-token", "--cluster", "fake", stdin=TOKEN)
    assert made.returncode == 0, made.stderr
    command = "sh -c 'echo token-length=${#HF_TOKEN}; echo token=$HF_TOKEN'"

    # Applied as it is: the pods cannot start, and the run says why, naming the Secret.
    manifests, err = dry_run_with_secret(tmp_path, command)
    assert TOKEN not in manifests + err
    name = yaml.safe_load(manifests)["items"][0]["metadata"]["name"]
    bundle = f"launcher secret bundle {name} hf-token --cluster fake"
    assert f"`{bundle}` creates it" in err, err
    done = sh(f"{KUBECTL} apply -f -", cluster, stdin=manifests)
    assert done.returncode == 0, done.stderr
    failed = wait_until(
        lambda: next((r for r in runs() if r["name"] == name and r["status"] == "FAILED"), None),
        60,
        interval=0.5,
        message=lambda: f"run {name} to fail: {runs()}",
    )
    # The kubelet mounts volumes before it resolves envFrom: the mount is what fails first.
    assert f'secret "{name}-secrets" not found' in failed["reason"], failed
    described = launcher_out("describe", "run", name)
    assert f'secret "{name}-secrets" not found' in described.stdout, described.stdout

    # With the command the dry-run named run first, the applied run has its secret.
    manifests, err = dry_run_with_secret(tmp_path, command)
    name = yaml.safe_load(manifests)["items"][0]["metadata"]["name"]
    made = launcher_out(*f"secret bundle {name} hf-token --cluster fake".split())
    assert made.returncode == 0, made.stderr
    assert TOKEN not in made.stdout + made.stderr
    done = sh(f"{KUBECTL} apply -f -", cluster, stdin=manifests)
    assert done.returncode == 0, done.stderr
    wait_until(
        lambda: next((r for r in runs() if r["name"] == name and r["status"] == "COMPLETED"), None),
        90,
        interval=0.5,
        message=lambda: f"run {name} to complete: {runs()}",
    )
    logs = launcher_out("logs", name)
    assert logs.returncode == 0, logs.stderr
    assert f"token-length={len(TOKEN)}" in logs.stdout, logs.stdout
    assert TOKEN not in logs.stdout  # masked at the source, as a submitted run's
    deleted = launcher_out("delete", "run", name, "-y")
    assert deleted.returncode == 0, deleted.stderr
    assert sh(f"{KUBECTL} get secret {name}-secrets", cluster).returncode == 1  # the run's Secret went with it
