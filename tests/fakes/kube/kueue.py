"""Kueue simulated (after kubernetes-sigs/kueue v0.19.2; the API is kueue_api.py's): its
webhook, job reconciler, scheduler and queue status, for JobSets and batch Jobs.

  * Webhook: a JobSet or Job created with the label kueue.x-k8s.io/queue-name (and no
    controlling owner) is suspended at create.
  * Workloads: one per such job, named as Kueue names them (`jobset-<name>-<hash5>`,
    `job-<name>-<hash5>`; jobframework.GetWorkloadNameForOwnerWithGVK), owned by the job
    (deleted with it; one whose job is gone is deleted), label kueue.x-k8s.io/job-uid,
    spec.queueName, spec.podSets (one per replicatedJob, named after it, or `main` for a
    Job; count = replicas x min(parallelism, completions); the pod template; a
    topologyRequest from the podset-required/preferred-topology annotation),
    spec.priority and spec.priorityClassRef from the kueue.x-k8s.io/priority-class label
    naming a WorkloadPriorityClass (a missing class: no Workload, a Warning event).
  * Scheduling, per ClusterQueue (a LocalQueue's spec.clusterQueue): pending Workloads in
    priority, then creation (FIFO) order; resourceGroups' flavors tried in order against
    nominalQuota (no cohorts, no borrowing); queueingStrategy StrictFIFO stops at the first
    that does not fit, BestEffortFIFO (the default) goes on. Admission sets
    status.admission (clusterQueue, podSetAssignments with flavors, resourceUsage, count,
    topologyAssignment), QuotaReserved and Admitted True; the job is then unsuspended
    with the flavor's nodeLabels (and the topology domain) in its pod templates'
    nodeSelector. A Workload that does not fit has QuotaReserved=False reason Pending with
    Kueue's message ("couldn't assign flavors to pod set main: insufficient unused quota
    for nvidia.com/gpu in flavor default, 4 more needed") and status.resourceRequests.
  * Preemption (spec.preemption.withinClusterQueue LowerPriority or
    LowerOrNewerEqualPriority): a pending Workload that fits once lower-priority admitted
    Workloads of its ClusterQueue go evicts the fewest (lowest priority, newest admitted
    first): Evicted=True reason Preempted and Preempted=True reason InClusterQueue (Kueue's
    message), its job suspended (its pods deleted by the Job controller); once no pod of
    the job is left its quota is released (QuotaReserved=False Pending, Admitted=False
    NoReservation, Requeued=True, schedulingStats.evictions) and it queues again, to be
    readmitted when quota frees (Evicted and Preempted then go False, "Previously: ...").
    The preemptor says ". Pending the preemption of N workload(s)" meanwhile.
  * Finished=True (Succeeded or Failed, the job's message) when the job ends: its quota is
    free. PodsReady follows the job's ready pods (Started / WaitForStart).
  * Topology (TAS): a ResourceFlavor with spec.topologyName names a Topology whose levels
    are node labels. A pod set with podset-required-topology LEVEL is admitted only when
    the nodes sharing one value of LEVEL (and matching the flavor's nodeLabels) have room
    for all its pods (GPUs per node, less what admitted Workloads and other pods hold;
    the fullest domain that fits, as BestFit); its pods get nodeSelector LEVEL=value.
    podset-preferred-topology takes one domain when one fits, else spreads. Otherwise
    Kueue's message: `topology "default" allows to fit only 2 out of 4 pod(s)`.
  * Status: ClusterQueue and LocalQueue pendingWorkloads, reservingWorkloads,
    admittedWorkloads, flavorsReservation, flavorsUsage, condition Active.
  * Visibility API (visibility.kueue.x-k8s.io v1beta1 and v1beta2):
    clusterqueues/<name>/pendingworkloads and namespaces/<ns>/localqueues/<name>/pendingworkloads
    answer a PendingWorkloadsSummary in queue order with positionInClusterQueue and
    positionInLocalQueue (limit, offset).

Left out: cohorts and borrowing, fair sharing, admission checks, waitForPodsReady,
partial admission, pod-level integrations, preemption that frees topology room (it frees
quota only), per-pod hostname assignment (a pod set's pods share its domain's nodeSelector).
"""

from __future__ import annotations

import copy
import hashlib
from collections import defaultdict
from decimal import Decimal
from typing import Any

from tests.fakes.kube import kueue_api
from tests.fakes.kube.common import ApiError, parse_rfc3339_ns, rfc3339
from tests.fakes.kube.jobs import true_conditions
from tests.fakes.kube.resources import KUEUE_GROUP, VISIBILITY_GROUP, Resource
from tests.fakes.kube.scheduler import GPU
from tests.fakes.kube.store import Store, record_event

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
HOSTNAME = "kubernetes.io/hostname"
NOT_READY = "Not all pods are ready or succeeded"
READY = "All pods reached readiness and the workload is running"
OWNER_GROUPS = {"JobSet": "jobset.x-k8s.io", "Job": "batch"}
OWNER_VERSIONS = {"JobSet": "jobset.x-k8s.io/v1alpha2", "Job": "batch/v1"}
NODE_CAPACITY = {"cpu": Decimal(16), "memory": Decimal(64 * 2**30)}  # scheduler.node_object's


def topology_nodes(
    count: int, gpus: int, topology: dict[str, list[str]] | None = None, labels: dict[str, str] | None = None
) -> list[dict]:
    """FakeKube nodes fake-node-<i>, each key of `topology` spread over its values in
    contiguous blocks (4 nodes over r1,r2: r1 r1 r2 r2)."""
    topology = topology or {}
    return [
        {
            "name": f"fake-node-{i}",
            "gpus": gpus,
            "labels": {
                HOSTNAME: f"fake-node-{i}",
                **(labels or {}),
                **{k: v[min(len(v) - 1, i * len(v) // count)] for k, v in topology.items()},
            },
        }
        for i in range(count)
    ]


def configure(
    kueue: KueueController,
    *,
    queues: dict[str, int] | None = None,
    preempt: bool | set[str] = False,
    priority_classes: dict[str, int] | None = None,
    topology: list[str] | None = None,
) -> None:
    """The objects of a small Kueue setup: a Topology `default` (levels: `topology`, then
    kubernetes.io/hostname) when given, WorkloadPriorityClasses, and per queue name a
    ClusterQueue and LocalQueue (KueueController.add_queue) with that many GPUs; preempt
    True (or the set of queue names) turns on withinClusterQueue LowerPriority."""
    if topology:
        kueue.add_topology("default", [*list(topology), HOSTNAME])
    for name, value in (priority_classes or {}).items():
        kueue.add_priority_class(name, value)
    for name, gpus in (queues or {}).items():
        kueue.add_queue(
            name,
            gpus,
            preempt=name in preempt if isinstance(preempt, set) else preempt,
            topology="default" if topology else None,
        )


def workload_name(kind: str, name: str, uid: str) -> str:
    """jobframework.GetWorkloadNameForOwnerWithGVK (long names)."""
    h = hashlib.sha1(f"{kind}\n{OWNER_GROUPS[kind]}\n{name}\n{uid}".encode()).hexdigest()[:5]
    return f"{(kind.lower() + '-' + name)[: 253 - 6]}-{h}"


def set_condition(obj: dict, type_: str, status: str, reason: str, message: str) -> bool:
    """apimeta.SetStatusCondition: lastTransitionTime moves only when the status does."""
    conds = obj.setdefault("status", {}).setdefault("conditions", [])
    gen = obj["metadata"].get("generation", 1)
    for c in conds:
        if c["type"] == type_:
            if (c["status"], c["reason"], c["message"]) == (status, reason, message):
                return False
            if c["status"] != status:
                c["lastTransitionTime"] = rfc3339()
            c.update(status=status, reason=reason, message=message[:32768], observedGeneration=gen)
            return True
    conds.append(
        {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message[:32768],
            "observedGeneration": gen,
            "lastTransitionTime": rfc3339(),
        }
    )
    return True


def condition(obj: dict, type_: str) -> dict | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


def is_true(obj: dict, type_: str) -> bool:
    c = condition(obj, type_)
    return c is not None and c["status"] == "True"


def quantity(value: Any) -> Decimal:
    from kubernetes.utils import parse_quantity

    return Decimal(parse_quantity(value))


def format_quantity(resource: str, value: Decimal) -> str:
    if value == value.to_integral_value():
        n = int(value)
        if resource == "memory" or resource.endswith("storage"):
            for suffix, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
                if n and n % size == 0:
                    return f"{n // size}{suffix}"
        return str(n)
    return f"{int(value * 1000)}m"


def pod_requests(pod_spec: dict) -> dict[str, Decimal]:
    """One pod's requests (limits stand in for missing requests): the containers' sum, or an
    init container's, whichever is larger, per resource."""

    def of(container: dict) -> dict[str, Decimal]:
        res = container.get("resources") or {}
        merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        return {k: quantity(v) for k, v in merged.items()}

    total: dict[str, Decimal] = defaultdict(Decimal)
    for c in pod_spec.get("containers") or []:
        for k, v in of(c).items():
            total[k] += v
    for c in pod_spec.get("initContainers") or []:
        for k, v in of(c).items():
            total[k] = max(total[k], v)
    return {k: v for k, v in total.items() if v}


def pod_sets(kind: str, job: dict) -> list[dict]:
    """Kueue's PodSets of a JobSet (one per replicatedJob) or a Job (`main`)."""
    if kind == "JobSet":
        groups = [(rj["name"], rj.get("replicas", 1), rj["template"]["spec"]) for rj in job["spec"]["replicatedJobs"]]
    else:
        groups = [("main", 1, job["spec"])]
    out = []
    for name, replicas, job_spec in groups:
        parallelism = job_spec.get("parallelism", 1)
        per_replica = min(parallelism, job_spec.get("completions", parallelism))
        template = copy.deepcopy(job_spec.get("template") or {})
        ps: dict[str, Any] = {"name": name, "count": replicas * per_replica, "template": template}
        notes = (template.get("metadata") or {}).get("annotations") or {}
        request: dict[str, Any] = {}
        if notes.get(REQUIRED_TOPOLOGY):
            request["required"] = notes[REQUIRED_TOPOLOGY]
        elif notes.get(PREFERRED_TOPOLOGY):
            request["preferred"] = notes[PREFERRED_TOPOLOGY]
        if request:
            request["podIndexLabel"] = "batch.kubernetes.io/job-completion-index"
            if kind == "JobSet":
                request.update(subGroupIndexLabel="jobset.sigs.k8s.io/job-index", subGroupCount=replicas)
            ps["topologyRequest"] = request
        out.append(ps)
    return out


def _owner(obj: dict) -> dict | None:
    return next((r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")), None)


def _priority(wl: dict) -> int:
    return int(wl["spec"].get("priority") or 0)


class KueueController:
    def __init__(self, store: Store, nodes: list[dict]):
        self.store, self.nodes = store, nodes
        self._seq: dict[str, int] = {}  # workload uid -> arrival order (creationTimestamp has 1 s resolution)

    # --- the webhook ----------------------------------------------------------------------------
    def install(self) -> None:
        """Wrap the Job and JobSet admission with Kueue's mutating webhook."""
        for kind in ("Job", "JobSet"):
            inner = self.store.admit.get(kind)
            if inner is not None:
                self.store.admit[kind] = self._suspending(inner)

    @staticmethod
    def _suspending(inner):
        def admit(obj: dict, old: dict | None) -> None:
            meta = obj.get("metadata") or {}
            if old is None and (meta.get("labels") or {}).get(QUEUE_LABEL) and _owner(obj) is None:
                obj.setdefault("spec", {})["suspend"] = True
            inner(obj, old)

        return admit

    # --- setup helpers (program flags, fixtures) -------------------------------------------------
    def add_priority_class(self, name: str, value: int) -> dict:
        return self.store.create("WorkloadPriorityClass", "", {"metadata": {"name": name}, "value": value})

    def add_topology(self, name: str, levels: list[str]) -> dict:
        return self.store.create(
            "Topology", "", {"metadata": {"name": name}, "spec": {"levels": [{"nodeLabel": k} for k in levels]}}
        )

    def add_queue(
        self,
        name: str,
        gpus: int,
        *,
        preempt: bool = False,
        namespace: str = "default",
        flavor: str = "default",
        topology: str | None = None,
        strategy: str = "BestEffortFIFO",
    ) -> dict:
        """A ClusterQueue `name` with `gpus` nominal nvidia.com/gpu (and the nodes' cpu and
        memory) in ResourceFlavor `flavor` (made if missing, with topologyName `topology`),
        and a LocalQueue `name` in `namespace` pointing at it."""
        if ("ResourceFlavor", "", flavor) not in self.store.objects:
            spec = {"topologyName": topology} if topology else {}
            self.store.create("ResourceFlavor", "", {"metadata": {"name": flavor}, "spec": spec})
        n = len(self.nodes)
        quotas = [
            {"name": "cpu", "nominalQuota": format_quantity("cpu", NODE_CAPACITY["cpu"] * n)},
            {"name": "memory", "nominalQuota": format_quantity("memory", NODE_CAPACITY["memory"] * n)},
            {"name": GPU, "nominalQuota": str(gpus)},
        ]
        cq = self.store.create(
            "ClusterQueue",
            "",
            {
                "metadata": {"name": name},
                "spec": {
                    "namespaceSelector": {},
                    "queueingStrategy": strategy,
                    "resourceGroups": [
                        {"coveredResources": ["cpu", "memory", GPU], "flavors": [{"name": flavor, "resources": quotas}]}
                    ],
                    "preemption": {"withinClusterQueue": "LowerPriority" if preempt else "Never"},
                },
            },
        )
        self.store.create("LocalQueue", namespace, {"metadata": {"name": name}, "spec": {"clusterQueue": name}})
        return cq

    # --- the control loop -----------------------------------------------------------------------
    def sync(self) -> None:
        with self.store.lock:
            jobs = self._managed_jobs()
            workloads = self._workloads_by_owner()
            for uid, wl in list(workloads.items()):
                if uid not in jobs:
                    self._delete_workload(wl)
                    del workloads[uid]
            for uid, (kind, job) in jobs.items():
                if (
                    uid not in workloads
                    and not job["metadata"].get("deletionTimestamp")
                    and not self._finished(kind, job)
                ):
                    wl = self._create_workload(kind, job)
                    if wl is not None:
                        workloads[uid] = wl
            active = self._active_pods_by_owner()
            for uid, (kind, job) in jobs.items():
                if uid in workloads:
                    self._reconcile_job(kind, job, workloads[uid], uid in active)
            self._schedule()
            for uid, (kind, job) in jobs.items():
                wl = self._live(workloads.get(uid))
                if wl is not None:
                    self._reconcile_job(kind, job, wl, uid in active)
                    self._pods_ready(kind, job, wl)
            self._queue_statuses()

    def _live(self, wl: dict | None) -> dict | None:
        """The stored object (the scheduler may have replaced it in this pass)."""
        if wl is None:
            return None
        return self.store.objects.get(("Workload", wl["metadata"]["namespace"], wl["metadata"]["name"]))

    def _managed_jobs(self) -> dict[str, tuple[str, dict]]:
        out = {}
        for (kind, _, _), obj in self.store.objects.items():
            if (
                kind in ("Job", "JobSet")
                and (obj["metadata"].get("labels") or {}).get(QUEUE_LABEL)
                and _owner(obj) is None
            ):
                out[obj["metadata"]["uid"]] = (kind, obj)
        return out

    def _workloads_by_owner(self) -> dict[str, dict]:
        out = {}
        for (kind, _, _), wl in self.store.objects.items():
            if kind == "Workload":
                ref = _owner(wl)
                out[ref["uid"] if ref else "orphan:" + wl["metadata"]["uid"]] = wl
        return out

    def _active_pods_by_owner(self) -> set[str]:
        """uids of the jobs (and their JobSets) that still have a pod not yet ended."""
        job_parent = {}
        for (kind, _, _), obj in self.store.objects.items():
            if kind == "Job":
                ref = _owner(obj)
                job_parent[obj["metadata"]["uid"]] = ref["uid"] if ref else None
        out: set[str] = set()
        for (kind, _, _), pod in self.store.objects.items():
            if kind == "Pod" and pod["status"].get("phase") not in ("Succeeded", "Failed"):
                ref = _owner(pod)
                if ref and ref["uid"] in job_parent:
                    out.add(ref["uid"])
                    if job_parent[ref["uid"]]:
                        out.add(job_parent[ref["uid"]])
                # A suspended JobSet's Jobs may be deleted before their pods are: the pods still
                # hold its quota until they are gone (runc pods take a while to stop).
                jobset_uid = (pod["metadata"].get("labels") or {}).get("jobset.sigs.k8s.io/jobset-uid")
                if jobset_uid:
                    out.add(jobset_uid)
        return out

    def _delete_workload(self, wl: dict) -> None:
        meta = wl["metadata"]
        if not meta.get("deletionTimestamp"):
            self.store.delete("Workload", meta["namespace"], meta["name"], {"propagationPolicy": "Background"})

    @staticmethod
    def _finished(kind: str, job: dict) -> tuple[bool, str] | None:
        """(succeeded, message) once the job has ended."""
        conds = true_conditions(job)
        done, failed = ("Completed", "Failed") if kind == "JobSet" else ("Complete", "Failed")
        if done in conds:
            return True, conds[done].get("message", "")
        if failed in conds:
            return False, conds[failed].get("message", "")
        return None

    def _create_workload(self, kind: str, job: dict) -> dict | None:
        meta = job["metadata"]
        labels = meta.get("labels") or {}
        spec: dict[str, Any] = {
            "queueName": labels[QUEUE_LABEL],
            "podSets": pod_sets(kind, job),
            "active": True,
            "priority": 0,
        }
        priority_class = labels.get(PRIORITY_LABEL)
        if priority_class:
            wpc = self.store.objects.get(("WorkloadPriorityClass", "", priority_class))
            if wpc is None:
                record_event(
                    self.store,
                    job,
                    "Warning",
                    "ErrWorkloadCompose",
                    f'workloadpriorityclasses.kueue.x-k8s.io "{priority_class}" not found',
                    "kueue",
                )
                return None
            spec.update(
                priority=int(wpc["value"]),
                priorityClassRef={"group": KUEUE_GROUP, "kind": "WorkloadPriorityClass", "name": priority_class},
            )
        body = {
            "metadata": {
                "name": workload_name(kind, meta["name"], meta["uid"]),
                "labels": {JOB_UID_LABEL: meta["uid"]},
                "ownerReferences": [
                    {
                        "apiVersion": OWNER_VERSIONS[kind],
                        "kind": kind,
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": spec,
        }
        try:
            wl = self.store.create("Workload", meta["namespace"], body)
        except ApiError as e:
            record_event(self.store, job, "Warning", "ErrWorkloadCompose", e.message, "kueue")
            return None
        self._seq[wl["metadata"]["uid"]] = len(self._seq)
        record_event(
            self.store,
            job,
            "Normal",
            "CreatedWorkload",
            f"Created Workload: {meta['namespace']}/{wl['metadata']['name']}",
            "kueue",
        )
        return self.store.objects[("Workload", meta["namespace"], wl["metadata"]["name"])]

    # --- the job reconciler -----------------------------------------------------------------------
    def _reconcile_job(self, kind: str, job: dict, wl: dict, active: bool) -> None:
        ns = job["metadata"]["namespace"]
        changed = False
        finished = self._finished(kind, job)
        if finished is not None:
            ok, message = finished
            if set_condition(wl, "Finished", "True", "Succeeded" if ok else "Failed", message):
                record_event(
                    self.store, wl, "Normal", "Finished", message or ("Succeeded" if ok else "Failed"), "kueue"
                )
                self.store.publish("Workload", ns, wl)
            return
        suspended = bool(job["spec"].get("suspend"))
        evicted = condition(wl, "Evicted") if is_true(wl, "Evicted") else None
        if evicted is not None:
            if not suspended:
                self._stop(kind, job, wl)
            if is_true(wl, "QuotaReserved") and not active:
                set_condition(wl, "Requeued", "True", evicted["reason"], evicted["message"])
                set_condition(wl, "QuotaReserved", "False", "Pending", evicted["message"])
                set_condition(wl, "Admitted", "False", "NoReservation", "The workload has no reservation")
                wl["status"].pop("admission", None)
                stats = wl["status"].setdefault("schedulingStats", {}).setdefault("evictions", [])
                entry = next((e for e in stats if e["reason"] == evicted["reason"]), None)
                if entry is None:
                    stats.append({"reason": evicted["reason"], "underlyingCause": "", "count": 1})
                else:
                    entry["count"] += 1
                changed = True
        elif is_true(wl, "Admitted"):
            if suspended:
                self._start(kind, job, wl)
        elif not suspended:
            self._stop(kind, job, wl)  # running without admission: Kueue suspends it
        if changed:
            self.store.publish("Workload", ns, wl)

    def _templates(self, kind: str, job: dict) -> dict[str, dict]:
        """Pod template per pod set name."""
        if kind == "JobSet":
            return {
                rj["name"]: rj["template"]["spec"].setdefault("template", {}) for rj in job["spec"]["replicatedJobs"]
            }
        return {"main": job["spec"].setdefault("template", {})}

    def _start(self, kind: str, job: dict, wl: dict) -> None:
        """RunWithPodSetsInfo: the flavors' nodeLabels (and the topology domain) into the pod
        templates' nodeSelector, then unsuspend."""
        templates = self._templates(kind, job)
        for psa in wl["status"]["admission"]["podSetAssignments"]:
            tmpl = templates.get(psa["name"])
            if tmpl is None:
                continue
            selector: dict[str, str] = {}
            for flavor in dict.fromkeys((psa.get("flavors") or {}).values()):
                rf = self.store.objects.get(("ResourceFlavor", "", flavor))
                selector.update(((rf or {}).get("spec") or {}).get("nodeLabels") or {})
            selector.update(self._topology_selector(wl, psa))
            if selector:
                tmpl.setdefault("spec", {}).setdefault("nodeSelector", {}).update(selector)
        job["spec"]["suspend"] = False
        record_event(
            self.store,
            job,
            "Normal",
            "Started",
            f"Admitted by clusterQueue {wl['status']['admission']['clusterQueue']}",
            "kueue",
        )
        self.store.publish(kind, job["metadata"]["namespace"], job)

    def _topology_selector(self, wl: dict, psa: dict) -> dict[str, str]:
        ps = next((p for p in wl["spec"]["podSets"] if p["name"] == psa["name"]), {})
        request = ps.get("topologyRequest") or {}
        level = request.get("required") or request.get("preferred")
        domains = kueue_api.domains_of(psa.get("topologyAssignment"))
        if not level or not domains:
            return {}
        values = {self._node_label(values[-1], level) for values, _ in domains}
        return {level: values.pop()} if len(values) == 1 and None not in values else {}

    def _node_label(self, hostname: str, key: str) -> str | None:
        node = next((n for n in self.nodes if n["name"] == hostname or n["labels"].get(HOSTNAME) == hostname), None)
        return node["labels"].get(key) if node else None

    def _stop(self, kind: str, job: dict, wl: dict) -> None:
        """Suspend, and restore the pod templates' nodeSelector from the Workload's pod sets."""
        templates = self._templates(kind, job)
        for ps in wl["spec"]["podSets"]:
            tmpl = templates.get(ps["name"])
            if tmpl is None:
                continue
            original = ((ps.get("template") or {}).get("spec") or {}).get("nodeSelector")
            if original:
                tmpl.setdefault("spec", {})["nodeSelector"] = copy.deepcopy(original)
            else:
                tmpl.setdefault("spec", {}).pop("nodeSelector", None)
        job["spec"]["suspend"] = True
        evicted = condition(wl, "Evicted")
        if evicted is not None and evicted["status"] == "True":
            record_event(self.store, job, "Normal", "Stopped", evicted["message"], "kueue")
        self.store.publish(kind, job["metadata"]["namespace"], job)

    def _pods_ready(self, kind: str, job: dict, wl: dict) -> None:
        if is_true(wl, "Finished"):
            return
        status = job.get("status") or {}
        if not is_true(wl, "Admitted"):
            ready = False
        elif kind == "JobSet":
            want = sum(rj.get("replicas", 1) for rj in job["spec"]["replicatedJobs"])
            ready = want == sum(
                s.get("ready", 0) + s.get("succeeded", 0) for s in status.get("replicatedJobsStatus") or []
            )
        else:
            ready = status.get("ready", 0) + status.get("succeeded", 0) >= job["spec"].get("parallelism", 1)
        old = condition(wl, "PodsReady")
        if ready:
            args = (
                "True",
                "Recovered" if old and old["reason"] in ("WaitForRecovery", "Recovered") else "Started",
                READY,
            )
        elif old is not None and old["status"] == "True" and is_true(wl, "Admitted"):
            args = ("False", "WaitForRecovery", "At least one pod has failed, waiting for recovery")
        else:
            args = ("False", "WaitForStart", NOT_READY)
        if set_condition(wl, "PodsReady", *args):
            self.store.publish("Workload", wl["metadata"]["namespace"], wl)

    # --- queues -----------------------------------------------------------------------------------
    def _cluster_queue_of(self, wl: dict) -> str | None:
        lq = self.store.objects.get(("LocalQueue", wl["metadata"]["namespace"], wl["spec"].get("queueName", "")))
        return (lq or {}).get("spec", {}).get("clusterQueue") if lq else None

    def _pending(self, wl: dict) -> bool:
        return (
            not is_true(wl, "QuotaReserved")
            and not is_true(wl, "Finished")
            and wl["spec"].get("active", True)
            and not wl["metadata"].get("deletionTimestamp")
        )

    def _order_key(self, wl: dict) -> tuple:
        return (
            -_priority(wl),
            parse_rfc3339_ns(wl["metadata"]["creationTimestamp"]),
            self._seq.get(wl["metadata"]["uid"], 1 << 30),
            wl["metadata"]["name"],
        )

    def queue(self, cq_name: str) -> list[dict]:
        """The ClusterQueue's pending Workloads in the order Kueue tries them."""
        wls = [
            o
            for (k, _, _), o in self.store.objects.items()
            if k == "Workload" and self._pending(o) and self._cluster_queue_of(o) == cq_name
        ]
        return sorted(wls, key=self._order_key)

    def _reserving(self, cq_name: str) -> list[dict]:
        return [
            o
            for (k, _, _), o in self.store.objects.items()
            if k == "Workload"
            and is_true(o, "QuotaReserved")
            and not is_true(o, "Finished")
            and (o["status"].get("admission") or {}).get("clusterQueue") == cq_name
        ]

    @staticmethod
    def _usage(wls: list[dict]) -> dict[tuple[str, str], Decimal]:
        used: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
        for wl in wls:
            for psa in (wl["status"].get("admission") or {}).get("podSetAssignments") or []:
                for res, flavor in (psa.get("flavors") or {}).items():
                    used[(flavor, res)] += quantity((psa.get("resourceUsage") or {}).get(res, 0))
        return used

    # --- the scheduler ------------------------------------------------------------------------------
    def _schedule(self) -> None:
        for (kind, _, _), wl in list(self.store.objects.items()):
            if kind == "Workload" and self._pending(wl) and self._cluster_queue_of(wl) is None:
                message = f"LocalQueue {wl['spec'].get('queueName')} doesn't exist"
                if set_condition(wl, "QuotaReserved", "False", "Inadmissible", message):
                    self.store.publish("Workload", wl["metadata"]["namespace"], wl)
        for (kind, _, _name), cq in list(self.store.objects.items()):
            if kind == "ClusterQueue":
                self._schedule_queue(cq)

    def _schedule_queue(self, cq: dict) -> None:
        name = cq["metadata"]["name"]
        reserving = self._reserving(name)
        used = self._usage(reserving)
        strict = cq["spec"].get("queueingStrategy") == "StrictFIFO"
        for wl in self.queue(name):
            assignment, message = self._assign(cq, wl, used, self._node_free(exclude=None))
            if assignment is not None:
                self._admit(cq, wl, assignment)
                for psa in assignment:
                    for res, flavor in psa["flavors"].items():
                        used[(flavor, res)] += quantity(psa["resourceUsage"][res])
                continue
            targets = self._preemption_targets(cq, wl, reserving, used)
            if targets:
                for target in targets:
                    if not is_true(target, "Evicted"):
                        self._evict(cq, target, wl)
                message += f". Pending the preemption of {len(targets)} workload(s)"
            self._mark_pending(wl, message)
            if strict:
                break

    def _flavor_fit(self, cq: dict, ps: dict, count: int, used: dict, extra: dict) -> tuple[dict[str, str] | None, str]:
        """(resource -> flavor, '') for a pod set, or (None, why not)."""
        per_pod = pod_requests((ps.get("template") or {}).get("spec") or {})
        total = {r: v * count for r, v in per_pod.items()}
        flavors: dict[str, str] = {}
        whys: list[str] = []
        groups = cq["spec"].get("resourceGroups") or []
        for res in total:
            if not any(res in g.get("coveredResources", []) for g in groups):
                return None, f"resource {res} unavailable in ClusterQueue"
        selector = ((ps.get("template") or {}).get("spec") or {}).get("nodeSelector") or {}
        for group in groups:
            wanted = [r for r in total if r in group.get("coveredResources", [])]
            if not wanted:
                continue
            chosen = None
            for fq in group.get("flavors") or []:
                rf = self.store.objects.get(("ResourceFlavor", "", fq["name"]))
                if rf is None:
                    whys.append(f"flavor {fq['name']} not found")
                    continue
                labels = (rf.get("spec") or {}).get("nodeLabels") or {}
                if any(k in labels and labels[k] != v for k, v in selector.items()):
                    whys.append(f"flavor {fq['name']} doesn't match node affinity")
                    continue
                tas_why = self._tas_flavor_mismatch(ps, rf)
                if tas_why:
                    whys.append(tas_why)
                    continue
                quotas = {q["name"]: quantity(q["nominalQuota"]) for q in fq.get("resources") or []}
                short = []
                for res in wanted:
                    nominal = quotas.get(res, Decimal(0))
                    have = used.get((fq["name"], res), Decimal(0)) + extra.get((fq["name"], res), Decimal(0))
                    if total[res] > nominal:
                        short.append(
                            f"insufficient quota for {res} in flavor {fq['name']}, previously considered "
                            f"podsets requests ({format_quantity(res, extra.get((fq['name'], res), Decimal(0)))}) "
                            f"+ current podset request ({format_quantity(res, total[res])}) > maximum "
                            f"capacity ({format_quantity(res, nominal)})"
                        )
                    elif have + total[res] > nominal:
                        short.append(
                            f"insufficient unused quota for {res} in flavor {fq['name']}, "
                            f"{format_quantity(res, have + total[res] - nominal)} more needed"
                        )
                if short:
                    whys += short
                    continue
                chosen = fq["name"]
                break
            if chosen is None:
                return None, ", ".join(whys) or "no flavor fits"
            flavors.update({r: chosen for r in wanted})
        return flavors, ""

    def _tas_flavor_mismatch(self, ps: dict, rf: dict) -> str:
        request = ps.get("topologyRequest") or {}
        level = request.get("required") or request.get("preferred")
        if not level:
            return ""
        topology_name = (rf.get("spec") or {}).get("topologyName")
        if not topology_name:
            return f'Flavor "{rf["metadata"]["name"]}" does not support TopologyAwareScheduling'
        topo = self.store.objects.get(("Topology", "", topology_name))
        if topo is None:
            return f'Flavor "{rf["metadata"]["name"]}" information missing in TAS cache'
        if level not in [lv["nodeLabel"] for lv in topo["spec"].get("levels") or []]:
            return f'Flavor "{rf["metadata"]["name"]}" does not contain the requested level'
        return ""

    def _assign(self, cq: dict, wl: dict, used: dict, free: dict[str, Decimal] | None) -> tuple[list[dict] | None, str]:
        """The pod set assignments of a Workload that fits (free: GPUs per node for topology
        checks, None to check quota only), or (None, Kueue's message)."""
        extra: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
        out = []
        free = dict(free) if free is not None else None
        for ps in wl["spec"]["podSets"]:
            count = ps.get("count", 1)
            flavors, why = self._flavor_fit(cq, ps, count, used, extra)
            if flavors is None:
                return None, f"couldn't assign flavors to pod set {ps['name']}: {why}"
            per_pod = pod_requests((ps.get("template") or {}).get("spec") or {})
            psa: dict[str, Any] = {
                "name": ps["name"],
                "flavors": flavors,
                "count": count,
                "resourceUsage": {r: format_quantity(r, per_pod[r] * count) for r in flavors},
            }
            if free is not None and self._topology_level(ps, flavors):
                ta, why = self._place(ps, flavors, per_pod, count, free)
                if ta is None:
                    return None, f"couldn't assign flavors to pod set {ps['name']}: {why}"
                psa["topologyAssignment"] = ta
            for r, f in flavors.items():
                extra[(f, r)] += per_pod[r] * count
            out.append(psa)
        return out, ""

    # --- topology ------------------------------------------------------------------------------------
    def _topology_of(self, flavors: dict[str, str]) -> tuple[str, list[str], dict] | None:
        """(topology name, its levels, the flavor's nodeLabels) of the pod set's TAS flavor."""
        for flavor in dict.fromkeys(flavors.values()):
            rf = self.store.objects.get(("ResourceFlavor", "", flavor)) or {}
            name = (rf.get("spec") or {}).get("topologyName")
            topo = self.store.objects.get(("Topology", "", name)) if name else None
            if topo is not None:
                return (
                    name,
                    [lv["nodeLabel"] for lv in topo["spec"]["levels"]],
                    (rf.get("spec") or {}).get("nodeLabels") or {},
                )
        return None

    def _topology_level(self, ps: dict, flavors: dict[str, str]) -> str | None:
        request = ps.get("topologyRequest") or {}
        level = request.get("required") or request.get("preferred")
        return level if level and self._topology_of(flavors) else None

    def _node_free(self, exclude: str | None) -> dict[str, Decimal]:
        """GPUs free per node: capacity less the topology assignments of Workloads holding
        quota and the requests of other bound pods (those of a job with an assignment are
        counted by the assignment)."""
        free = {n["name"]: Decimal(n.get("gpus", 0)) for n in self.nodes}
        assigned_jobs = set()
        for (k, _, _), wl in self.store.objects.items():
            if (
                k != "Workload"
                or not is_true(wl, "QuotaReserved")
                or is_true(wl, "Finished")
                or wl["metadata"]["uid"] == exclude
            ):
                continue
            for psa in (wl["status"].get("admission") or {}).get("podSetAssignments") or []:
                if not psa.get("topologyAssignment"):
                    continue
                ps = next((p for p in wl["spec"]["podSets"] if p["name"] == psa["name"]), {})
                gpus = pod_requests((ps.get("template") or {}).get("spec") or {}).get(GPU, Decimal(0))
                for values, count in kueue_api.domains_of(psa["topologyAssignment"]):
                    host = self._hostname_node(values[-1])
                    if host in free:
                        free[host] -= gpus * count
                ref = _owner(wl)
                if ref:
                    assigned_jobs.add(ref["uid"])
        owners = {o["metadata"]["uid"]: _owner(o) for (k, _, _), o in self.store.objects.items() if k == "Job"}
        for (k, _, _), pod in self.store.objects.items():
            if (
                k != "Pod"
                or not pod["spec"].get("nodeName")
                or pod["status"].get("phase") not in ("Pending", "Running")
            ):
                continue
            ref = _owner(pod)
            job_uid = ref["uid"] if ref else None
            parent = owners.get(job_uid)
            if job_uid in assigned_jobs or (parent and parent["uid"] in assigned_jobs):
                continue
            if pod["spec"]["nodeName"] in free:
                from tests.fakes.kube.scheduler import gpu_request

                free[pod["spec"]["nodeName"]] -= gpu_request(pod)
        return free

    def _hostname_node(self, value: str) -> str | None:
        node = next((n for n in self.nodes if n["labels"].get(HOSTNAME, n["name"]) == value), None)
        return node["name"] if node else None

    def _place(
        self, ps: dict, flavors: dict[str, str], per_pod: dict[str, Decimal], count: int, free: dict[str, Decimal]
    ) -> tuple[dict | None, str]:
        """A topology assignment for the pod set's pods, taking from `free`; or (None, why)."""
        topo_name, levels, flavor_labels = self._topology_of(flavors)
        request = ps.get("topologyRequest") or {}
        level = request.get("required") or request.get("preferred")
        selector = ((ps.get("template") or {}).get("spec") or {}).get("nodeSelector") or {}
        gpus = per_pod.get(GPU, Decimal(0))
        nodes = [
            n
            for n in self.nodes
            if all(n["labels"].get(k) == v for k, v in {**flavor_labels, **selector}.items())
            and all(lv in n["labels"] for lv in levels if lv != HOSTNAME)
        ]

        def room(node: dict) -> int:
            return 110 if not gpus else max(0, int(free[node["name"]] // gpus))

        domains: dict[str, list[dict]] = defaultdict(list)
        for n in nodes:
            domains[n["labels"].get(level, n["name"] if level == HOSTNAME else "")].append(n)
        capacity = {v: sum(room(n) for n in ns) for v, ns in domains.items()}
        fitting = sorted((c, v) for v, c in capacity.items() if c >= count)
        if fitting:
            chosen = domains[fitting[0][1]]  # BestFit: the fullest domain that still fits
        elif request.get("preferred") and sum(capacity.values()) >= count:
            chosen = sorted(nodes, key=lambda n: -capacity[n["labels"].get(level, "")])
        else:
            best = max(capacity.values(), default=0)
            return None, (
                f'topology "{topo_name}" doesn\'t allow to fit any of {count} pod(s)'
                if best == 0
                else f'topology "{topo_name}" allows to fit only {best} out of {count} pod(s)'
            )
        left, assignment = count, []
        for n in sorted(chosen, key=lambda n: (-room(n), n["name"])):
            take = min(left, room(n))
            if take:
                assignment.append((n, take))
                free[n["name"]] -= gpus * take
                left -= take
            if not left:
                break
        # Kueue keeps only the hostname level when the topology's lowest level is the node.
        keys = [HOSTNAME] if levels and levels[-1] == HOSTNAME else levels
        return kueue_api.slices_from(
            {
                "levels": keys,
                "domains": [
                    {"values": [n["labels"].get(k, n["name"]) for k in keys], "count": c} for n, c in assignment
                ],
            }
        ), ""

    # --- admission, preemption ------------------------------------------------------------------------
    def _admit(self, cq: dict, wl: dict, assignment: list[dict]) -> None:
        ns, name = wl["metadata"]["namespace"], wl["metadata"]["name"]
        cq_name = cq["metadata"]["name"]

        def apply(o: dict) -> None:
            status = o.setdefault("status", {})
            status["admission"] = {"clusterQueue": cq_name, "podSetAssignments": assignment}
            set_condition(o, "QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq_name}")
            for type_ in ("Evicted", "Preempted"):
                prev = condition(o, type_)
                if prev is not None and prev["status"] == "True":
                    set_condition(o, type_, "False", "QuotaReserved", "Previously: " + prev["message"])
            set_condition(o, "Admitted", "True", "Admitted", "The workload is admitted")
            status.pop("resourceRequests", None)

        self.store.update("Workload", ns, name, apply)
        record_event(
            self.store,
            wl,
            "Normal",
            "QuotaReserved",
            f"Quota reserved in ClusterQueue {cq_name}, wait time since queued was {self._waited(wl)}s",
            "kueue",
        )
        record_event(
            self.store,
            wl,
            "Normal",
            "Admitted",
            f"Admitted by ClusterQueue {cq_name}, wait time since reservation was 0s",
            "kueue",
        )

    @staticmethod
    def _waited(wl: dict) -> int:
        import time

        return max(0, int(time.time() - parse_rfc3339_ns(wl["metadata"]["creationTimestamp"]) / 1e9))

    def _mark_pending(self, wl: dict, message: str) -> None:
        requests = [
            {
                "name": ps["name"],
                "resources": {
                    r: format_quantity(r, v * ps.get("count", 1))
                    for r, v in pod_requests((ps.get("template") or {}).get("spec") or {}).items()
                },
            }
            for ps in wl["spec"]["podSets"]
        ]
        changed = set_condition(wl, "QuotaReserved", "False", "Pending", message)
        if wl.setdefault("status", {}).get("resourceRequests") != requests:
            wl["status"]["resourceRequests"] = requests
            changed = True
        if changed:
            record_event(self.store, wl, "Warning", "Pending", message, "kueue")
            self.store.publish("Workload", wl["metadata"]["namespace"], wl)

    def _preemption_targets(self, cq: dict, wl: dict, reserving: list[dict], used: dict) -> list[dict]:
        """The fewest admitted Workloads of lower priority whose quota makes room for `wl`
        (Workloads already evicted and not yet gone come first and cost nothing)."""
        policy = (cq["spec"].get("preemption") or {}).get("withinClusterQueue", "Never")
        if policy not in ("LowerPriority", "LowerOrNewerEqualPriority"):
            return []
        mine = self._order_key(wl)

        def eligible(o: dict) -> bool:
            if _priority(o) < _priority(wl):
                return True
            return policy == "LowerOrNewerEqualPriority" and _priority(o) == _priority(wl) and self._order_key(o) > mine

        candidates = [o for o in reserving if o["metadata"]["uid"] != wl["metadata"]["uid"] and eligible(o)]
        candidates.sort(
            key=lambda o: (
                not is_true(o, "Evicted"),
                _priority(o),
                -parse_rfc3339_ns((condition(o, "QuotaReserved") or {}).get("lastTransitionTime", rfc3339())),
            )
        )
        others = [o for o in reserving if o not in candidates]

        def fits(removed: list[dict]) -> bool:
            keep = others + [o for o in candidates if o not in removed]
            return self._assign(cq, wl, self._usage(keep), None)[0] is not None

        targets: list[dict] = []
        for cand in candidates:
            targets.append(cand)
            if fits(targets):
                break
        else:
            return []
        for cand in reversed(list(targets)):  # drop those not needed after all
            rest = [t for t in targets if t is not cand]
            if not is_true(cand, "Evicted") and fits(rest):
                targets = rest
        return targets

    def _evict(self, cq: dict, target: dict, preemptor: dict) -> None:
        path = "/" + cq["metadata"]["name"]
        message = (
            f"Preempted to accommodate a workload (UID: {preemptor['metadata']['uid']}, JobUID: "
            f"{(preemptor['metadata'].get('labels') or {}).get(JOB_UID_LABEL, 'UNKNOWN')}) due to "
            f"prioritization in the ClusterQueue; preemptor path: {path}; preemptee path: {path}"
        )

        def apply(o: dict) -> None:
            set_condition(o, "Evicted", "True", "Preempted", message)
            set_condition(o, "Preempted", "True", "InClusterQueue", message)

        self.store.update("Workload", target["metadata"]["namespace"], target["metadata"]["name"], apply)
        record_event(self.store, target, "Normal", "Preempted", message, "kueue")
        record_event(
            self.store,
            preemptor,
            "Normal",
            "PreemptedWorkload",
            f"Preempted workload {target['metadata']['namespace']}/{target['metadata']['name']}",
            "kueue",
        )

    # --- queue status ---------------------------------------------------------------------------------
    def _queue_statuses(self) -> None:
        wls = [o for (k, _, _), o in self.store.objects.items() if k == "Workload"]
        for (kind, ns, name), q in list(self.store.objects.items()):
            if kind == "ClusterQueue":
                mine = [
                    w
                    for w in wls
                    if self._cluster_queue_of(w) == name
                    or (w["status"].get("admission") or {}).get("clusterQueue") == name
                ]
                self._set_queue_status(q, "ClusterQueue", mine, q, "Can admit new workloads")
            elif kind == "LocalQueue":
                mine = [w for w in wls if w["metadata"]["namespace"] == ns and w["spec"].get("queueName") == name]
                cq = self.store.objects.get(("ClusterQueue", "", q["spec"].get("clusterQueue", "")))
                self._set_queue_status(q, "LocalQueue", mine, cq, "Can submit new workloads to localQueue")

    def _set_queue_status(self, q: dict, kind: str, wls: list[dict], cq: dict | None, ready: str) -> None:
        reserving = [w for w in wls if is_true(w, "QuotaReserved") and not is_true(w, "Finished")]
        admitted = [w for w in reserving if is_true(w, "Admitted")]
        status = q.setdefault("status", {})
        before = copy.deepcopy(status)
        status.update(
            pendingWorkloads=sum(1 for w in wls if self._pending(w)),
            reservingWorkloads=len(reserving),
            admittedWorkloads=len(admitted),
        )
        for key, group in (("flavorsReservation", reserving), ("flavorsUsage", admitted)):
            used = self._usage(group)
            out = []
            for rg in ((cq or {}).get("spec") or {}).get("resourceGroups") or []:
                for fq in rg.get("flavors") or []:
                    resources = [
                        {
                            "name": r["name"],
                            "total": format_quantity(r["name"], used.get((fq["name"], r["name"]), Decimal(0))),
                        }
                        for r in fq.get("resources") or []
                    ]
                    if kind == "ClusterQueue":
                        for r in resources:
                            r["borrowed"] = "0"
                    out.append({"name": fq["name"], "resources": resources})
            status[key] = out
        if cq is None:
            set_condition(
                q, "Active", "False", "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue"
            )
        else:
            set_condition(q, "Active", "True", "Ready", ready)
        if status != before:
            self.store.publish(kind, q["metadata"].get("namespace", ""), q)

    # --- the visibility API -------------------------------------------------------------------------------
    def pending_workloads(self, res: Resource, ns: str, name: str, q: dict[str, str]) -> dict:
        """GET .../clusterqueues/<name>/pendingworkloads or .../localqueues/<name>/pendingworkloads."""
        with self.store.lock:
            if res.kind == "ClusterQueue":
                if ("ClusterQueue", "", name) not in self.store.objects:
                    raise ApiError(404, "NotFound", f'clusterqueues.{VISIBILITY_GROUP} "{name}" not found')
                cq_name = name
            else:
                lq = self.store.objects.get(("LocalQueue", ns, name))
                if lq is None:
                    raise ApiError(404, "NotFound", f'localqueues.{VISIBILITY_GROUP} "{name}" not found')
                cq_name = lq["spec"].get("clusterQueue", "")
            items, in_lq = [], defaultdict(int)
            for i, wl in enumerate(self.queue(cq_name)):
                key = (wl["metadata"]["namespace"], wl["spec"]["queueName"])
                items.append(
                    {
                        "metadata": {
                            k: wl["metadata"][k]
                            for k in ("name", "namespace", "creationTimestamp", "ownerReferences")
                            if k in wl["metadata"]
                        },
                        "priority": _priority(wl),
                        "localQueueName": wl["spec"]["queueName"],
                        "positionInClusterQueue": i,
                        "positionInLocalQueue": in_lq[key],
                    }
                )
                in_lq[key] += 1
            if res.kind == "LocalQueue":
                items = [it for it in items if (it["metadata"]["namespace"], it["localQueueName"]) == (ns, name)]
        offset, limit = int(q.get("offset") or 0), int(q.get("limit") or 1000)
        return {
            "kind": "PendingWorkloadsSummary",
            "apiVersion": f"{VISIBILITY_GROUP}/{res.version}",
            "metadata": {},
            "items": items[offset : offset + limit],
        }
