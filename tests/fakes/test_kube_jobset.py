"""The fake's JobSet controller against JobSet's documented semantics: child Jobs and
their labels, the headless Service, group restarts under failurePolicy (counted, not
counted, exhausted, FailJobSet), success, and admission by the CRD schema and webhook.
And the Job controller rules JobSet builds on: podFailurePolicy and backoffLimit 0."""

from __future__ import annotations

import time

import pytest

from tests.conftest import wait_until
from tests.fakes.kube.cluster import FakeKube
from tests.fakes.kube.common import ApiError

NS = "default"
ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
INDEX = "batch.kubernetes.io/job-completion-index"


@pytest.fixture
def kube():
    k = FakeKube(jobset=True, grace_seconds=1.0).start()
    try:
        yield k
    finally:
        k.close()


def jobset(
    name: str,
    script: str,
    *,
    nodes: int = 2,
    failure_policy: dict | None = None,
    pod_failure_policy: dict | None = None,
) -> dict:
    """One replicated job of `nodes` Indexed pods running `sh -c script` with $INDEX and $ATTEMPT."""
    env = [
        {"name": "INDEX", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX}']"}}},
        {"name": "ATTEMPT", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{ATTEMPT}']"}}},
    ]
    job_spec = {
        "completions": nodes,
        "parallelism": nodes,
        "backoffLimit": 0,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", script], "env": env}],
            }
        },
    }
    if pod_failure_policy:
        job_spec["podFailurePolicy"] = pod_failure_policy
    spec = {
        "replicatedJobs": [{"name": "workers", "replicas": 1, "template": {"spec": job_spec}}],
        "network": {"enableDNSHostnames": True},
        "successPolicy": {"operator": "All"},
    }
    if failure_policy is not None:
        spec["failurePolicy"] = failure_policy
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name}, "spec": spec}


def terminal(kube: FakeKube, name: str, timeout: float = 40.0) -> dict:
    def done():
        js = kube.get("JobSet", NS, name)
        return js if js["status"].get("terminalState") else None

    return wait_until(done, timeout, message=f"JobSet {name} to reach a terminal state")


def conditions(js: dict) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in js["status"].get("conditions", [])}


def test_child_job_labels_hostnames_and_service_then_completed(kube):
    kube.create("JobSet", NS, jobset("train", "echo rank $INDEX"))
    js = terminal(kube, "train")
    assert js["status"]["terminalState"] == "Completed" and js["status"]["restarts"] == 0
    assert conditions(js)["Completed"] == ("True", "AllJobsCompleted")
    job = kube.get("Job", NS, "train-workers-0")
    for meta in (job["metadata"], job["spec"]["template"]["metadata"]):
        assert {
            k: meta["labels"][k]
            for k in (
                "jobset.sigs.k8s.io/jobset-name",
                "jobset.sigs.k8s.io/replicatedjob-name",
                "jobset.sigs.k8s.io/job-index",
                ATTEMPT,
            )
        } == {
            "jobset.sigs.k8s.io/jobset-name": "train",
            "jobset.sigs.k8s.io/replicatedjob-name": "workers",
            "jobset.sigs.k8s.io/job-index": "0",
            ATTEMPT: "0",
        }
        assert meta["annotations"][ATTEMPT] == "0"
    assert job["metadata"]["ownerReferences"][0]["kind"] == "JobSet"
    pods = sorted(kube.pods(labels="jobset.sigs.k8s.io/jobset-name=train"), key=lambda p: p["spec"]["hostname"])
    assert [(p["spec"]["hostname"], p["spec"]["subdomain"]) for p in pods] == [
        ("train-workers-0-0", "train"),
        ("train-workers-0-1", "train"),
    ]
    service = kube.get("Service", NS, "train")
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == {"jobset.sigs.k8s.io/jobset-name": "train"}
    # The webhook's and the CRD's defaults.
    assert js["spec"]["replicatedJobs"][0]["groupName"] == "default"
    assert js["spec"]["network"]["publishNotReadyAddresses"] is True


def test_a_failed_child_job_restarts_the_group_with_the_next_restart_attempt(kube):
    kube.create(
        "JobSet",
        NS,
        jobset(
            "retry", 'if [ "$INDEX" = 1 ] && [ "$ATTEMPT" = 0 ]; then exit 3; fi', failure_policy={"maxRestarts": 1}
        ),
    )
    js = terminal(kube, "retry")
    assert js["status"]["terminalState"] == "Completed"
    assert (js["status"]["restarts"], js["status"]["restartsCountTowardsMax"]) == (1, 1)
    assert conditions(js)["RestartingJobSet"][0] == "False"
    job = kube.get("Job", NS, "retry-workers-0")
    assert job["metadata"]["labels"][ATTEMPT] == "1"
    assert {p["metadata"]["labels"][ATTEMPT] for p in kube.pods(labels="jobset.sigs.k8s.io/jobset-name=retry")} == {"1"}
    events = [o for (k, _, _), o in kube.objects.items() if k == "Event" and o["involvedObject"]["name"] == "retry"]
    assert any(e["reason"] == "RestartJobSetFailurePolicyAction" for e in events)


def test_max_restarts_exhausted_fails_the_jobset(kube):
    kube.create(
        "JobSet", NS, jobset("doomed", 'if [ "$INDEX" = 0 ]; then exit 5; fi', failure_policy={"maxRestarts": 1})
    )
    js = terminal(kube, "doomed")
    assert js["status"]["terminalState"] == "Failed"
    assert conditions(js)["Failed"] == ("True", "ReachedMaxRestarts")
    failed = next(c for c in js["status"]["conditions"] if c["type"] == "Failed")
    assert failed["message"] == (
        "jobset failed due to reaching max number of restarts (first failed job: doomed-workers-0)"
    )
    assert js["status"]["restarts"] == 1


def test_a_disruption_restarts_without_counting_towards_max_restarts(kube):
    policy = {"rules": [{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    failure = {
        "maxRestarts": 0,
        "rules": [{"action": "RestartJobSetAndIgnoreMaxRestarts", "onJobFailureReasons": ["PodFailurePolicy"]}],
    }
    kube.create(
        "JobSet",
        NS,
        jobset(
            "preempt", 'if [ "$ATTEMPT" = 0 ]; then sleep 30; fi', failure_policy=failure, pod_failure_policy=policy
        ),
    )
    pod = wait_until(
        lambda: next(
            (
                p
                for p in kube.pods(labels="jobset.sigs.k8s.io/jobset-name=preempt")
                if p["status"].get("phase") == "Running" and p["metadata"]["annotations"][INDEX] == "1"
            ),
            None,
        ),
        30,
        message="pod 1 of JobSet preempt to run",
    )
    kube.evict(pod["metadata"]["name"])
    js = terminal(kube, "preempt")
    assert js["status"]["terminalState"] == "Completed"
    assert (js["status"]["restarts"], js["status"].get("restartsCountTowardsMax", 0)) == (1, 0)
    assert conditions(js)["RestartingJobSet"][0] == "False"


def test_fail_jobset_rule_and_no_failure_policy_fail_at_once(kube):
    kube.create("JobSet", NS, jobset("nopolicy", "exit 2"))
    kube.create(
        "JobSet",
        NS,
        jobset(
            "failrule",
            "exit 2",
            failure_policy={
                "maxRestarts": 3,
                "rules": [{"action": "FailJobSet", "onJobFailureReasons": ["BackoffLimitExceeded"]}],
            },
        ),
    )
    assert conditions(terminal(kube, "nopolicy"))["Failed"] == ("True", "FailedJobs")
    js = terminal(kube, "failrule")
    assert conditions(js)["Failed"] == ("True", "FailJobSetFailurePolicyAction") and js["status"]["restarts"] == 0


def test_admission_checks_the_crd_schema_and_the_webhook(kube):
    bad_type = jobset("typed", "true")
    bad_type["spec"]["replicatedJobs"][0]["replicas"] = "two"
    with pytest.raises(ApiError) as e:
        kube.create("JobSet", NS, bad_type)
    assert e.value.code == 422 and "spec.replicatedJobs[0].replicas" in e.value.message
    with pytest.raises(ApiError) as e:
        kube.create("JobSet", NS, jobset("x" * 60, "true"))
    assert e.value.code == 403 and "job names generated for this JobSet will exceed 63 characters" in e.value.message
    unknown = jobset("pruned", "true")
    unknown["spec"]["replicatedJob"] = []  # a typo: pruned, as the API server prunes unknown fields
    assert "replicatedJob" not in kube.create("JobSet", NS, unknown)["spec"]


def test_job_pod_failure_policy_and_backoff_limit_zero(kube):
    def job(name: str, code: int, rules: list | None = None) -> dict:
        spec = {
            "backoffLimit": 0,
            "completions": 1,
            "completionMode": "Indexed",
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", f"exit {code}"]}],
                }
            },
        }
        if rules:
            spec["podFailurePolicy"] = {"rules": rules}
        return {"metadata": {"name": name}, "spec": spec}

    with pytest.raises(ApiError) as e:
        kube.create(
            "Job", NS, job("zero", 1, [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [0]}}])
        )
    assert e.value.code == 422 and "must not be 0 for the In operator" in e.value.message
    unset = job("unset", 0)
    del unset["spec"]["template"]["spec"]["restartPolicy"]
    with pytest.raises(ApiError) as e:
        kube.create("Job", NS, unset)
    assert "spec.template.spec.restartPolicy: Required value" in e.value.message
    kube.create("Job", NS, job("backoff", 1))
    kube.create(
        "Job", NS, job("policy", 42, [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}])
    )

    def failed(name):
        return next(
            (
                c
                for c in kube.get("Job", NS, name)["status"].get("conditions", [])
                if c["type"] == "Failed" and c["status"] == "True"
            ),
            None,
        )

    assert wait_until(lambda: failed("backoff"), 30, message="Job backoff to fail")["reason"] == "BackoffLimitExceeded"
    cond = wait_until(lambda: failed("policy"), 30, message="Job policy to fail")
    assert cond["reason"] == "PodFailurePolicy" and "exit code 42 matching FailJob rule at index 0" in cond["message"]


def test_suspend_holds_the_child_jobs_and_delete_cascades(kube):
    held = jobset("held", "echo ran")
    held["spec"]["suspend"] = True
    kube.create("JobSet", NS, held)
    job = wait_until(
        lambda: next((o for (k, _, n), o in list(kube.objects.items()) if k == "Job" and n == "held-workers-0"), None),
        30,
        message="the child Job held-workers-0",
    )
    assert job["spec"]["suspend"] is True
    wait_until(
        lambda: conditions(kube.get("JobSet", NS, "held")).get("Suspended") == ("True", "SuspendedJobs"),
        30,
        message="JobSet held to be Suspended",
    )
    # A stated window, kept as a sleep: in half a second a suspended JobSet's Jobs start no pod.
    time.sleep(0.5)
    assert kube.pods(labels="jobset.sigs.k8s.io/jobset-name=held") == []
    kube.patch("JobSet", NS, "held", {"spec": {"suspend": False}})
    js = terminal(kube, "held")
    assert js["status"]["terminalState"] == "Completed"
    assert conditions(js)["Suspended"] == ("False", "ResumeJobs")
    kube.delete("JobSet", NS, "held", {"propagationPolicy": "Background"})
    wait_until(
        lambda: (
            not kube.list("Job", NS, "jobset.sigs.k8s.io/jobset-name=held")[0]
            and not kube.pods(labels="jobset.sigs.k8s.io/jobset-name=held")
        ),
        30,
        message="the delete to cascade to the Jobs and pods",
    )
    with pytest.raises(ApiError):
        kube.get("Service", NS, "held")
