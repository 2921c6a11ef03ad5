"""The JobSet controller (jobset.x-k8s.io/v1alpha2), after kubernetes-sigs/jobset v0.12
(pkg/controllers/jobset_controller.go, failure_policy.go, pkg/webhooks/jobset_webhook.go).

Admission: the CRD's schema (crd.py: defaults such as replicas 1 and groupName
"default", unknown fields, types) and the webhook: defaults (successPolicy All,
startupPolicy AnyOrder, completionMode Indexed, restartPolicy OnFailure,
network.enableDNSHostnames and publishNotReadyAddresses true, rule names
failurePolicyRule<i>) and checks (generated job and pod names fit 63 characters,
subdomain, failure policy rule names, reasons and targets). replicatedJobs is
immutable while the JobSet runs.

Reconcile, per JobSet:
  * child Jobs <jobset>-<replicatedJob>-<jobIndex>, owned by the JobSet, with JobSet's
    labels and annotations (jobset-name, jobset-uid, replicatedjob-name,
    replicatedjob-replicas, global-replicas, job-index, job-global-index, job-key,
    group-name, group-replicas, job-group-index, restart-attempt; coordinator) on the
    Job and its pod template; the template's subdomain when DNS hostnames are on, and
    the headless Service named after the subdomain (selector jobset-name);
  * a Job whose restart-attempt label is below status.restarts belongs to an earlier
    attempt: it is deleted (Foreground) and recreated once gone (BlockingRecreate waits
    for every old Job);
  * a failed Job runs the failure policy: without one the JobSet fails (FailedJobs);
    otherwise the first rule (in order) matching a failed Job's reason
    (onJobFailureReasons), message (onJobFailureMessagePatterns) and replicated job
    (targetReplicatedJobs) decides, RestartJobSet when none does. FailJobSet fails it;
    RestartJobSet restarts it unless restartsCountTowardsMax reached maxRestarts
    (then Failed/ReachedMaxRestarts); RestartJobSetAndIgnoreMaxRestarts restarts it
    without counting. A restart raises status.restarts (and restartsCountTowardsMax
    when counted) and sets RestartingJobSet=True;
  * successPolicy All/Any over targetReplicatedJobs: Completed (AllJobsCompleted);
  * Completed or Failed set status.terminalState and delete the Jobs still active;
  * ttlSecondsAfterFinished: a finished JobSet is deleted (Foreground, as the controller's
    executeTTLAfterFinishedPolicy does) that long after its Completed or Failed condition;
  * suspend suspends and resumes the child Jobs (condition Suspended); a resumed Job's pod
    template first takes the replicated job's labels, annotations, nodeSelector and
    tolerations (what Kueue sets while the JobSet is suspended);
  * status.replicatedJobsStatus counts ready, succeeded, failed, active, suspended Jobs.
"""

from __future__ import annotations

import copy
import hashlib
import re
from datetime import UTC, datetime, timedelta

from tests.fakes.kube import crd
from tests.fakes.kube.common import ApiError, invalid, rfc3339
from tests.fakes.kube.jobs import true_conditions
from tests.fakes.kube.store import Store, record_event

GROUP = "jobset.x-k8s.io"
API_VERSION = f"{GROUP}/v1alpha2"
PREFIX = "jobset.sigs.k8s.io/"
JOBSET_NAME = PREFIX + "jobset-name"
JOBSET_UID = PREFIX + "jobset-uid"
REPLICATED_JOB = PREFIX + "replicatedjob-name"
JOB_INDEX = PREFIX + "job-index"
RESTART_ATTEMPT = PREFIX + "restart-attempt"
COORDINATOR = PREFIX + "coordinator"
CRD_FILE = "jobset.x-k8s.io_jobsets.yaml"
FAILURE_REASONS = (
    "BackoffLimitExceeded",
    "DeadlineExceeded",
    "FailedIndexes",
    "MaxFailedIndexesExceeded",
    "PodFailurePolicy",
)
ACTIONS = ("FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts")
RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


# --- admission: CRD schema plus JobSet's webhook --------------------------------------------
def admit_jobset(js: dict, old: dict | None) -> None:
    """Decoding (CRD defaults, pruning), the mutating webhook, the schema's validation,
    then the validating webhook: the API server's order."""
    schema = crd.schema_of(CRD_FILE, "v1alpha2")
    crd.decode(js, schema, kind="JobSet", group=GROUP)
    spec = js.setdefault("spec", {})
    _default(spec)
    crd.validate(js, schema, kind="JobSet", group=GROUP)
    if old is not None:
        if spec.get("replicatedJobs") != old["spec"].get("replicatedJobs") and not old["spec"].get("suspend"):
            raise invalid(
                "JobSet", js["metadata"]["name"], [("spec.replicatedJobs", "Invalid value: field is immutable")], GROUP
            )
    errors = _webhook_errors(js)
    if errors:
        raise ApiError(403, "Forbidden", 'admission webhook "vjobset.kb.io" denied the request: ' + ", ".join(errors))
    js.setdefault("status", {"restarts": 0})


def _default(spec: dict) -> None:
    spec.setdefault("successPolicy", {"operator": "All"})
    spec.setdefault("startupPolicy", {"startupPolicyOrder": "AnyOrder"})
    for rjob in spec.get("replicatedJobs") or []:
        job_spec = rjob.setdefault("template", {}).setdefault("spec", {})
        job_spec.setdefault("completionMode", "Indexed")
        job_spec.setdefault("template", {}).setdefault("spec", {}).setdefault("restartPolicy", "OnFailure")
    network = spec.setdefault("network", {})
    network.setdefault("enableDNSHostnames", True)
    network.setdefault("publishNotReadyAddresses", True)
    for i, rule in enumerate((spec.get("failurePolicy") or {}).get("rules") or []):
        if not rule.get("name"):
            rule["name"] = f"failurePolicyRule{i}"


def _webhook_errors(js: dict) -> list[str]:
    spec, name = js["spec"], js["metadata"]["name"]
    errors: list[str] = []
    subdomain = (spec.get("network") or {}).get("subdomain")
    if subdomain and (len(subdomain) > 63 or not DNS_1035.match(subdomain)):
        errors.append(
            f"spec.network.subdomain: Invalid value: {subdomain!r}: "
            + (
                ".spec.network.subdomain is too long, must be less than 63 characters"
                if len(subdomain) > 63
                else "a DNS-1035 label must consist of lower case alphanumeric characters or '-'"
            )
        )
    names = set()
    for i, rjob in enumerate(spec.get("replicatedJobs") or []):
        names.add(rjob["name"])
        longest_job = f"{name}-{rjob['name']}-{rjob.get('replicas', 1) - 1}"
        if len(longest_job) > 63 or not DNS_1035.match(longest_job):
            errors.append(
                f"spec.replicatedJobs[{i}].name: Invalid value: {longest_job!r}: "
                + (
                    "JobSet name is too long, job names generated for this JobSet will exceed 63 characters"
                    if len(longest_job) > 63
                    else "a DNS-1035 label must consist of lower case alphanumeric characters "
                    "or '-', start with an alphabetic character, and end with an alphanumeric character"
                )
            )
        job_spec = rjob["template"]["spec"]
        if job_spec.get("completionMode") == "Indexed" and job_spec.get("completions") is not None:
            longest_pod = f"{longest_job}-{job_spec['completions'] - 1}-abcde"
            if len(longest_pod) > 63:
                errors.append(
                    f"spec.replicatedJobs[{i}].name: Invalid value: {longest_job!r}: JobSet name is too "
                    "long, pod names generated for this JobSet will exceed 63 characters"
                )
    for target in (spec.get("successPolicy") or {}).get("targetReplicatedJobs") or []:
        if target not in names:
            errors.append(f"invalid replicatedJob name '{target}' does not appear in .spec.ReplicatedJobs")
    seen: dict[str, list[int]] = {}
    for i, rule in enumerate((spec.get("failurePolicy") or {}).get("rules") or []):
        seen.setdefault(rule["name"], []).append(i)
        if not RULE_NAME.match(rule["name"]) or len(rule["name"]) > 128:
            errors.append(f"invalid failure policy rule name '{rule['name']}'")
        if rule.get("action") not in ACTIONS:
            errors.append(
                f"failure policy action {rule.get('action')!r} is not supported by the fake "
                f"(it serves {', '.join(ACTIONS)})"
            )
        for target in rule.get("targetReplicatedJobs") or []:
            if target not in names:
                errors.append(
                    f"invalid replicatedJob name '{target}' in failure policy does not appear in .spec.ReplicatedJobs"
                )
        for reason in rule.get("onJobFailureReasons") or []:
            if reason not in FAILURE_REASONS:
                errors.append(
                    f"invalid job failure reason '{reason}' in failure policy is not a recognized job failure reason"
                )
    for rule_name, indexes in seen.items():
        if len(indexes) > 1:
            errors.append(
                f"rule names are not unique, rules with indices {indexes} all have the same name '{rule_name}'"
            )
    return errors


# --- the controller -------------------------------------------------------------------------
def _ttl_expired(js: dict, finished: dict) -> bool:
    ttl = js["spec"].get("ttlSecondsAfterFinished")
    at = finished.get("lastTransitionTime")
    if ttl is None or not at:
        return False
    return datetime.now(UTC) >= datetime.fromisoformat(at.replace("Z", "+00:00")) + timedelta(seconds=int(ttl))


def set_condition(js: dict, type_: str, status: str, reason: str, message: str) -> bool:
    """metav1.Condition semantics of JobSet's updateCondition; False when nothing changed.
    Completed, Failed and Suspended exclude each other."""
    conds = js["status"].setdefault("conditions", [])
    changed = False
    found = False
    exclusive = {"Completed", "Failed", "Suspended"}
    for c in conds:
        if c["type"] == type_:
            found = True
            if c["status"] != status:
                c.update(status=status, reason=reason, message=message, lastTransitionTime=rfc3339())
                changed = True
            elif c.get("reason") != reason or c.get("message") != message:
                c.update(reason=reason, message=message)
                changed = True
        elif type_ in exclusive and c["type"] in exclusive and c["status"] == "True" and status == "True":
            c["status"] = "False"
            changed = True
    if not found and status == "True":
        conds.append(
            {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": rfc3339()}
        )
        changed = True
    return changed


class JobSetController:
    def __init__(self, store: Store):
        self.store = store

    def sync(self) -> None:
        with self.store.lock:
            for (kind, _, _), js in list(self.store.objects.items()):
                if kind == "JobSet":
                    self._sync(js)

    def _children(self, js: dict) -> dict[str, list[dict]]:
        uid, ns = js["metadata"]["uid"], js["metadata"]["namespace"]
        restarts = js["status"].get("restarts", 0)
        out: dict[str, list[dict]] = {"active": [], "failed": [], "successful": [], "previous": []}
        for (kind, n, _), job in self.store.objects.items():
            if (
                kind != "Job"
                or n != ns
                or not any(
                    r.get("uid") == uid and r.get("controller") for r in job["metadata"].get("ownerReferences") or []
                )
            ):
                continue
            if int((job["metadata"].get("labels") or {}).get(RESTART_ATTEMPT, "0")) < restarts:
                out["previous"].append(job)
                continue
            conds = true_conditions(job)
            out["failed" if "Failed" in conds else "successful" if "Complete" in conds else "active"].append(job)
        return out

    def _sync(self, js: dict) -> None:
        meta, spec = js["metadata"], js["spec"]
        status = js.setdefault("status", {})
        status.setdefault("restarts", 0)
        if meta.get("deletionTimestamp") or spec.get("managedBy") not in (None, "jobset.sigs.k8s.io/jobset-controller"):
            return
        before = copy.deepcopy(status)
        jobs = self._children(js)
        status["replicatedJobsStatus"] = self._replicated_statuses(js, jobs)
        conds = true_conditions(js)
        if "Completed" in conds or "Failed" in conds:
            self._delete(jobs["active"])
            if _ttl_expired(js, conds.get("Completed") or conds["Failed"]):
                self.store.delete("JobSet", meta["namespace"], meta["name"], {"propagationPolicy": "Foreground"})
                return
        else:
            self._delete(jobs["previous"])
            self._reconcile(js, jobs)
        if status != before:
            self.store.publish("JobSet", meta["namespace"], js)

    def _reconcile(self, js: dict, jobs: dict[str, list[dict]]) -> None:
        spec, status = js["spec"], js["status"]
        suspended = bool(spec.get("suspend"))
        statuses = status["replicatedJobsStatus"]
        total = sum(r.get("replicas", 1) for r in spec.get("replicatedJobs") or [])
        if not suspended and total == sum(s["ready"] + s["succeeded"] for s in statuses):
            set_condition(js, "RestartingJobSet", "False", "JobsReady", "all jobs are ready")
        if jobs["failed"]:
            return self._failure_policy(js, jobs["failed"])
        if jobs["successful"] and self._succeeded(js, jobs["successful"]):
            set_condition(js, "Completed", "True", "AllJobsCompleted", "jobset completed successfully")
            set_condition(js, "RestartingJobSet", "False", "JobSetCompleted", "jobset completed successfully")
            status["terminalState"] = "Completed"
            record_event(
                self.store, js, "Normal", "AllJobsCompleted", "jobset completed successfully", "jobset-controller"
            )
            return None
        self._headless_service(js)
        blocking = (spec.get("failurePolicy") or {}).get("restartStrategy") == "BlockingRecreate"
        if not (blocking and jobs["previous"]):
            existing = {j["metadata"]["name"] for group in jobs.values() for j in group}
            for rjob in spec.get("replicatedJobs") or []:
                for index in range(rjob.get("replicas", 1)):
                    name = f"{js['metadata']['name']}-{rjob['name']}-{index}"
                    if name not in existing:
                        self.store.create("Job", js["metadata"]["namespace"], self._job(js, rjob, index))
        for job in jobs["active"]:
            if bool(job["spec"].get("suspend")) != suspended:
                if not suspended:
                    self._resume(js, job)
                self.store.patch(
                    "Job", job["metadata"]["namespace"], job["metadata"]["name"], {"spec": {"suspend": suspended}}
                )
        if suspended:
            set_condition(js, "Suspended", "True", "SuspendedJobs", "jobset is suspended")
            set_condition(js, "RestartingJobSet", "False", "JobSetSuspended", "jobset is suspended")
        elif any(c["type"] == "Suspended" for c in status.get("conditions") or []):
            set_condition(js, "Suspended", "False", "ResumeJobs", "jobset is resumed")
        return None

    def _resume(self, js: dict, job: dict) -> None:
        """Before a Job resumes, its pod template takes the replicated job's labels,
        annotations, nodeSelector and tolerations (what Kueue set on the JobSet while it
        was suspended), as JobSet's resumeJob merges them."""
        rjob = next(
            (
                r
                for r in js["spec"].get("replicatedJobs") or []
                if r["name"] == job["metadata"]["labels"].get(REPLICATED_JOB)
            ),
            None,
        )
        if rjob is None:
            return
        source = rjob["template"]["spec"].get("template") or {}
        target = job["spec"].setdefault("template", {})
        for key in ("labels", "annotations"):
            target.setdefault("metadata", {}).setdefault(key, {}).update((source.get("metadata") or {}).get(key) or {})
        spec, source_spec = target.setdefault("spec", {}), source.get("spec") or {}
        if source_spec.get("nodeSelector"):
            spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **source_spec["nodeSelector"]}
        for toleration in source_spec.get("tolerations") or []:
            if toleration not in spec.setdefault("tolerations", []):
                spec["tolerations"].append(toleration)

    def _succeeded(self, js: dict, successful: list[dict]) -> bool:
        policy = js["spec"].get("successPolicy") or {"operator": "All"}
        targets = policy.get("targetReplicatedJobs") or [r["name"] for r in js["spec"]["replicatedJobs"]]
        done = [j for j in successful if j["metadata"]["labels"].get(REPLICATED_JOB) in targets]
        if policy.get("operator") == "Any":
            return bool(done)
        return len(done) >= sum(r.get("replicas", 1) for r in js["spec"]["replicatedJobs"] if r["name"] in targets)

    def _failure_policy(self, js: dict, failed: list[dict]) -> None:
        status = js["status"]
        policy = js["spec"].get("failurePolicy")

        def failure(job: dict) -> dict:
            return true_conditions(job).get("Failed") or {}

        first = min(failed, key=lambda j: failure(j).get("lastTransitionTime", ""))
        if policy is None:
            return self._fail(js, "FailedJobs", _with_job("jobset failed due to one or more job failures", first))
        rule, job = None, first
        for candidate in policy.get("rules") or []:
            matching = [j for j in failed if _applies(candidate, j, failure(j))]
            if matching:
                rule, job = candidate, min(matching, key=lambda j: failure(j).get("lastTransitionTime", ""))
                break
        action = rule["action"] if rule else "RestartJobSet"
        if action == "FailJobSet":
            return self._fail(
                js, "FailJobSetFailurePolicyAction", _with_job("applying FailJobSet failure policy action", job)
            )
        counted = action == "RestartJobSet"
        if counted and status.get("restartsCountTowardsMax", 0) >= policy.get("maxRestarts", 0):
            return self._fail(
                js, "ReachedMaxRestarts", _with_job("jobset failed due to reaching max number of restarts", job)
            )
        message = _with_job(f"applying {action} failure policy action", job)
        status["restarts"] = status.get("restarts", 0) + 1
        if counted:
            status["restartsCountTowardsMax"] = status.get("restartsCountTowardsMax", 0) + 1
        set_condition(
            js, "RestartingJobSet", "True", f"FailurePolicy_{rule['name']}" if rule else "DefaultFailurePolicy", message
        )
        record_event(self.store, js, "Warning", f"{action}FailurePolicyAction", message, "jobset-controller")
        return None

    def _fail(self, js: dict, reason: str, message: str) -> None:
        set_condition(js, "Failed", "True", reason, message)
        set_condition(js, "RestartingJobSet", "False", "JobSetFailed", "jobset failed")
        js["status"]["terminalState"] = "Failed"
        record_event(self.store, js, "Warning", reason, message, "jobset-controller")

    def _delete(self, jobs: list[dict]) -> None:
        for job in jobs:
            if not job["metadata"].get("deletionTimestamp"):
                self.store.delete(
                    "Job", job["metadata"]["namespace"], job["metadata"]["name"], {"propagationPolicy": "Foreground"}
                )

    def _replicated_statuses(self, js: dict, jobs: dict[str, list[dict]]) -> list[dict]:
        out = []
        for rjob in js["spec"].get("replicatedJobs") or []:
            mine = {
                k: [j for j in v if j["metadata"]["labels"].get(REPLICATED_JOB) == rjob["name"]]
                for k, v in jobs.items()
                if k != "previous"
            }
            ready = [
                j
                for j in mine["active"]
                if (j.get("status") or {}).get("ready", 0) + (j.get("status") or {}).get("succeeded", 0)
                >= min(j["spec"].get("parallelism", 1), j["spec"].get("completions", 1))
            ]
            out.append(
                {
                    "name": rjob["name"],
                    "ready": len(ready),
                    "succeeded": len(mine["successful"]),
                    "failed": len(mine["failed"]),
                    "active": sum(1 for j in mine["active"] if (j.get("status") or {}).get("active", 0) > 0),
                    "suspended": sum(1 for j in mine["active"] if j["spec"].get("suspend")),
                }
            )
        return out

    def _headless_service(self, js: dict) -> None:
        network = js["spec"].get("network") or {}
        if not network.get("enableDNSHostnames"):
            return
        name = subdomain(js)
        ns = js["metadata"]["namespace"]
        if ("Service", ns, name) in self.store.objects:
            return
        self.store.create(
            "Service",
            ns,
            {
                "metadata": {"name": name, "ownerReferences": [owner(js)]},
                "spec": {
                    "clusterIP": "None",
                    "selector": {JOBSET_NAME: js["metadata"]["name"]},
                    "publishNotReadyAddresses": network.get("publishNotReadyAddresses", True),
                },
            },
        )

    def _job(self, js: dict, rjob: dict, index: int) -> dict:
        tmpl = copy.deepcopy(rjob["template"])
        name = f"{js['metadata']['name']}-{rjob['name']}-{index}"
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": name,
                "labels": dict((tmpl.get("metadata") or {}).get("labels") or {}),
                "annotations": dict((tmpl.get("metadata") or {}).get("annotations") or {}),
                "ownerReferences": [owner(js)],
            },
            "spec": tmpl["spec"],
        }
        stamp = self._stamp(js, rjob, index)
        pod_meta = job["spec"].setdefault("template", {}).setdefault("metadata", {})
        for meta in (job["metadata"], pod_meta):
            meta.setdefault("labels", {}).update(stamp)
            meta.setdefault("annotations", {}).update(stamp)
        if (js["spec"].get("network") or {}).get("enableDNSHostnames"):
            job["spec"]["template"].setdefault("spec", {})["subdomain"] = subdomain(js)
        job["spec"]["suspend"] = bool(js["spec"].get("suspend"))
        return job

    def _stamp(self, js: dict, rjob: dict, index: int) -> dict[str, str]:
        rjobs = js["spec"]["replicatedJobs"]
        group = rjob.get("groupName", "default")
        before = sum(r.get("replicas", 1) for r in rjobs[: rjobs.index(rjob)])
        in_group = [r for r in rjobs if r.get("groupName", "default") == group]
        group_before = sum(r.get("replicas", 1) for r in in_group[: in_group.index(rjob)])
        name = f"{js['metadata']['name']}-{rjob['name']}-{index}"
        out = {
            JOBSET_NAME: js["metadata"]["name"],
            JOBSET_UID: js["metadata"]["uid"],
            REPLICATED_JOB: rjob["name"],
            RESTART_ATTEMPT: str(js["status"].get("restarts", 0)),
            PREFIX + "replicatedjob-replicas": str(rjob.get("replicas", 1)),
            PREFIX + "global-replicas": str(sum(r.get("replicas", 1) for r in rjobs)),
            JOB_INDEX: str(index),
            PREFIX + "job-key": hashlib.sha1(f"{js['metadata']['namespace']}/{name}".encode()).hexdigest(),
            PREFIX + "job-global-index": str(before + index),
            PREFIX + "group-name": group,
            PREFIX + "group-replicas": str(sum(r.get("replicas", 1) for r in in_group)),
            PREFIX + "job-group-index": str(group_before + index),
        }
        coordinator = js["spec"].get("coordinator")
        if coordinator:
            out[COORDINATOR] = (
                f"{js['metadata']['name']}-{coordinator['replicatedJob']}-"
                f"{coordinator.get('jobIndex', 0)}-{coordinator.get('podIndex', 0)}.{subdomain(js)}"
            )
        return out


def subdomain(js: dict) -> str:
    return (js["spec"].get("network") or {}).get("subdomain") or js["metadata"]["name"]


def owner(js: dict) -> dict:
    return {
        "apiVersion": API_VERSION,
        "kind": "JobSet",
        "name": js["metadata"]["name"],
        "uid": js["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _applies(rule: dict, job: dict, failure: dict) -> bool:
    reasons = rule.get("onJobFailureReasons") or []
    if reasons and failure.get("reason") not in reasons:
        return False
    patterns = rule.get("onJobFailureMessagePatterns") or []
    if patterns and not any(re.search(p, failure.get("message", "")) for p in patterns):
        return False
    targets = rule.get("targetReplicatedJobs") or []
    return not targets or job["metadata"]["labels"].get(REPLICATED_JOB) in targets


def _with_job(message: str, job: dict) -> str:
    return f"{message} (first failed job: {job['metadata']['name']})"
