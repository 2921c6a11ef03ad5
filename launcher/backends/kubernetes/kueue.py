"""Kueue, as the launcher reads it: a run's Workload, its place in the queue, its evictions,
and the quota of the ClusterQueue behind a profile's queue.

Kueue admits a JobSet or Job labelled `kueue.x-k8s.io/queue-name` through a Workload it
creates beside it (owned by it, labelled `kueue.x-k8s.io/job-uid`), in the version the
cluster serves: kueue.x-k8s.io/v1beta2 where served, else v1beta1 (the fields read here are
the same in both). Of a Workload's conditions:

  QuotaReserved=False   pending; its message says why (quota, flavor, topology)
  Admitted=True         admitted: Kueue unsuspends the run
  Evicted=True          taken off its nodes (reason Preempted, InactiveWorkload,
                        PodsReadyTimeout, ...); Kueue suspends the run and requeues it.
                        On the next admission Kueue sets it False with the message
                        "Previously: <message>"; status.schedulingStats.evictions counts
                        every eviction by reason
  Preempted=True        the preemption's detail (reason InClusterQueue, InCohort...)

The position of a pending Workload is Kueue's own where the visibility API
(visibility.kueue.x-k8s.io/v1beta1 localqueues/<queue>/pendingworkloads) is served, else
counted from the namespace's Workloads: the pending ones of the same LocalQueue, by
priority, then creation time (Kueue's BestEffortFIFO and StrictFIFO order).

read_view and queue_usage are the only functions here that talk to the API server
(through KubeApi); everything else is a pure function of API objects, as status.py's are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from launcher.backends.base import Run, RunStatus, StatusEvent
from launcher.backends.capabilities import Eviction, QueueState, QueueUsage
from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.attempts import conditions, labels, ts

if TYPE_CHECKING:
    from launcher.backends.kubernetes.kubeapi import KubeApi
    from launcher.spec.models import RunSpec

GROUP = "kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")  # the newest first
VISIBILITY = "visibility.kueue.x-k8s.io/v1beta1"
PLURALS = {"Workload": "workloads", "LocalQueue": "localqueues", "ClusterQueue": "clusterqueues"}
PREVIOUSLY = "Previously: "  # Kueue's prefix on an Evicted condition it reset at re-admission


@dataclass
class KueueView:
    """What one look at Kueue found for the runs of a namespace."""

    version: str | None
    """The kueue.x-k8s.io version served (v1beta2, v1beta1); None: the cluster serves no Kueue."""
    namespace: str = ""
    workloads: list[dict] = field(default_factory=list)
    cluster_queues: dict[str, str] = field(default_factory=dict)
    """LocalQueue -> its ClusterQueue (the LocalQueue's spec.clusterQueue)."""
    pending: dict[str, list[dict]] = field(default_factory=dict)
    """LocalQueue -> the visibility API's pending workloads, where it is served."""


# --- pure: Workloads ------------------------------------------------------------------------


def condition(workload: dict | None, kind: str) -> dict | None:
    return conditions(workload).get(kind)


def is_true(workload: dict | None, kind: str) -> bool:
    return (condition(workload, kind) or {}).get("status") == "True"


def owned_workload(owner: dict | None, workloads: list[dict]) -> dict | None:
    """The Workload Kueue made for this JobSet or Job: it owns it (ownerReferences), or at
    least names it by uid (the `kueue.x-k8s.io/job-uid` label)."""
    uid = ((owner or {}).get("metadata") or {}).get("uid")
    if not uid:
        return None
    mine = [
        w
        for w in workloads
        if any(r.get("uid") == uid for r in (w.get("metadata") or {}).get("ownerReferences") or [])
        or labels(w).get(keys.KUEUE_JOB_UID) == uid
    ]
    return max(mine, key=lambda w: (w.get("metadata") or {}).get("creationTimestamp") or "", default=None)


def is_pending(workload: dict) -> bool:
    """Waiting for quota: not finished, no quota reserved, not deactivated."""
    return not (
        is_true(workload, "Finished")
        or is_true(workload, "QuotaReserved")
        or (workload.get("spec") or {}).get("active") is False
    )


def queue_name(workload: dict) -> str | None:
    return (workload.get("spec") or {}).get("queueName") or labels(workload).get(keys.KUEUE_QUEUE)


def pending_order(workloads: list[dict], queue: str) -> list[dict]:
    """The pending Workloads of one LocalQueue in the order Kueue admits them: higher
    priority first, then the older."""

    def key(w: dict) -> tuple:
        meta = w.get("metadata") or {}
        return (
            -int((w.get("spec") or {}).get("priority") or 0),
            meta.get("creationTimestamp") or "",
            meta.get("name", ""),
        )

    return sorted((w for w in workloads if queue_name(w) == queue and is_pending(w)), key=key)


def evictions(workload: dict | None) -> list[Eviction]:
    """The Workload's evictions: one entry per reason Kueue counted (schedulingStats), the
    latest with its message and time from the Evicted condition (Preempted's reason added)."""
    evicted = condition(workload, "Evicted")
    preempted = condition(workload, "Preempted")
    latest: Eviction | None = None
    if evicted and (evicted.get("status") == "True" or (evicted.get("message") or "").startswith(PREVIOUSLY)):
        active = evicted.get("status") == "True"
        message = (evicted.get("message") or "").removeprefix(PREVIOUSLY)
        reason = evicted.get("reason") if active else None
        if (
            preempted
            and (preempted.get("status") == "True" or not active)
            and preempted.get("reason") not in (None, "QuotaReserved")
        ):
            reason = reason or "Preempted"
            message = f"{message} ({preempted['reason']})" if message else preempted["reason"]
        # A reset condition's time is the re-admission's, not the eviction's.
        latest = Eviction(
            reason=reason or "", message=message, at=ts(evicted.get("lastTransitionTime")) if active else None
        )
    counted = [
        (e.get("reason") or "", int(e.get("count") or 0))
        for e in ((workload or {}).get("status") or {}).get("schedulingStats", {}).get("evictions") or []
    ]
    counted = [(reason, n) for reason, n in counted if n > 0]
    if latest is None:
        return [Eviction(reason=reason, count=n) for reason, n in counted]
    if not latest.reason:  # a reset condition: the reason is the one Kueue counted last
        latest.reason = counted[-1][0] if counted else "Evicted"
    out = []
    for reason, n in counted:
        if reason == latest.reason:
            latest.count = n
        else:
            out.append(Eviction(reason=reason, count=n))
    return [*out, latest]


def queue_state(owner: dict | None, view: KueueView | None) -> QueueState | None:
    """Where the run of this JobSet stands in Kueue's queue; None if it names no queue."""
    queue = labels(owner).get(keys.KUEUE_QUEUE)
    if not queue:
        return None
    state = QueueState(queue=queue)
    if view is None:
        return state
    state.cluster_queue = view.cluster_queues.get(queue)
    if view.version is None:
        state.reason = (
            f"Kueue ({GROUP}) is not served by this cluster: nothing admits the run (it was created suspended)"
        )
        return state
    workload = owned_workload(owner, view.workloads)
    if workload is None:
        state.reason = f"no Kueue Workload for it yet (Kueue creates one where it manages namespace {view.namespace})"
        return state
    meta, status = workload.get("metadata") or {}, workload.get("status") or {}
    state.workload = meta.get("name")
    state.cluster_queue = (status.get("admission") or {}).get("clusterQueue") or state.cluster_queue
    state.admitted = is_true(workload, "Admitted")
    state.evictions = evictions(workload)
    if (workload.get("spec") or {}).get("active") is False:
        evicted = condition(workload, "Evicted") or {}
        state.reason = f"deactivated in Kueue: {evicted.get('message') or 'spec.active is false'}"
        return state
    if not is_pending(workload):
        return state
    reserved = condition(workload, "QuotaReserved")
    refused = reserved if reserved is not None and reserved.get("status") == "False" else None
    state.reason = (
        (refused.get("message") or refused.get("reason")) if refused is not None else "waiting for Kueue to consider it"
    )
    state.since = (
        ts(refused.get("lastTransitionTime"))
        if refused is not None and refused.get("lastTransitionTime")
        else ts(meta.get("creationTimestamp"))
    )
    listed = view.pending.get(queue)
    if listed is not None:
        item = next((i for i in listed if (i.get("metadata") or {}).get("name") == state.workload), None)
        if item is not None:
            state.position = int(item.get("positionInLocalQueue") or 0) + 1
            cq = item.get("positionInClusterQueue")
            state.position_in_cluster_queue = None if cq is None else int(cq) + 1
            state.pending, state.position_from = len(listed), "Kueue's visibility API"
            return state
    order = [
        (w.get("metadata") or {}).get("name") for w in pending_order(view.workloads, queue_name(workload) or queue)
    ]
    if state.workload in order:
        state.position, state.pending = order.index(state.workload) + 1, len(order)
        state.position_from = f"the pending Workloads of namespace {view.namespace}"
    return state


def queue_text(state: QueueState) -> str:
    """A queued run's reason as listings show it: its place, its queues, Kueue's reason."""
    where = f"{state.queue} ({state.cluster_queue})" if state.cluster_queue else state.queue
    head = f"#{state.position} of {state.pending} in {where}" if state.position else f"in queue {where}"
    return f"{head}: {state.reason}" if state.reason else head


def eviction_text(e: Eviction) -> str:
    return f"evicted by Kueue ({e.reason})" + (f": {e.message}" if e.message else "")


def apply(run: Run, state: QueueState | None) -> None:
    """Put what Kueue says into the run its objects describe: its queue state, an event for
    the eviction under way, and QUEUED with Kueue's words while Kueue evicts it or it waits
    for quota (a run Kueue admitted that waits for a node keeps the scheduler's reason).
    Nothing here counts an eviction as a failure."""
    if state is None:
        return
    run.queue = state
    evicting = next((e for e in reversed(state.evictions) if e.at is not None), None)
    if evicting is not None and evicting.at is not None:
        text = eviction_text(evicting)
        if not any(e.at == evicting.at and e.reason == text for e in run.events):
            run.events.append(StatusEvent(RunStatus.QUEUED, evicting.at, run.current_attempt, text))
            run.events.sort(key=lambda e: e.at)
    if run.status.is_terminal or not (evicting is not None or (run.status is RunStatus.QUEUED and not state.admitted)):
        return
    run.status = RunStatus.QUEUED
    run.reason = queue_text(state) if evicting is None else f"evicted by Kueue ({evicting.reason}); {queue_text(state)}"
    if run.attempts and not run.attempts[-1].status.is_terminal:
        run.attempts[-1].status, run.attempts[-1].reason = RunStatus.QUEUED, run.reason


# --- reading --------------------------------------------------------------------------------


def use_served_version(api: KubeApi) -> str | None:
    """The kueue.x-k8s.io version the cluster serves (v1beta2 first), set on the client's
    kinds; None where Kueue is not installed. Asked once per client."""
    for version in VERSIONS:
        found = api.discover_once(f"{GROUP}/{version}")
        if any(r.get("name") == "workloads" for r in (found or {}).get("resources") or []):
            for kind, plural in PLURALS.items():
                api.kinds[kind] = (f"/apis/{GROUP}/{version}", plural)
            return version
    return None


def serves_visibility(api: KubeApi) -> bool:
    found = api.discover_once(VISIBILITY)
    return any(r.get("name") == "localqueues/pendingworkloads" for r in (found or {}).get("resources") or [])


def _readable(call, default):
    """A read this identity may not be allowed (403) or the cluster may not have (404)
    leaves that part of the view empty: the run's own status does not hang on it."""
    from launcher.backends.kubernetes.kubeapi import KubeError

    try:
        return call()
    except KubeError as e:
        if e.status in (403, 404):
            return default
        raise


def read_view(api: KubeApi, owners: list[dict | None]) -> KueueView | None:
    """What Kueue says about these runs (their JobSets or Jobs): None where none names a
    queue. One discovery per client, one list of the namespace's Workloads, and per queue
    with a pending run its LocalQueue and (where served) the visibility API's pending list."""
    queues = {q for o in owners if o is not None and (q := labels(o).get(keys.KUEUE_QUEUE))}
    if not queues:
        return None
    version = use_served_version(api)
    view = KueueView(version, namespace=api.namespace)
    if version is None:
        return view
    view.workloads = _readable(lambda: api.list("Workload")[0], [])
    waiting = {queue_name(w) for w in view.workloads if is_pending(w)}
    for queue in sorted(queues & waiting):
        local = _readable(lambda queue=queue: api.get("LocalQueue", queue), None)
        if local and (local.get("spec") or {}).get("clusterQueue"):
            view.cluster_queues[queue] = local["spec"]["clusterQueue"]
        if serves_visibility(api):
            listed = _readable(lambda queue=queue: api.get("PendingWorkloads", queue, "pendingworkloads"), None)
            if listed is not None:
                view.pending[queue] = listed.get("items") or []
    return view


# --- quota (`launcher util`) ----------------------------------------------------------------


def _count(value: Any) -> int:
    from launcher.backends.kubernetes.usage import quantity_count

    return quantity_count(value)


def cluster_queue_gpus(cluster_queue: dict, resources: set[str]) -> tuple[int, int]:
    """(nominal quota, usage) of a ClusterQueue in these GPU resources, over every flavor."""
    quota = sum(
        _count(r.get("nominalQuota"))
        for g in (cluster_queue.get("spec") or {}).get("resourceGroups") or []
        for f in g.get("flavors") or []
        for r in f.get("resources") or []
        if r.get("name") in resources
    )
    used = sum(
        _count(r.get("total"))
        for f in (cluster_queue.get("status") or {}).get("flavorsUsage") or []
        for r in f.get("resources") or []
        if r.get("name") in resources
    )
    return quota, used


def workload_gpus(workload: dict, resources: set[str]) -> int:
    """GPUs a Workload asks for: status.resourceRequests where Kueue filled it, else its pod
    sets' count times each pod's containers' requests (a GPU's request defaults to its limit)."""
    from launcher.backends.kubernetes.usage import pod_request

    asked = (workload.get("status") or {}).get("resourceRequests")
    if asked:
        return sum(_count((ps.get("resources") or {}).get(r, 0)) for ps in asked for r in resources)
    return sum(
        int(ps.get("count") or 0) * pod_request(ps.get("template") or {}, r)
        for ps in (workload.get("spec") or {}).get("podSets") or []
        for r in resources
    )


def cluster_queue_of(api: KubeApi, queue: str) -> dict | None:
    """The ClusterQueue the LocalQueue `queue` points at; None where Kueue does not serve
    them (not installed, no such queue, or not ours to read)."""
    if use_served_version(api) is None:
        return None
    local = _readable(lambda: api.get("LocalQueue", queue), None)
    name = ((local or {}).get("spec") or {}).get("clusterQueue")
    return _readable(lambda: api.get("ClusterQueue", name), None) if name else None


def queue_usage(api: KubeApi, queue: str, resources: set[str]) -> list[QueueUsage]:
    """The ClusterQueue behind the profile's LocalQueue: its GPU quota and usage, its pending
    workloads (Kueue's count), and the GPUs those of this namespace ask for (a ClusterQueue's
    other namespaces may not be ours to list)."""
    cq = cluster_queue_of(api, queue)
    if cq is None:
        return []
    name = cq["metadata"]["name"]
    quota, used = cluster_queue_gpus(cq, resources)
    workloads = _readable(lambda: api.list("Workload")[0], None)
    pending_gpus = (
        None
        if workloads is None
        else sum(workload_gpus(w, resources) for w in workloads if queue_name(w) == queue and is_pending(w))
    )
    return [
        QueueUsage(
            queue=queue,
            cluster_queue=name,
            quota=quota,
            used=used,
            pending_workloads=int((cq.get("status") or {}).get("pendingWorkloads") or 0),
            pending_gpus=pending_gpus,
        )
    ]


# --- what a ClusterQueue can ever admit (submit) ----------------------------------------------------


def quantity(value: Any) -> Decimal:
    """A Kubernetes quantity ("64Gi", "500m", 8) as a number (the client's own parser)."""
    from kubernetes.utils import parse_quantity

    return Decimal(parse_quantity(value))


def quantity_text(resource: str, value: Decimal) -> str:
    """A quantity as a person reads it: memory in the largest binary unit that divides it, CPUs
    whole or in millicores, anything else as a number."""
    if resource == "memory" or resource.endswith("storage"):
        for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if value >= size and value % size == 0:
                return f"{value // size}{unit}"
        return str(int(value))
    if value == value.to_integral_value():
        return str(int(value))
    return f"{int(value * 1000)}m"


def admissible(cluster_queue: dict, resource: str) -> Decimal | None:
    """The most of `resource` that one flavor of the ClusterQueue can ever give one workload
    (Kueue puts every pod set of a resource group in one flavor): its nominalQuota, plus its
    borrowingLimit where the ClusterQueue is in a cohort. None where that has no bound (a
    cohort and no borrowingLimit) or no resource group covers the resource."""
    spec = cluster_queue.get("spec") or {}
    cohort = spec.get("cohortName") or spec.get("cohort")
    best: Decimal | None = None
    for group in spec.get("resourceGroups") or []:
        if resource not in (group.get("coveredResources") or []):
            continue
        for flavor in group.get("flavors") or []:
            for r in flavor.get("resources") or []:
                if r.get("name") != resource:
                    continue
                limit = quantity(r.get("nominalQuota") or 0)
                if cohort:
                    if r.get("borrowingLimit") is None:
                        return None  # it may borrow whatever the cohort has unused
                    limit += quantity(r["borrowingLimit"])
                best = limit if best is None else max(best, limit)
    return best


SPEC_FIELDS = {"cpu": "cpus", "memory": "memory"}  # the compute fields that set a pod's requests


def fit_requests(spec: RunSpec, cluster: str, cluster_queue: dict, jobset: dict) -> list[str]:
    """Make a run's JobSet one the ClusterQueue can admit where the launcher's defaults are why
    it could not, and warn of what no flavor of it ever holds. Its pods' requests (the main
    container's; a default CPU or memory request is a share of the node per GPU) are changed in
    place: a default past the quota becomes the ClusterQueue's own share per GPU (its quota of
    the resource over its GPUs), and the warning says so. What the spec asks for is never
    changed: a total past every flavor's nominal quota and borrowing limit is a warning naming
    the ClusterQueue, the resource and the quota (the run is created; Kueue keeps it pending)."""
    cq = (cluster_queue.get("metadata") or {}).get("name", "")
    job = jobset["spec"]["replicatedJobs"][0]
    pods = int(job.get("replicas") or 1) * int(job["template"]["spec"].get("parallelism") or 1)
    pod = job["template"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    requests = container["resources"]["requests"]
    gpu = next((r for r in requests if r not in ("cpu", "memory")), None)
    warnings = []
    gpu_quota = admissible(cluster_queue, gpu) if gpu else None
    for resource, field_name in SPEC_FIELDS.items():
        limit = admissible(cluster_queue, resource)
        if getattr(spec.compute, field_name) or gpu is None or not gpu_quota or limit is None:
            continue  # the spec's own value, a CPU-only pod, or a queue with no bound to fit
        asked = quantity(requests[resource])
        if asked * pods <= limit:
            continue
        share = limit / gpu_quota * quantity(requests[gpu])
        fitted = share.to_integral_value(rounding="ROUND_FLOOR") if resource == "memory" else _millis(share)
        if fitted <= 0:
            continue  # a queue with none of it: the warning below says so, a request of 0 helps nobody
        requests[resource] = quantity_text(resource, fitted)
        for volume in pod.get("volumes") or []:  # /dev/shm may take what the pod asked for, no more
            empty = volume.get("emptyDir") or {}
            if (
                empty.get("medium") == "Memory"
                and resource == "memory"
                and quantity(empty.get("sizeLimit", 0)) > fitted
            ):
                empty["sizeLimit"] = requests[resource]
        warnings.append(
            f"clusters.{cluster}.queue: the default {resource} request, {quantity_text(resource, asked)} a pod "
            f"({quantity_text(resource, asked * pods)} for {pods}), is more than ClusterQueue {cq} ever admits "
            f"({quantity_text(resource, limit)} of {resource}): each pod requests "
            f"{requests[resource]} instead, the queue's share for its GPUs (compute.{field_name} chooses)"
        )
    for resource, value in requests.items():
        limit = admissible(cluster_queue, resource)
        total = quantity(value) * pods
        if limit is not None and total > limit:
            field_name = SPEC_FIELDS.get(resource, "gpus")
            warnings.append(
                f"ClusterQueue {cq} can never admit run {spec.name}: it asks for "
                f"{quantity_text(resource, total)} {resource} in all ({pods} pods), more than its quota of "
                f"{quantity_text(resource, limit)} in any flavor (nominal quota and borrowing limit); Kueue keeps "
                f"it pending until the quota grows (lower compute.{field_name}, or ask the cluster's admin)"
            )
    return warnings


def _millis(value: Decimal) -> Decimal:
    return (value * 1000).to_integral_value(rounding="ROUND_FLOOR") / 1000
