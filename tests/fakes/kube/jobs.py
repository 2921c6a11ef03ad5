"""The Job controller (batch/v1), for Indexed and NonIndexed Jobs.

Pods are named <job>-<index>-<rand> (Indexed) or <job>-<rand>, with the Job's selector
labels, the completion-index annotation and label, and, for Indexed Jobs, hostname
<job>-<index> in the Job's subdomain. It honours parallelism and completions,
backoffLimit (0 included), activeDeadlineSeconds, suspend, and podFailurePolicy: the
first rule that matches a failed pod decides (FailJob, Ignore, Count; FailIndex counts),
onExitCodes look at non-zero exit codes of the named or any container, onPodConditions at
the pod's conditions (DisruptionTarget after an eviction or preemption). Conditions
follow the real controller: FailureTarget, then Failed once no pod is active (reasons
PodFailurePolicy, BackoffLimitExceeded, DeadlineExceeded); SuccessCriteriaMet, then
Complete; Suspended. A pod the API server refuses (Pod Security admission, podsecurity.py)
is a Warning event FailedCreate on the Job, `Error creating: <the server's message>`, and
the controller tries again after a backoff (1 s, doubling to 30 s), as the real one does;
the Job gets no condition for it.
"""

from __future__ import annotations

import copy
import time

from tests.fakes.kube.common import ApiError, parse_rfc3339_ns, rand_suffix, rfc3339
from tests.fakes.kube.store import Store, record_event

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
JOB_NAME = "batch.kubernetes.io/job-name"
CREATE_BACKOFF = (1.0, 30.0)  # the first pause after a refused pod, and the longest


def default_job(job: dict, old: dict | None) -> None:
    """What the API server defaults on a Job (its admission)."""
    from tests.fakes.kube.validation import validate_job

    spec = job.setdefault("spec", {})
    meta = job["metadata"]
    if old is not None:
        # selector and template labels were set at creation and are immutable.
        spec["selector"] = old["spec"]["selector"]
        spec.setdefault("template", {}).setdefault("metadata", {}).setdefault("labels", {}).update(
            old["spec"]["template"]["metadata"]["labels"]
        )
        validate_job(job)
        return
    if spec.get("selector") and not spec.get("manualSelector"):
        from tests.fakes.kube.common import invalid

        raise invalid("Job", meta["name"], [("spec.selector", "Invalid value: `selector` not auto-generated")], "batch")
    tmpl = spec.setdefault("template", {})
    uid = meta["uid"]
    spec["selector"] = {"matchLabels": {CONTROLLER_UID: uid}}
    labels = tmpl.setdefault("metadata", {}).setdefault("labels", {})
    labels.update({CONTROLLER_UID: uid, "controller-uid": uid, JOB_NAME: meta["name"], "job-name": meta["name"]})
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("suspend", False)
    spec.setdefault("completions", spec.get("parallelism", 1))
    spec.setdefault("parallelism", 1)
    spec.setdefault("completionMode", "NonIndexed")
    validate_job(job)
    job["status"] = {}


def set_condition(obj: dict, type_: str, status: str, reason: str = "", message: str = "") -> bool:
    """Set one condition; False when it already had that status."""
    conds = obj.setdefault("status", {}).setdefault("conditions", [])
    for c in conds:
        if c["type"] == type_:
            if c["status"] == status:
                return False
            c.update(status=status, reason=reason, message=message, lastTransitionTime=rfc3339())
            return True
    conds.append(
        {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message,
            "lastProbeTime": rfc3339(),
            "lastTransitionTime": rfc3339(),
        }
    )
    return True


def true_conditions(obj: dict) -> dict[str, dict]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions", []) if c["status"] == "True"}


ACTIVE = ("Pending", "Running")


class JobController:
    def __init__(self, store: Store):
        self.store = store
        self.create_backoff: dict[str, tuple[float, float]] = {}
        """Job uid -> (when to try creating its pods again, the pause after that) after a refusal."""

    def sync(self) -> None:
        with self.store.lock:
            for (kind, _, _), job in list(self.store.objects.items()):
                if kind == "Job":
                    self._sync(job)

    def pods_of(self, job: dict) -> list[dict]:
        uid = job["metadata"]["uid"]
        ns = job["metadata"]["namespace"]
        return [
            o
            for (k, n, _), o in self.store.objects.items()
            if k == "Pod" and n == ns and (o["metadata"].get("labels") or {}).get(CONTROLLER_UID) == uid
        ]

    def _sync(self, job: dict) -> None:
        meta, spec, status = job["metadata"], job["spec"], job.setdefault("status", {})
        ns = meta["namespace"]
        if meta.get("deletionTimestamp"):
            return
        conds = true_conditions(job)
        if "Complete" in conds or "Failed" in conds:
            return
        pods = self.pods_of(job)
        active = [p for p in pods if p["status"].get("phase") in ACTIVE and not p["metadata"].get("deletionTimestamp")]
        changed = False
        if spec.get("suspend"):
            for p in active:
                self.store.delete("Pod", ns, p["metadata"]["name"])
            if set_condition(job, "Suspended", "True", "JobSuspended", "Job suspended"):
                status.pop("startTime", None)
                self.store.publish("Job", ns, job)
            return
        if "Suspended" in conds:
            changed |= set_condition(job, "Suspended", "False", "JobResumed", "Job resumed")
        if not status.get("startTime"):
            status["startTime"] = rfc3339()
            changed = True
        if "FailureTarget" not in conds:
            target = self._failure(job, pods)
            if target:
                set_condition(job, "FailureTarget", "True", *target)
                conds["FailureTarget"] = {"reason": target[0], "message": target[1]}
                changed = True
        indexed = spec.get("completionMode") == "Indexed"
        if "FailureTarget" in conds:
            for p in active:
                self.store.delete("Pod", ns, p["metadata"]["name"])
            if not [p for p in self.pods_of(job) if p["status"].get("phase") in ACTIVE]:
                t = conds["FailureTarget"]
                set_condition(job, "Failed", "True", t["reason"], t["message"])
                # As the real Job controller does when a Job finishes: a Warning event with the
                # Failed condition's reason and message (it outlives the Job's pods).
                record_event(self.store, job, "Warning", t["reason"], t["message"], component="job-controller")
                status["completionTime"] = rfc3339()
                changed = True
        else:
            succeeded = [p for p in pods if p["status"].get("phase") == "Succeeded"]
            done = {int(p["metadata"]["annotations"][COMPLETION_INDEX]) for p in succeeded} if indexed else set()
            n_done = len(done) if indexed else len(succeeded)
            if n_done >= spec["completions"]:
                for p in active:
                    self.store.delete("Pod", ns, p["metadata"]["name"])
                set_condition(
                    job, "SuccessCriteriaMet", "True", "CompletionsReached", "Reached expected number of succeeded pods"
                )
                set_condition(
                    job, "Complete", "True", "CompletionsReached", "Reached expected number of succeeded pods"
                )
                status["completionTime"] = rfc3339()
                changed = True
            elif indexed:
                have = {
                    int(p["metadata"]["annotations"][COMPLETION_INDEX])
                    for p in pods
                    if p["status"].get("phase") in (*ACTIVE, "Succeeded")
                }
                room = spec["parallelism"] - len(active)
                for i in range(spec["completions"]):
                    if i not in have and room > 0:
                        if not self._create_pod(job, i):
                            break
                        room -= 1
                        changed = True
            else:
                want = min(spec["parallelism"], spec["completions"] - n_done) - len(active)
                for _ in range(max(0, want)):
                    if not self._create_pod(job, None):
                        break
                    changed = True
            if indexed:
                status["completedIndexes"] = _ranges(sorted(done))
        pods = self.pods_of(job)
        counts = {
            "active": sum(
                p["status"].get("phase") in ACTIVE and not p["metadata"].get("deletionTimestamp") for p in pods
            ),
            "succeeded": sum(p["status"].get("phase") == "Succeeded" for p in pods),
            "failed": sum(p["status"].get("phase") == "Failed" for p in pods),
            "terminating": sum(bool(p["metadata"].get("deletionTimestamp")) for p in pods),
            "ready": sum(p["status"].get("phase") == "Running" for p in pods),
        }
        if any(status.get(k) != v for k, v in counts.items()):
            status.update(counts)
            changed = True
        if changed:
            self.store.publish("Job", ns, job)

    def _failure(self, job: dict, pods: list[dict]) -> tuple[str, str] | None:
        spec, status = job["spec"], job["status"]
        deadline = spec.get("activeDeadlineSeconds")
        if deadline and status.get("startTime"):
            if time.time() - parse_rfc3339_ns(status["startTime"]) / 1e9 > deadline:
                return "DeadlineExceeded", "Job was active longer than specified deadline"
        counted = 0
        for p in (p for p in pods if p["status"].get("phase") == "Failed"):
            action, message = pod_failure_action(spec.get("podFailurePolicy"), p)
            if action == "FailJob":
                return "PodFailurePolicy", message
            if action != "Ignore":
                counted += 1
        if (spec.get("template", {}).get("spec") or {}).get("restartPolicy") == "OnFailure":
            # In-place restarts count towards the backoff limit, as the real controller counts them.
            counted += sum(cs.get("restartCount", 0) for p in pods for cs in p["status"].get("containerStatuses") or [])
        if counted > spec.get("backoffLimit", 6):
            return "BackoffLimitExceeded", "Job has reached the specified backoff limit"
        return None

    def _create_pod(self, job: dict, index: int | None) -> bool:
        """Create one pod of the Job; False where the API server refused it (or a refusal's
        backoff has not passed), with the Job's FailedCreate event."""
        uid = job["metadata"]["uid"]
        retry_at, pause = self.create_backoff.get(uid, (0.0, CREATE_BACKOFF[0]))
        if time.monotonic() < retry_at:
            return False
        tmpl = copy.deepcopy(job["spec"]["template"])
        name = job["metadata"]["name"]
        meta = tmpl.setdefault("metadata", {})
        meta["name"] = f"{name}-{index}-{rand_suffix()}" if index is not None else f"{name}-{rand_suffix()}"
        meta.pop("generateName", None)
        if index is not None:
            meta.setdefault("labels", {})[COMPLETION_INDEX] = str(index)
            meta.setdefault("annotations", {})[COMPLETION_INDEX] = str(index)
            tmpl["spec"]["hostname"] = f"{name}-{index}"
        meta["ownerReferences"] = [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": name,
                "uid": job["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        tmpl["status"] = {"phase": "Pending"}
        try:
            self.store.create("Pod", job["metadata"]["namespace"], tmpl)
        except ApiError as e:
            self.create_backoff[uid] = (time.monotonic() + pause, min(pause * 2, CREATE_BACKOFF[1]))
            record_event(self.store, job, "Warning", "FailedCreate", f"Error creating: {e.message}", "job-controller")
            return False
        self.create_backoff.pop(uid, None)
        return True


def pod_failure_action(policy: dict | None, pod: dict) -> tuple[str, str]:
    """The action of the first podFailurePolicy rule that matches a failed pod ("Count"
    when none does), and the Job condition message the real controller writes."""
    where = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
    statuses = (pod["status"].get("initContainerStatuses") or []) + (pod["status"].get("containerStatuses") or [])
    for i, rule in enumerate((policy or {}).get("rules") or []):
        codes = rule.get("onExitCodes")
        if codes:
            for cs in statuses:
                term = (cs.get("state") or {}).get("terminated")
                if (
                    not term
                    or term["exitCode"] == 0
                    or (codes.get("containerName") and cs["name"] != codes["containerName"])
                ):
                    continue
                if (term["exitCode"] in codes["values"]) == (codes["operator"] == "In"):
                    return rule["action"], (
                        f"Container {cs['name']} for pod {where} failed with exit code "
                        f"{term['exitCode']} matching {rule['action']} rule at index {i}"
                    )
        for pc in rule.get("onPodConditions") or []:
            for c in pod["status"].get("conditions", []):
                if c["type"] == pc["type"] and c.get("status") == pc.get("status", "True"):
                    return rule["action"], (
                        f"Pod {where} has condition {c['type']} matching {rule['action']} rule at index {i}"
                    )
    return "Count", ""


def _ranges(indexes: list[int]) -> str:
    """completedIndexes in the API's compressed form: 0-2,5."""
    runs: list[list[int]] = []
    for i in indexes:
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
