"""Real kubectl against the fake run as a program: discovery, Tables, cluster-wide lists,
-o json, logs (and -f, which ends with the pod), delete with cascade, a bounded watch,
create with server-side validation, chunked lists. Where kubectl and the fake disagree,
the fake is wrong."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import pytest

from tests.conftest import wait_until

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (.ci/run installs it)")

JOBSET = """
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: demo}
spec:
  replicatedJobs:
  - name: workers
    replicas: 1
    template:
      spec:
        completions: 2
        parallelism: 2
        backoffLimit: 0
        template:
          spec:
            restartPolicy: Never
            containers:
            - name: main
              image: busybox
              command: ["sh", "-c", "for i in 1 2 3; do echo line $i; sleep 0.3; done"]
"""

JOB = """
apiVersion: batch/v1
kind: Job
metadata: {name: sleeper}
spec:
  completions: 2
  parallelism: 2
  completionMode: Indexed
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: main, image: busybox, command: ["sleep", "120"]}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from tests.fakes.kube.fixtures import KubeProgram

    prog = KubeProgram(tmp_path_factory.mktemp("kubectl"), "--nodes", "2")
    try:
        yield prog
    finally:
        prog.stop()


def kubectl(cluster, *args: str, stdin: str | None = None, timeout: float = 30, check: bool = True):
    env = {"PATH": os.environ["PATH"], "HOME": str(cluster.kubeconfig.parent), "KUBECONFIG": str(cluster.kubeconfig)}
    r = subprocess.run([KUBECTL, *args], input=stdin, capture_output=True, text=True, timeout=timeout, env=env)
    if check:
        assert r.returncode == 0, f"kubectl {' '.join(args)}: {r.stderr}"
    return r


def test_create_get_all_namespaces_logs_and_json(cluster):
    out = kubectl(cluster, "create", "-f", "-", stdin=JOBSET).stdout
    assert out.strip() == "jobset.jobset.x-k8s.io/demo created"

    def completed():
        return "Completed" in kubectl(cluster, "get", "jobsets").stdout

    wait_until(completed, 30, interval=0.1, message="JobSet demo to complete")
    listing = kubectl(cluster, "get", "jobs,pods,jobsets", "-A").stdout
    assert "default     job.batch/demo-workers-0   Complete   2/2" in listing
    assert listing.count("Completed") == 3  # two pods and the JobSet
    assert "jobset.jobset.x-k8s.io/demo   Completed       0" in listing
    pods = json.loads(kubectl(cluster, "get", "pods", "-o", "json", "-l", "jobset.sigs.k8s.io/jobset-name=demo").stdout)
    assert pods["kind"] == "List" and len(pods["items"]) == 2
    assert {p["status"]["phase"] for p in pods["items"]} == {"Succeeded"}
    pod = pods["items"][0]["metadata"]["name"]
    assert kubectl(cluster, "logs", pod).stdout.splitlines() == ["line 1", "line 2", "line 3"]
    stamped = kubectl(cluster, "logs", pod, "--timestamps", "--tail", "1").stdout.split()
    assert stamped[1:] == ["line", "3"] and stamped[0].endswith("Z")
    assert len(kubectl(cluster, "logs", pod, "--since-time", "2020-01-01T00:00:00Z").stdout.splitlines()) == 3
    assert kubectl(cluster, "logs", pod, "--since-time", "2099-01-01T00:00:00Z").stdout == ""
    # Chunked lists follow the continue token to the end.
    chunked = kubectl(cluster, "get", "pods", "--chunk-size", "1", "-o", "name").stdout.split()
    assert sorted(chunked) == sorted(f"pod/{p['metadata']['name']}" for p in pods["items"])


def test_logs_follow_ends_when_the_pod_ends(cluster):
    script = '["sh", "-c", "sleep 2; for i in 1 2 3 4; do echo n $i; sleep 0.4; done"]'
    kubectl(cluster, "create", "-f", "-", stdin=JOB.replace("sleeper", "counter").replace('["sleep", "120"]', script))

    def running_pod():  # asked of the fake directly: kubectl is slow to start on a busy machine
        return next(
            (
                p["metadata"]["name"]
                for p in cluster.pods(labels="batch.kubernetes.io/job-name=counter")
                if p["status"]["phase"] == "Running"
            ),
            None,
        )

    pod = wait_until(running_pod, 30, interval=0.1, message="a pod of Job counter to run")
    started = time.monotonic()
    out = kubectl(cluster, "logs", "-f", pod, timeout=20).stdout
    assert out.splitlines() == ["n 1", "n 2", "n 3", "n 4"] and time.monotonic() - started < 15


def test_delete_job_cascades_and_watch_sees_it(cluster):
    kubectl(cluster, "create", "-f", "-", stdin=JOB)

    def pods():
        out = kubectl(cluster, "get", "pods", "-l", "batch.kubernetes.io/job-name=sleeper", "-o", "json").stdout
        return [p for p in json.loads(out)["items"]]

    wait_until(
        lambda: len(pods()) == 2 and all(p["status"]["phase"] == "Running" for p in pods()),
        30,
        interval=0.1,
        message="both pods of Job sleeper to run",
    )
    watches = cluster.count(verb="watch", kind="Pod")
    env = {"PATH": os.environ["PATH"], "HOME": str(cluster.kubeconfig.parent), "KUBECONFIG": str(cluster.kubeconfig)}
    watch = subprocess.Popen(
        [KUBECTL, "get", "pods", "-l", "batch.kubernetes.io/job-name=sleeper", "--watch", "--request-timeout=8s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        wait_until(
            lambda: cluster.count(verb="watch", kind="Pod") > watches,
            30,
            interval=0.1,
            message="kubectl's watch of the pods to start",
        )
        assert kubectl(cluster, "delete", "job", "sleeper").stdout.strip() == 'job.batch "sleeper" deleted'
        wait_until(lambda: pods() == [], 20, interval=0.1, message="the delete to cascade to the pods")
        assert "NotFound" in kubectl(cluster, "get", "job", "sleeper", check=False).stderr
    finally:
        watch.terminate()
        seen, _ = watch.communicate(timeout=10)
    lines = seen.splitlines()
    assert lines[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert any("Terminating" in line for line in lines[1:]), seen


def test_server_side_validation_reaches_kubectl(cluster):
    bad = JOB.replace("name: sleeper", "name: bad-policy").replace(
        "  completionMode: Indexed\n",
        "  completionMode: Indexed\n  podFailurePolicy:\n    rules:\n"
        "    - action: FailJob\n      onExitCodes: {operator: In, values: [0]}\n",
    )
    r = kubectl(cluster, "create", "-f", "-", stdin=bad, check=False)
    assert r.returncode == 1
    assert (
        "spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value: 0: must not be 0 for the In "
        "operator" in r.stderr
    )
    typo = JOBSET.replace("name: demo", "name: typo").replace("replicas: 1", "replicas: 1\n    replica: 2")
    r = kubectl(cluster, "create", "-f", "-", stdin=typo, check=False)
    assert r.returncode == 1 and 'unknown field "spec.replicatedJobs[0].replica"' in r.stderr
    discovered = kubectl(cluster, "api-resources").stdout
    assert "jobsets" in discovered and "jobset.x-k8s.io/v1alpha2" in discovered


def test_explain_reads_the_served_schemas(cluster):
    """/openapi/v3 carries each kind's schema: the JobSet CRD's and kubernetes-validate's."""
    out = kubectl(cluster, "explain", "jobset.spec.replicatedJobs.replicas").stdout
    assert "KIND:       JobSet" in out and "VERSION:    v1alpha2" in out and "FIELD: replicas <integer>" in out
    assert "replicas is the number of jobs that will be created from this\n    ReplicatedJob's template." in out
    out = kubectl(cluster, "explain", "pods.spec.restartPolicy").stdout
    assert "FIELD: restartPolicy <string>" in out and "OnFailure" in out
    missing = kubectl(cluster, "explain", "jobs.spec.replica", check=False)
    assert missing.returncode == 1 and 'field "replica" does not exist' in missing.stderr


def test_a_list_is_validated_by_kubectl_itself(cluster):
    """A List takes no fieldValidation, so kubectl checks it against /openapi/v2 (protobuf)
    before sending anything; one object alone is left to the server (above)."""
    import yaml

    listed = {"apiVersion": "v1", "kind": "List", "items": [yaml.safe_load(JOB.replace("sleeper", "listed"))]}
    listed["items"][0]["spec"]["template"]["spec"]["containers"][0]["commands"] = ["true"]
    r = kubectl(cluster, "create", "-f", "-", stdin=yaml.safe_dump(listed), check=False)
    assert r.returncode == 1
    assert (
        'error validating data: ValidationError(Job.spec.template.spec.containers[0]): unknown field "commands" '
        "in io.k8s.api.core.v1.Container"
    ) in r.stderr
    del listed["items"][0]["spec"]["template"]["spec"]["containers"][0]["commands"]
    out = kubectl(cluster, "create", "-f", "-", stdin=yaml.safe_dump(listed)).stdout
    assert out.strip() == "job.batch/listed created"
    kubectl(cluster, "delete", "job", "listed")
