"""Kueue through the CLI, against the fake's Kueue simulation (tests/fakes/kube/kueue.py):
a run over its queue's quota waits QUEUED with its place and Kueue's reason in `get runs`
and `describe`, then runs when the quota frees; a higher priority run preempts a lower
one, which goes back to QUEUED and runs again without spending a retry; compute.topology
reaches the pod template as Kueue's annotation; `util` shows the ClusterQueue's quota."""

from __future__ import annotations

import json
import re

from tests.cli.test_exec import submitted
from tests.conftest import wait_until

# One gpu_type for the fake's unlabelled 4-GPU nodes; Kueue's WorkloadPriorityClasses by mcli's names.
PROFILE = {
    "queue": "team",
    "gpu_types": {"gpu": {"gpus_per_node": 4, "cpus_per_gpu": 1, "memory_per_gpu": "1Gi"}},
    "priority_classes": {"high": "high", "low": "low"},
}


def run(cli, name: str, command: str, *, gpus: int = 8, scheduling: str = "{}", compute: str = "") -> str:
    spec = cli.spec(
        name,
        f"""\
        name: {name}
        compute: {{cluster: fake, gpus: {gpus}, gpu_type: gpu{compute}}}
        scheduling: {scheduling}
        command: {command}
        """,
    )
    r = cli("run", "-f", str(spec))
    assert r.returncode == 0, r.stderr
    return submitted(r.stdout + r.stderr)


def row(cli, name: str) -> str:
    r = cli("get", "runs", name)
    assert r.returncode == 0, r.stderr
    return next(line for line in r.stdout.splitlines() if line.startswith(name))


def test_a_queued_run_shows_its_place_and_kueues_reason_then_runs_when_quota_frees(cli, fake_kueue):
    fake_kueue(queues={"team": 8}, profile=PROFILE)
    first = run(cli, "first", "sleep 300")
    cli.wait_status(first, {"RUNNING"})
    second = run(cli, "second", "echo second done")
    queued = cli.wait_status(second, {"QUEUED"})
    assert queued["queue"]["position"] == 1 and queued["queue"]["pending"] == 1
    assert queued["queue"]["cluster_queue"] == "team" and queued["queue"]["position_from"] == "Kueue's visibility API"
    assert "insufficient unused quota for nvidia.com/gpu in flavor default" in queued["queue"]["reason"]

    listed = row(cli, second)
    assert re.search(r"QUEUED\s.*#1 of 1 in team \(team\): couldn't assign flavors", listed), listed
    described = cli("describe", "run", second, "--no-yaml")
    assert described.returncode == 0, described.stderr
    queue = described.stdout.split("Queue:\n", 1)[1].split("\n\n", 1)[0]
    assert re.search(r"^  LocalQueue:\s+team$", queue, re.M), queue
    assert re.search(r"^  ClusterQueue:\s+team$", queue, re.M), queue
    assert re.search(r"^  Position:\s+1 of 1 pending in team, 1 in team \(from Kueue's visibility API\)$", queue, re.M)
    assert re.search(r"^  Reason:\s+couldn't assign flavors to pod set node: insufficient unused quota", queue, re.M)
    assert re.search(r"^  In queue:\s+\d+:\d\d \(since ", queue, re.M), queue

    assert cli("stop", first, "-y").returncode == 0  # its quota frees: Kueue admits the second
    done = cli.wait_status(second, {"COMPLETED"}, timeout=90)
    assert done["queue"]["admitted"] and done["queue"]["position"] is None
    logs = cli("logs", second)
    assert "second done" in logs.stdout, logs.stdout + logs.stderr


def test_a_preempted_run_goes_back_to_the_queue_and_runs_again_without_spending_a_retry(cli, fake_kueue):
    fake_kueue(queues={"team": 8}, preempt=True, priority_classes={"high": 1000, "low": 10}, profile=PROFILE)
    # Long enough, both, that on a loaded machine the low run is preempted before it ends,
    # and stays QUEUED long enough (while the high one runs) for a poll to see it.
    low = run(cli, "low", "sleep 20", scheduling="{priority: low, max_retries: 0}")
    cli.wait_status(low, {"RUNNING"})
    high = run(cli, "high", "sleep 15", scheduling="{priority: high}")

    evicted = cli.wait_status(low, {"QUEUED"})
    assert evicted["reason"].startswith("evicted by Kueue (Preempted)"), evicted["reason"]
    [eviction] = evicted["queue"]["evictions"]
    assert eviction["reason"] == "Preempted" and eviction["count"] == 1 and eviction["at"]
    assert eviction["message"].startswith("Preempted to accommodate a workload"), eviction
    described = cli("describe", "run", low, "--no-yaml").stdout
    assert re.search(
        r"^  Evicted:\s+Preempted, 1 time, last at .*: Preempted to accommodate a workload .*"
        r"\(not counted against max_retries\)$",
        described,
        re.M,
    ), described
    assert re.search(r"attempt 1\s+QUEUED\s+evicted by Kueue \(Preempted\)", described), described

    assert cli.wait_status(high, {"COMPLETED"}, timeout=90)["status"] == "COMPLETED"
    done = cli.wait_status(low, {"COMPLETED"}, timeout=90)  # readmitted once the high one ends
    # max_retries 0, and yet it ran again: the preemption was no failure of its own.
    # Kueue suspended and resumed the same JobSet: one attempt, which completed.
    assert [(a["attempt"], a["status"]) for a in done["attempts"]] == [(1, "COMPLETED")]
    assert done["exit_code"] == 0, done
    [after] = done["queue"]["evictions"]
    assert after["reason"] == "Preempted" and after["count"] == 1
    described = cli("describe", "run", low, "--no-yaml").stdout
    assert re.search(r"^  Evicted:\s+Preempted, 1 time: Preempted to accommodate", described, re.M), described


def test_compute_topology_is_kueues_annotation_on_the_pod_template(cli, fake_kueue):
    kube = fake_kueue(queues={"team": 8}, topology={"example.com/rack": ["r1", "r2"]}, profile=PROFILE)
    name = run(cli, "near", "echo placed", compute=", topology: {level: example.com/rack}")
    cli.wait_status(name, {"COMPLETED"}, timeout=90)
    js = kube.get("JobSet", "default", name)
    template = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert template["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] == "example.com/rack"
    pods = [
        p
        for (kind, _, _), p in kube.store.objects.items()
        if kind == "Pod" and (p["metadata"].get("labels") or {}).get("launcher.dev/run") == name
    ]
    assert len(pods) == 2
    racks = {kube.get("Node", "", p["spec"]["nodeName"])["metadata"]["labels"]["example.com/rack"] for p in pods}
    assert len(racks) == 1, racks  # both nodes in one rack


def test_util_shows_the_cluster_queues_gpu_quota_use_and_what_waits(cli, fake_kueue):
    fake_kueue(queues={"team": 8}, profile=PROFILE)
    holder = run(cli, "holder", "sleep 300", gpus=4)
    cli.wait_status(holder, {"RUNNING"})
    waiting = run(cli, "waiting", "sleep 1", gpus=8)
    cli.wait_status(waiting, {"QUEUED"})

    def queue_row() -> dict:
        r = cli("util", "fake", "-o", "json")
        assert r.returncode == 0, r.stderr
        return next(q for q in json.loads(r.stdout) if "cluster_queue" in q)

    wait_until(lambda: queue_row()["pending_workloads"] == 1, 30, interval=0.2, message=lambda: str(queue_row()))
    assert queue_row() == {
        "cluster": "fake",
        "backend": "kubernetes",
        "queue": "team",
        "cluster_queue": "team",
        "quota": 8,
        "used": 4,
        "free": 4,
        "pending_workloads": 1,
        "pending_gpus": 8,
    }
    table = cli("util", "fake").stdout
    assert re.search(
        r"^CLUSTER\s+QUEUE\s+CLUSTERQUEUE\s+GPU QUOTA\s+USED\s+FREE\s+PENDING\s+PENDING GPUS$", table, re.M
    )
    assert re.search(r"^fake\s+team\s+team\s+8\s+4\s+4\s+1\s+8$", table, re.M), table
    cli("stop", holder, "-y")
    cli("stop", waiting, "-y")


# The shipped per-GPU share (8 CPUs, 64Gi) on the fake's 4-GPU nodes of 16 CPUs and 64Gi: a
# ClusterQueue with the nodes' cpu and memory as its quota never admits 8 GPUs' worth of it.
DEFAULTS_PROFILE = {"queue": "team", "gpu_types": {"gpu": {"gpus_per_node": 4}}}


def test_default_requests_are_fitted_to_the_cluster_queues_quota_and_the_run_is_admitted(cli, fake_kueue):
    fake_kueue(queues={"team": 8}, profile=DEFAULTS_PROFILE)
    spec = cli.spec("fits", "name: fits\ncompute: {cluster: fake, gpus: 8, gpu_type: gpu}\ncommand: sleep 300\n")
    r = cli("run", "-f", str(spec))
    assert r.returncode == 0, r.stderr
    name = submitted(r.stdout + r.stderr)
    # It says what it changed and why: the ClusterQueue, the resource, the quota.
    assert "ClusterQueue team" in r.stderr and "memory" in r.stderr and "256Gi" in r.stderr, r.stderr
    try:
        running = cli.wait_status(name, {"RUNNING"}, timeout=30)
        assert running["queue"]["cluster_queue"] == "team"
    finally:
        cli("stop", name, "-y")


def test_requests_no_flavor_of_the_cluster_queue_can_hold_are_a_warning_at_submit(cli, fake_kueue):
    fake_kueue(queues={"team": 8}, profile=DEFAULTS_PROFILE)
    spec = cli.spec(
        "huge",
        "name: huge\ncompute: {cluster: fake, gpus: 8, gpu_type: gpu, memory: 200Gi, cpus: 4}\ncommand: sleep 300\n",
    )
    r = cli("run", "-f", str(spec))
    assert r.returncode == 0, r.stderr  # submitted: the quota may grow; the user hears it now
    name = submitted(r.stdout + r.stderr)
    warning = " ".join(r.stderr.split())
    assert re.search(
        r"ClusterQueue team can never admit run huge-\w+: it asks for 400Gi memory in all \(2 pods\), "
        r"more than its quota of 256Gi",
        warning,
    ), warning
    assert "compute.memory" in warning
    cli("stop", name, "-y")
