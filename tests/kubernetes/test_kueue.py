"""Kueue as the launcher reads it (launcher/backends/kubernetes/kueue.py): pure functions of
Workload, LocalQueue and ClusterQueue objects shaped as Kueue's API serves them
(kueue.x-k8s.io/v1beta2, whose conditions, queueName, priority and admission v1beta1 shares)."""

from __future__ import annotations

from datetime import UTC, datetime

from launcher.backends.base import RunStatus
from launcher.backends.capabilities import Eviction
from launcher.backends.kubernetes import kueue
from launcher.backends.kubernetes.attempts import Observed
from launcher.backends.kubernetes.kueue import KueueView
from launcher.backends.kubernetes.status import derive
from launcher.spec.retry import EVICTED, SYSTEM, USER, RetryPolicy
from tests.kubernetes.test_status import T0, T1, job, pod, record

T2, T3 = "2025-01-01T00:01:00Z", "2025-01-01T00:02:00Z"
PENDING_MESSAGE = (
    "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor "
    "h100, 8 more needed"
)
PREEMPTED_MESSAGE = (
    "Preempted to accommodate a workload (UID: 7c1f, JobUID: 9a2e) due to prioritization in the ClusterQueue"
)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def cond(kind: str, status: str, reason: str, message: str, when: str = T1) -> dict:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": when,
        "observedGeneration": 1,
    }


def workload(
    name: str,
    *,
    queue: str = "team-a",
    priority: int = 0,
    created: str = T0,
    owner_uid: str | None = None,
    conditions: list[dict] | None = None,
    admitted_to: str | None = None,
    active: bool = True,
    evictions: list[dict] | None = None,
    gpus: int = 8,
    count: int = 2,
) -> dict:
    """A Workload as Kueue's job reconciler makes it for a Job (one pod set `main`)."""
    meta = {
        "name": name,
        "namespace": "default",
        "uid": f"wl-{name}",
        "creationTimestamp": created,
        "labels": {"kueue.x-k8s.io/job-uid": owner_uid or f"uid-{name}"},
        "ownerReferences": [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": name.removeprefix("job-")[:-6],
                "uid": owner_uid or f"uid-{name}",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    status: dict = {"conditions": conditions or []}
    if admitted_to:
        status["admission"] = {
            "clusterQueue": admitted_to,
            "podSetAssignments": [
                {
                    "name": "main",
                    "flavors": {"nvidia.com/gpu": "h100"},
                    "resourceUsage": {"nvidia.com/gpu": str(gpus * count)},
                    "count": count,
                }
            ],
        }
    if evictions:
        status["schedulingStats"] = {"evictions": evictions}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": meta,
        "spec": {
            "queueName": queue,
            "priority": priority,
            "active": active,
            "podSets": [
                {
                    "name": "main",
                    "count": count,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "trainer",
                                    "resources": {
                                        "requests": {"nvidia.com/gpu": str(gpus)},
                                        "limits": {"nvidia.com/gpu": str(gpus)},
                                    },
                                }
                            ]
                        }
                    },
                }
            ],
        },
        "status": status,
    }


def pending(name: str, **kw) -> dict:
    return workload(
        name, conditions=[cond("QuotaReserved", "False", "Pending", PENDING_MESSAGE, kw.pop("since", T1))], **kw
    )


def admitted(name: str, **kw) -> dict:
    return workload(
        name,
        admitted_to="cq-a",
        conditions=[
            cond("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq-a"),
            cond("Admitted", "True", "Admitted", "The workload is admitted"),
        ],
        **kw,
    )


def preempted(name: str, **kw) -> dict:
    """Evicted by a higher priority one and requeued: Kueue's conditions after the preemption."""
    return workload(
        name,
        evictions=[{"reason": "Preempted", "underlyingCause": "", "count": 1}],
        conditions=[
            cond("QuotaReserved", "False", "Pending", PENDING_MESSAGE, T2),
            cond("Admitted", "False", "NoReservation", "The workload has no reservation", T2),
            cond("Evicted", "True", "Preempted", PREEMPTED_MESSAGE, T2),
            cond("Preempted", "True", "InClusterQueue", PREEMPTED_MESSAGE, T2),
            cond("Requeued", "True", "Preempted", PREEMPTED_MESSAGE, T2),
        ],
        **kw,
    )


def owner(uid: str, queue: str | None = "team-a") -> dict:
    labels = {"launcher.dev/run": "r"}
    if queue:
        labels["kueue.x-k8s.io/queue-name"] = queue
    return {"metadata": {"name": "r", "uid": uid, "labels": labels}}


def view(*workloads: dict, pending_items: dict | None = None) -> KueueView:
    return KueueView(
        "v1beta2",
        namespace="default",
        workloads=list(workloads),
        cluster_queues={"team-a": "cq-a"},
        pending=pending_items or {},
    )


def test_a_runs_workload_is_the_one_it_owns_or_names_by_uid():
    mine, other = pending("job-r-1a2b3", owner_uid="u1"), pending("job-s-4c5d6", owner_uid="u2")
    assert kueue.owned_workload(owner("u1"), [other, mine]) is mine
    by_label = pending("job-r-1a2b3", owner_uid="u1")
    by_label["metadata"]["ownerReferences"] = []  # orphaned, as a delete with propagation Orphan leaves it
    assert kueue.owned_workload(owner("u1"), [by_label]) is by_label
    assert kueue.owned_workload(owner("u3"), [mine, other]) is None
    assert kueue.owned_workload(None, [mine]) is None


def test_pending_order_is_priority_then_age_of_the_same_queues_pending_workloads():
    order = kueue.pending_order(
        [
            pending("old-low", priority=10, created=T0),
            pending("new-high", priority=100, created=T2),
            pending("new-low", priority=10, created=T2),
            admitted("running", priority=1000),
            pending("elsewhere", queue="team-b", priority=1000),
            workload("deactivated", active=False, conditions=[cond("QuotaReserved", "False", "Pending", "x")]),
            workload("done", conditions=[cond("Finished", "True", "JobFinished", "Job finished successfully")]),
        ],
        "team-a",
    )
    assert [w["metadata"]["name"] for w in order] == ["new-high", "old-low", "new-low"]


def test_a_pending_run_has_its_position_counted_from_the_namespace_and_kueues_reason():
    mine = pending("job-r-1a2b3", owner_uid="u1", priority=10, created=T2, since=T2)
    ahead = pending("job-s-4c5d6", priority=100, created=T3)
    state = kueue.queue_state(owner("u1"), view(ahead, mine, pending("job-t-7e8f9", priority=10, created=T3)))
    assert (state.queue, state.cluster_queue, state.workload) == ("team-a", "cq-a", "job-r-1a2b3")
    assert (state.position, state.pending, state.position_in_cluster_queue) == (2, 3, None)
    assert state.position_from == "the pending Workloads of namespace default"
    assert state.reason == PENDING_MESSAGE and state.since == at(T2) and not state.admitted
    assert kueue.queue_text(state) == f"#2 of 3 in team-a (cq-a): {PENDING_MESSAGE}"


def test_the_visibility_apis_positions_win_over_counting():
    mine = pending("job-r-1a2b3", owner_uid="u1")
    items = {
        "team-a": [
            {
                "metadata": {"name": "job-x-00000", "namespace": "other"},
                "priority": 100,
                "localQueueName": "team-a",
                "positionInClusterQueue": 0,
                "positionInLocalQueue": 0,
            },
            {
                "metadata": {"name": "job-r-1a2b3", "namespace": "default"},
                "priority": 0,
                "localQueueName": "team-a",
                "positionInClusterQueue": 4,
                "positionInLocalQueue": 1,
            },
        ]
    }
    state = kueue.queue_state(owner("u1"), view(mine, pending_items=items))
    assert (state.position, state.pending, state.position_in_cluster_queue) == (2, 2, 5)
    assert state.position_from == "Kueue's visibility API"


def test_an_admitted_run_has_its_cluster_queue_from_the_admission_and_no_position():
    state = kueue.queue_state(
        owner("u1"), KueueView("v1beta1", namespace="default", workloads=[admitted("job-r-1a2b3", owner_uid="u1")])
    )
    assert state.admitted and state.cluster_queue == "cq-a"
    assert state.position is None and state.reason is None and state.evictions == []


def test_without_kueue_or_without_a_workload_the_reason_says_so():
    assert kueue.queue_state(owner("u1", queue=None), view()) is None
    assert "not served by this cluster" in kueue.queue_state(owner("u1"), KueueView(None)).reason
    assert kueue.queue_state(owner("u1"), view()).reason == (
        "no Kueue Workload for it yet (Kueue creates one where it manages namespace default)"
    )


def test_a_preemption_is_an_eviction_with_kueues_reason_message_and_time():
    assert kueue.evictions(preempted("w")) == [
        Eviction("Preempted", f"{PREEMPTED_MESSAGE} (InClusterQueue)", at(T2), 1)
    ]
    # Re-admitted: Kueue resets the condition ("Previously: ..."), schedulingStats keeps the count.
    again = admitted(
        "w",
        evictions=[
            {"reason": "PodsReadyTimeout", "underlyingCause": "", "count": 1},
            {"reason": "Preempted", "underlyingCause": "", "count": 2},
        ],
    )
    again["status"]["conditions"] += [
        cond("Evicted", "False", "QuotaReserved", f"Previously: {PREEMPTED_MESSAGE}", T3),
        cond("Preempted", "False", "QuotaReserved", f"Previously: {PREEMPTED_MESSAGE}", T3),
    ]
    assert kueue.evictions(again) == [
        Eviction("PodsReadyTimeout", "", None, 1),
        Eviction("Preempted", PREEMPTED_MESSAGE, None, 2),
    ]
    assert kueue.evictions(pending("w")) == []


def queued_jobset(uid: str = "u1", *, suspend: bool = False) -> dict:
    """The run's JobSet, for Kueue queue team-a (Kueue's Workload names it by uid)."""
    labels = {"launcher.dev/run": "r", "kueue.x-k8s.io/queue-name": "team-a"}
    return {
        "metadata": {"name": "r", "uid": uid, "creationTimestamp": T0, "labels": labels},
        "spec": {"suspend": True} if suspend else {},
        "status": {"restarts": 0},
    }


def observed(pods=(), *, events=(), kueue_view=None, suspend=False) -> Observed:
    return Observed(
        "r",
        record=record(),
        jobset=queued_jobset(suspend=suspend),
        jobs=[] if suspend else [job(nodes=1)],
        pods=list(pods),
        events=list(events),
        kueue=kueue_view,
    )


def test_a_run_kueue_is_evicting_is_queued_again_with_the_event_that_says_why():
    pods = [pod(0, state={"running": {"startedAt": T0}})]
    run, action = derive(observed(pods, kueue_view=view(preempted("jobset-r-1a2b3", owner_uid="u1"))))
    assert run.status is RunStatus.QUEUED and action is None
    assert run.reason == f"evicted by Kueue (Preempted); #1 of 1 in team-a (cq-a): {PENDING_MESSAGE}"
    assert run.attempts[-1].status is RunStatus.QUEUED and len(run.attempts) == 1
    evicted = [e for e in run.events if e.reason and e.reason.startswith("evicted by Kueue")]
    assert [(e.status, e.at, e.attempt) for e in evicted] == [(RunStatus.QUEUED, at(T2), 1)]
    assert run.queue.evictions[0].message == f"{PREEMPTED_MESSAGE} (InClusterQueue)"


def test_an_eviction_does_not_count_against_max_retries():
    """The retry policy every backend reads: an attempt Kueue evicted is no failure of the program."""
    assert RetryPolicy(max_retries=1).allows([EVICTED, EVICTED], USER)
    assert not RetryPolicy(max_retries=1).allows([EVICTED, USER], USER)
    assert RetryPolicy().allows([], EVICTED) and not RetryPolicy().allows([], SYSTEM)


def test_an_admitted_run_waiting_for_a_node_keeps_the_schedulers_reason():
    waiting = [pod(0, phase="Pending", scheduled=False)]
    events = [
        {
            "reason": "FailedScheduling",
            "involvedObject": {"kind": "Pod", "name": "r-0-abcde"},
            "lastTimestamp": T1,
            "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
        }
    ]
    run, _ = derive(observed(waiting, events=events, kueue_view=view(admitted("jobset-r-1a2b3", owner_uid="u1"))))
    assert run.status is RunStatus.QUEUED
    assert run.reason == "rank 0 is waiting for a node: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
    assert run.queue.admitted and run.queue.cluster_queue == "cq-a"
    run, _ = derive(observed(suspend=True, kueue_view=view(pending("jobset-r-1a2b3", owner_uid="u1"))))
    assert run.status is RunStatus.QUEUED and run.reason == f"#1 of 1 in team-a (cq-a): {PENDING_MESSAGE}"


def test_a_cluster_queues_gpu_quota_usage_and_a_workloads_gpus():
    cq = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq-a"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "h100",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "512"},
                                {"name": "nvidia.com/gpu", "nominalQuota": 32},
                            ],
                        },
                        {
                            "name": "a100",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "256"},
                                {"name": "nvidia.com/gpu", "nominalQuota": "16"},
                            ],
                        },
                    ],
                }
            ],
        },
        "status": {
            "pendingWorkloads": 2,
            "admittedWorkloads": 1,
            "flavorsUsage": [
                {
                    "name": "h100",
                    "resources": [
                        {"name": "cpu", "total": "64", "borrowed": "0"},
                        {"name": "nvidia.com/gpu", "total": "16", "borrowed": "0"},
                    ],
                }
            ],
        },
    }
    assert kueue.cluster_queue_gpus(cq, {"nvidia.com/gpu"}) == (48, 16)
    assert kueue.workload_gpus(pending("w", gpus=8, count=2), {"nvidia.com/gpu"}) == 16
    asked = pending("w")
    asked["status"]["resourceRequests"] = [{"name": "main", "resources": {"cpu": "8", "nvidia.com/gpu": "24"}}]
    assert kueue.workload_gpus(asked, {"nvidia.com/gpu"}) == 24


def _cluster_queue(cohort: str | None, borrowing: str | None) -> dict:
    def flavor(name: str, memory: str) -> dict:
        quota = {"name": "memory", "nominalQuota": memory}
        if borrowing is not None:
            quota["borrowingLimit"] = borrowing
        return {"name": name, "resources": [quota]}

    spec: dict = {
        "resourceGroups": [{"coveredResources": ["memory"], "flavors": [flavor("a", "64Gi"), flavor("b", "128Gi")]}]
    }
    if cohort:
        spec["cohortName"] = cohort
    return {"metadata": {"name": "team"}, "spec": spec}


def test_what_a_cluster_queue_can_ever_admit_is_its_largest_flavors_quota_and_borrowing_limit():
    gi = 2**30
    assert kueue.admissible(_cluster_queue(None, None), "memory") == 128 * gi
    assert kueue.admissible(_cluster_queue(None, "32Gi"), "memory") == 128 * gi  # no cohort: nothing to borrow
    assert kueue.admissible(_cluster_queue("org", "32Gi"), "memory") == 160 * gi
    assert kueue.admissible(_cluster_queue("org", None), "memory") is None  # the cohort's unused quota: no bound
    assert kueue.admissible(_cluster_queue(None, None), "cpu") is None  # not covered: not ours to judge
    assert kueue.quantity_text("memory", kueue.quantity("400Gi")) == "400Gi"
    assert kueue.quantity_text("cpu", kueue.quantity("1500m")) == "1500m"
