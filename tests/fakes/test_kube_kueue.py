"""The fake's Kueue against Kueue's published API and behaviour, seen by the real
`kubernetes` client and by kubectl: a queued JobSet gets a Workload and is admitted and
unsuspended; one over quota waits with Kueue's reason and its position (visibility API),
then is admitted; a higher priority preempts a lower one with Kueue's conditions, and the
lower one is readmitted; a required topology puts a pod set in one domain or keeps it
pending; kubectl lists Workloads and queues; the objects validate against the vendored
CRDs in both versions."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import kubernetes
import pytest

from tests.conftest import wait_until
from tests.fakes.kube import crd
from tests.fakes.kube.cluster import FakeKube
from tests.fakes.kube.kueue import configure, topology_nodes

NS = "default"
GROUP = "kueue.x-k8s.io"
QUEUE = "kueue.x-k8s.io/queue-name"
PRIORITY = "kueue.x-k8s.io/priority-class"
KUBECTL = shutil.which("kubectl")


def start(
    tmp_path, *, nodes: int = 4, gpus: int = 4, topology: dict | None = None, labels: dict | None = None, **setup
) -> FakeKube:
    kube = FakeKube(
        nodes=topology_nodes(nodes, gpus, topology, labels), jobset=True, kueue=True, grace_seconds=1.0
    ).start()
    configure(kube.kueue, topology=list(topology or {}), **setup)
    kube.kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")
    return kube


@pytest.fixture
def make_kube(tmp_path):
    made: list[FakeKube] = []

    def make(**options) -> FakeKube:
        made.append(start(tmp_path, **options))
        return made[-1]

    try:
        yield make
    finally:
        for k in made:
            k.close()


def api(kube) -> kubernetes.client.ApiClient:
    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(kube.kubeconfig), client_configuration=config)
    return kubernetes.client.ApiClient(config)


def jobset(
    name: str,
    *,
    pods: int = 1,
    gpus: int = 4,
    seconds: float = 1,
    priority: str | None = None,
    topology: str | None = None,
    queue: str = "team",
) -> dict:
    labels = {QUEUE: queue, **({PRIORITY: priority} if priority else {})}
    pod_meta = {"annotations": {f"kueue.x-k8s.io/podset-{topology}": "rack"}} if topology else {}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "completions": pods,
                            "parallelism": pods,
                            "backoffLimit": 0,
                            "template": {
                                "metadata": pod_meta,
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [
                                        {
                                            "name": "main",
                                            "image": "busybox",
                                            "command": ["sleep", str(seconds)],
                                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                                        }
                                    ],
                                },
                            },
                        }
                    },
                }
            ]
        },
    }


def submit(client, body: dict) -> dict:
    return kubernetes.client.CustomObjectsApi(client).create_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", NS, "jobsets", body
    )


def workload_of(client, job_name: str, version: str = "v1beta2") -> dict | None:
    items = kubernetes.client.CustomObjectsApi(client).list_namespaced_custom_object(GROUP, version, NS, "workloads")[
        "items"
    ]
    return next((w for w in items if w["metadata"]["ownerReferences"][0]["name"] == job_name), None)


def conditions(wl: dict | None) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in ((wl or {}).get("status") or {}).get("conditions") or []}


def message(wl: dict, type_: str) -> str:
    return next(c["message"] for c in wl["status"]["conditions"] if c["type"] == type_)


def wait_condition(client, job_name: str, type_: str, status: str = "True", timeout: float = 30) -> dict:
    return wait_until(
        lambda: (wl := workload_of(client, job_name)) and conditions(wl).get(type_, ("",))[0] == status and wl,
        timeout,
        message=lambda: f"{job_name}'s {type_}={status}: {workload_of(client, job_name)}",
    )


def get_jobset(client, name: str) -> dict:
    return kubernetes.client.CustomObjectsApi(client).get_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", NS, "jobsets", name
    )


def pending(client, path: str) -> list[dict]:
    request = client.param_serialize(
        "GET",
        f"/apis/visibility.kueue.x-k8s.io/v1beta1/{path}/pendingworkloads",
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
    )
    response = client.call_api(*request)
    response.read()
    assert response.status == 200, response.data
    data = json.loads(response.data)
    assert data["kind"] == "PendingWorkloadsSummary"
    return data["items"]


def validates(kube, kind: str, plural: str, name: str, namespaced: bool = True) -> None:
    """The object, read from each served version, is valid by that version's CRD schema."""
    for version in ("v1beta2", "v1beta1"):
        obj = kube_get(kube, plural, version, name, namespaced)
        schema = crd.schema_of(f"{GROUP}_{plural}.yaml", version)
        assert not crd.unknown_fields(obj, schema), crd.unknown_fields(obj, schema)
        crd.validate(obj, schema, kind=kind, group=GROUP)


def kube_get(kube, plural: str, version: str, name: str, namespaced: bool = True) -> dict:
    objects = kubernetes.client.CustomObjectsApi(api(kube))
    if namespaced:
        return objects.get_namespaced_custom_object(GROUP, version, NS, plural, name)
    return objects.get_cluster_custom_object(GROUP, version, plural, name)


def test_a_queued_jobset_gets_a_workload_and_is_admitted_and_unsuspended(make_kube):
    kube = make_kube(queues={"team": 8}, priority_classes={"high": 1000}, labels={"pool": "gpu"})
    # The flavor's nodeLabels go into the admitted pods' nodeSelector, as Kueue does.
    objects = kubernetes.client.CustomObjectsApi(client := api(kube))
    objects.patch_cluster_custom_object(
        GROUP, "v1beta2", "resourceflavors", "default", {"spec": {"nodeLabels": {"pool": "gpu"}}}
    )
    created = submit(client, jobset("train", pods=2, gpus=4, priority="high"))
    assert created["spec"]["suspend"] is True  # Kueue's webhook suspends it at create
    wl = wait_condition(client, "train", "Admitted")
    assert re.fullmatch(r"jobset-train-[0-9a-f]{5}", wl["metadata"]["name"])
    owner = wl["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("JobSet", created["metadata"]["uid"], True)
    assert wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == created["metadata"]["uid"]
    assert wl["spec"]["queueName"] == "team"
    assert (wl["spec"]["priority"], wl["spec"]["priorityClassRef"]) == (
        1000,
        {"group": GROUP, "kind": "WorkloadPriorityClass", "name": "high"},
    )
    [ps] = wl["spec"]["podSets"]
    assert (ps["name"], ps["count"]) == ("workers", 2)
    [psa] = wl["status"]["admission"]["podSetAssignments"]
    assert wl["status"]["admission"]["clusterQueue"] == "team"
    assert (psa["count"], psa["flavors"]["nvidia.com/gpu"], psa["resourceUsage"]["nvidia.com/gpu"]) == (
        2,
        "default",
        "8",
    )
    assert conditions(wl)["QuotaReserved"] == ("True", "QuotaReserved")
    assert message(wl, "QuotaReserved") == "Quota reserved in ClusterQueue team"
    wait_until(lambda: get_jobset(client, "train")["spec"]["suspend"] is False, 10, message="the JobSet to resume")
    pods = wait_until(lambda: len(p := kube.pods(labels="jobset.sigs.k8s.io/jobset-name=train")) == 2 and p, 10)
    assert all(p["spec"]["nodeSelector"]["pool"] == "gpu" for p in pods)
    wl = wait_condition(client, "train", "Finished")
    assert conditions(wl)["Finished"] == ("True", "Succeeded")
    # v1beta1 reads the same Workload in its own spelling.
    old = workload_of(client, "train", "v1beta1")
    assert (old["apiVersion"], old["spec"]["priorityClassName"], old["spec"]["priorityClassSource"]) == (
        f"{GROUP}/v1beta1",
        "high",
        "kueue.x-k8s.io/workloadpriorityclass",
    )
    assert "priorityClassRef" not in old["spec"]
    validates(kube, "Workload", "workloads", wl["metadata"]["name"])
    validates(kube, "ClusterQueue", "clusterqueues", "team", namespaced=False)
    validates(kube, "LocalQueue", "localqueues", "team")
    # Deleting the JobSet deletes its Workload (owner reference).
    objects.delete_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NS, "jobsets", "train")
    wait_until(lambda: workload_of(client, "train") is None, 10, message="the Workload to go with its JobSet")


def test_over_quota_waits_with_reason_and_position_then_is_admitted(make_kube):
    kube = make_kube(queues={"team": 8})
    client = api(kube)
    submit(client, jobset("first", pods=2, gpus=4, seconds=3))
    wait_condition(client, "first", "Admitted")
    submit(client, jobset("second", gpus=4))
    submit(client, jobset("third", gpus=4))
    second = wait_condition(client, "second", "QuotaReserved", "False")
    assert conditions(second)["QuotaReserved"] == ("False", "Pending")
    assert message(second, "QuotaReserved") == (
        "couldn't assign flavors to pod set workers: insufficient unused "
        "quota for nvidia.com/gpu in flavor default, 4 more needed"
    )
    assert second["status"]["resourceRequests"] == [{"name": "workers", "resources": {"nvidia.com/gpu": "4"}}]
    assert get_jobset(client, "second")["spec"]["suspend"] is True
    wait_condition(client, "third", "QuotaReserved", "False")
    queued = pending(client, "clusterqueues/team")
    assert [
        (w["metadata"]["name"], w["positionInClusterQueue"], w["positionInLocalQueue"], w["localQueueName"])
        for w in queued
    ] == [(second["metadata"]["name"], 0, 0, "team"), (workload_of(client, "third")["metadata"]["name"], 1, 1, "team")]
    assert [w["positionInLocalQueue"] for w in pending(client, f"namespaces/{NS}/localqueues/team")] == [0, 1]
    cq = kube_get(kube, "clusterqueues", "v1beta2", "team", namespaced=False)["status"]
    assert (cq["pendingWorkloads"], cq["admittedWorkloads"]) == (2, 1)
    assert {r["name"]: r["total"] for r in cq["flavorsUsage"][0]["resources"]}["nvidia.com/gpu"] == "8"
    lq = kube_get(kube, "localqueues", "v1beta1", "team")["status"]
    assert lq["pendingWorkloads"] == 2 and lq["flavorUsage"][0]["name"] == "default"  # v1beta1's spelling
    # The first ends: both waiting ones fit, in order.
    wait_condition(client, "first", "Finished")
    wait_condition(client, "second", "Admitted")
    wait_condition(client, "third", "Admitted")
    assert pending(client, "clusterqueues/team") == []


def test_higher_priority_preempts_lower_which_is_readmitted_later(make_kube):
    kube = make_kube(queues={"team": 8}, preempt=True, priority_classes={"high": 1000, "low": 10})
    client = api(kube)
    submit(client, jobset("low", pods=2, gpus=4, seconds=3, priority="low"))
    wait_until(lambda: len(kube.pods(labels="jobset.sigs.k8s.io/jobset-name=low")) == 2, 10)
    submit(client, jobset("high", pods=2, gpus=4, seconds=1, priority="high"))
    low = wait_condition(client, "low", "Preempted")
    conds = conditions(low)
    assert (conds["Evicted"], conds["Preempted"]) == (("True", "Preempted"), ("True", "InClusterQueue"))
    high_uid = workload_of(client, "high")["metadata"]["uid"]
    assert message(low, "Evicted").startswith(f"Preempted to accommodate a workload (UID: {high_uid}, JobUID: ")
    assert "due to prioritization in the ClusterQueue" in message(low, "Preempted")
    # Suspended again: its pods end, then its quota is released and it queues again.
    wait_until(lambda: get_jobset(client, "low")["spec"]["suspend"] is True, 10)
    low = wait_condition(client, "low", "QuotaReserved", "False")
    assert conditions(low)["Admitted"] == ("False", "NoReservation")
    assert conditions(low)["Requeued"] == ("True", "Preempted")
    assert low["status"]["schedulingStats"]["evictions"] == [{"reason": "Preempted", "underlyingCause": "", "count": 1}]
    # Ended, its pods are deleted too (a runc pod's container takes a moment to remove).
    wait_until(lambda: kube.pods(labels="jobset.sigs.k8s.io/jobset-name=low") == [], 10)
    wait_condition(client, "high", "Admitted")
    # The higher one ends: the lower one is readmitted and runs to the end.
    wait_condition(client, "high", "Finished")
    low = wait_condition(client, "low", "Admitted")
    assert conditions(low)["Evicted"] == ("False", "QuotaReserved")
    assert message(low, "Evicted").startswith("Previously: Preempted to accommodate")
    assert conditions(wait_condition(client, "low", "Finished"))["Finished"] == ("True", "Succeeded")
    validates(kube, "Workload", "workloads", low["metadata"]["name"])


def test_required_topology_keeps_a_pod_set_in_one_domain_or_pending(make_kube):
    kube = make_kube(queues={"team": 16}, nodes=4, gpus=2, topology={"rack": ["r1", "r2"]})
    client = api(kube)
    submit(client, jobset("packed", pods=2, gpus=2, seconds=3, topology="required-topology"))
    wl = wait_condition(client, "packed", "Admitted")
    assert wl["spec"]["podSets"][0]["topologyRequest"]["required"] == "rack"
    assert wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]["levels"] == [
        "kubernetes.io/hostname"
    ]
    pods = wait_until(
        lambda: (
            len(
                p := [x for x in kube.pods(labels="jobset.sigs.k8s.io/jobset-name=packed") if x["spec"].get("nodeName")]
            )
            == 2
            and p
        ),
        10,
    )
    nodes = {n["name"]: n["labels"]["rack"] for n in kube.nodes}
    racks = {nodes[p["spec"]["nodeName"]] for p in pods}
    assert len(racks) == 1 and {p["spec"]["nodeSelector"]["rack"] for p in pods} == racks
    # Three pods of 2 GPUs need one rack of 3 nodes: no rack has that much room.
    submit(client, jobset("wide", pods=3, gpus=2, topology="required-topology"))
    wide = wait_condition(client, "wide", "QuotaReserved", "False")
    assert message(wide, "QuotaReserved") == (
        'couldn\'t assign flavors to pod set workers: topology "default" allows to fit only 2 out of 3 pod(s)'
    )
    # Preferred takes what it can get across racks.
    submit(client, jobset("spread", pods=2, gpus=2, topology="preferred-topology"))
    wait_condition(client, "spread", "Admitted")
    validates(kube, "Workload", "workloads", wide["metadata"]["name"])


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (.ci/run installs it)")
def test_kubectl_lists_workloads_and_queues(tmp_path):
    from tests.fakes.kube.fixtures import KubeProgram

    prog = KubeProgram(
        tmp_path,
        "--kueue",
        "--nodes",
        "2",
        "--gpus-per-node",
        "2",
        "--kueue-queue",
        "team:2:preempt",
        "--priority-class",
        "high=100",
    )
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "KUBECONFIG": str(prog.kubeconfig)}

    def kubectl(*args: str) -> str:
        r = subprocess.run([KUBECTL, *args], capture_output=True, text=True, timeout=30, env=env)
        assert r.returncode == 0, f"kubectl {' '.join(args)}: {r.stderr}"
        return r.stdout

    try:
        client = api(prog)
        submit(client, jobset("one", gpus=2, seconds=30, priority="high"))
        submit(client, jobset("two", gpus=2, seconds=30))
        wait_condition(client, "two", "QuotaReserved", "False")
        one, two = workload_of(client, "one")["metadata"]["name"], workload_of(client, "two")["metadata"]["name"]
        rows = [line.split() for line in kubectl("get", "workloads").splitlines()]
        assert rows[0] == ["NAME", "QUEUE", "RESERVED", "IN", "ADMITTED", "FINISHED", "AGE"]
        # Columns Kueue's CRD prints; the never-admitted one has no Admitted condition (blank).
        assert {r[0]: r[1:-1] for r in rows[1:]} == {one: ["team", "team", "True"], two: ["team"]}
        assert kubectl("get", "clusterqueues").split() == ["NAME", "COHORT", "PENDING", "WORKLOADS", "team", "1"]
        assert kubectl("get", "localqueues").split()[-4:] == ["team", "team", "1", "1"]
        assert kubectl("get", "workloadpriorityclasses").split() == ["NAME", "VALUE", "high", "100"]
        assert (
            kubectl(
                "get",
                "workloads.v1beta1.kueue.x-k8s.io",
                two,
                "-o",
                "jsonpath={.spec.queueName} {.status.conditions[?(@.type=='QuotaReserved')].reason}",
            )
            == "team Pending"
        )
        assert two in kubectl(
            "get", "--raw", "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/team/pendingworkloads"
        )
    finally:
        prog.stop()
