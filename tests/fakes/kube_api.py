"""A stateful fake Kubernetes API server, for the real `kubernetes` client over HTTP.

It serves the parts of core/v1 and batch/v1 the launcher uses, on 127.0.0.1:

  * create / get / list / watch / replace / merge-patch / delete / deletecollection of
    Pods, Services, ConfigMaps, Secrets, Events and Jobs; label and field selectors;
  * resourceVersions: every write bumps one counter; a watch replays history after its
    version and streams new events as chunked JSON lines; a compacted version gets 410;
  * deletion with propagationPolicy: Background and Foreground delete dependents (by
    ownerReferences); Orphan strips their owner references after a short "orphan
    finalizer" delay, as the garbage collector does; a Job deleted without a policy
    orphans its pods, as the real batch/v1 default does;
  * pods/log with follow, timestamps (RFC3339Nano), sinceSeconds, tailLines, previous.

Behind it run three loops that act like the control plane and a node:

  * a Job controller for Indexed Jobs: one pod per index named <job>-<i>-<rand>, with
    hostname <job>-<i>, the job's subdomain, the completion-index annotation and label,
    podFailurePolicy (FailJob on exit codes and pod conditions), backoffLimit,
    activeDeadlineSeconds, suspend, and the conditions FailureTarget, Failed,
    SuccessCriteriaMet, Complete and Suspended;
  * a scheduler over fake nodes (labels, nvidia.com/gpu capacity, nodeSelector, required
    node affinity, required pod anti-affinity) that writes FailedScheduling events;
  * a kubelet that mounts ConfigMap and Secret volumes into a temporary directory,
    resolves env (value, secretKeyRef, fieldRef), reports CreateContainerConfigError,
    FailedMount and image pull errors like a kubelet, and runs each container's command
    as a local process, timestamping each output line.

Simulation gaps, on purpose: there is no DNS, so the kubelet sets MASTER_ADDR to
127.0.0.1; mount paths (/mnt/config, /secrets/...) are rewritten to the pod's temporary
directory in env values; `python` in a command is this interpreter; strategic merge
patch is treated as a JSON merge patch.

Faults are set on `FakeKube.faults` (see `Faults`).
"""

from __future__ import annotations

import base64
import copy
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler

from tests.fakes.http import LoopbackServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

PLURALS = {"pods": "Pod", "services": "Service", "configmaps": "ConfigMap", "secrets": "Secret",
           "events": "Event", "jobs": "Job"}
API_VERSIONS = {"Job": "batch/v1"}
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
GPU = "nvidia.com/gpu"


# --- time and small helpers ------------------------------------------------------------------
def now_ns() -> int:
    return time.time_ns()


def rfc3339(ns: int | None = None, *, nano: bool = False) -> str:
    ns = now_ns() if ns is None else ns
    secs, frac = divmod(ns, 1_000_000_000)
    base = datetime.fromtimestamp(secs, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    if not nano:
        return base + "Z"
    digits = f"{frac:09d}".rstrip("0")  # Go's RFC3339Nano trims trailing zeros
    return f"{base}.{digits}Z" if digits else base + "Z"


def rand_suffix(n: int = 5) -> str:
    return "".join(random.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(n))


def status_body(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


# --- selectors ---------------------------------------------------------------------------------
_REQ = re.compile(r"\s*(!?)([A-Za-z0-9_./-]+)\s*(?:(==|=|!=)\s*([A-Za-z0-9_.-]*)|\s+(in|notin)\s*\(([^)]*)\))?\s*")


def parse_label_selector(text: str | None) -> list[tuple]:
    reqs: list[tuple] = []
    pos = 0
    text = text or ""
    while pos < len(text):
        m = _REQ.match(text, pos)
        if not m or m.end() == pos:
            raise ApiError(400, "BadRequest", f"unable to parse requirement: {text[pos:]!r}")
        neg, key, op, val, setop, setvals = m.groups()
        if op:
            reqs.append(("ne" if op == "!=" else "eq", key, val))
        elif setop:
            reqs.append((setop, key, {v.strip() for v in setvals.split(",")}))
        else:
            reqs.append(("absent" if neg else "exists", key, None))
        pos = m.end()
        if pos < len(text) and text[pos] == ",":
            pos += 1
    return reqs


def labels_match(labels: dict[str, str], reqs: list[tuple]) -> bool:
    for op, key, val in reqs:
        have = labels.get(key)
        if op == "eq" and have != val:
            return False
        if op == "ne" and have == val:
            return False
        if op == "in" and have not in val:
            return False
        if op == "notin" and have in val:
            return False
        if op == "exists" and key not in labels:
            return False
        if op == "absent" and key in labels:
            return False
    return True


def fields_match(obj: dict, selector: str | None) -> bool:
    for part in filter(None, (selector or "").split(",")):
        neg = "!=" in part
        path, _, want = part.partition("!=" if neg else "=")
        want = want.lstrip("=")
        value: Any = obj
        for seg in path.split("."):
            value = value.get(seg) if isinstance(value, dict) else None
        value = "" if value is None else str(value)
        if (value == want) == neg:
            return False
    return True


# --- faults ------------------------------------------------------------------------------------
@dataclass
class Faults:
    """Scripted trouble. Each counter is consumed as it fires."""

    gone_watches: int = 0
    """Answer this many watch requests with a 410 Gone ERROR event."""
    drop_logs_after: int | None = None
    """Cut the next follow log stream abruptly after this many lines (then reset to None)."""
    drop_logs_count: int = 1
    drop_finished_reads: bool = False
    """Also cut one-shot (not follow) reads, as a proxy or a kubelet restart can."""
    api_errors: int = 0
    """Answer this many requests (but never watches or logs) with 503."""
    bad_images: set[str] = field(default_factory=set)
    """Images whose pull fails (ErrImagePull, then ImagePullBackOff)."""
    hold_pods: bool = False
    """Keep scheduled pods in ContainerCreating."""


@dataclass
class Container:
    proc: subprocess.Popen | None = None
    lines: list[tuple[int, str]] = field(default_factory=list)
    done: bool = False
    started_ns: int | None = None


# --- the server --------------------------------------------------------------------------------
class FakeKube:
    def __init__(self, *, nodes: list[dict] | None = None, run_controllers: bool = True,
                 log_resolution_ns: int = 1_000, grace_seconds: float = 3.0, orphan_delay: float = 0.2):
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.objects: dict[tuple[str, str, str], dict] = {}
        self.rv = 100
        self.history: list[tuple[int, str, str, str, dict]] = []
        self.min_rv = 0
        self.faults = Faults()
        self.requests: list[tuple[str, str, str]] = []
        self.nodes = nodes if nodes is not None else [
            {"name": f"fake-node-{i}", "labels": {"kubernetes.io/hostname": f"fake-node-{i}"}, "gpus": 0}
            for i in range(4)]
        self.run_controllers = run_controllers
        self.log_resolution_ns = log_resolution_ns
        self.grace_seconds = grace_seconds
        self.orphan_delay = orphan_delay
        self.containers: dict[str, Container] = {}
        self.ports: dict[str, int] = {}
        self.root = Path(tempfile.mkdtemp(prefix="fake-kubelet-"))
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._pending_orphans: list[tuple[float, str, str, str, str]] = []
        handler = type("Handler", (_Handler,), {"kube": self})
        self.server = LoopbackServer(handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    # -- lifecycle --
    def start(self) -> FakeKube:
        t = threading.Thread(target=self.server.serve_forever, name="fake-kube-http", daemon=True)
        t.start()
        self._threads.append(t)
        c = threading.Thread(target=self._control_loop, name="fake-kube-control", daemon=True)
        c.start()
        self._threads.append(c)
        return self

    def close(self) -> None:
        self._stop.set()
        with self.lock:
            procs = [c.proc for c in self.containers.values() if c.proc and c.proc.poll() is None]
            self.changed.notify_all()
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.server.shutdown()
        self.server.server_close()
        shutil.rmtree(self.root, ignore_errors=True)

    def write_kubeconfig(self, path: Path, context: str = "fake") -> Path:
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": "fake-token"}}],
            "contexts": [{"name": context, "context": {"cluster": "fake", "user": "tester", "namespace": "default"}}],
        }))
        return path

    # -- storage --
    def _bump(self, kind: str, ns: str, type_: str, obj: dict) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.history.append((self.rv, kind, ns, type_, copy.deepcopy(obj)))
        self.changed.notify_all()

    def create(self, kind: str, ns: str, body: dict) -> dict:
        with self.lock:
            obj = copy.deepcopy(body)
            meta = obj.setdefault("metadata", {})
            if not meta.get("name"):
                if meta.get("generateName"):
                    meta["name"] = meta["generateName"] + rand_suffix()
                else:
                    raise ApiError(422, "Invalid", f"{kind} \"\" is invalid: metadata.name: Required value")
            key = (kind, ns, meta["name"])
            if key in self.objects:
                raise ApiError(409, "AlreadyExists", f'{kind.lower()}s "{meta["name"]}" already exists')
            meta.update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=rfc3339(), generation=1)
            obj.setdefault("apiVersion", API_VERSIONS.get(kind, "v1"))
            obj["kind"] = kind
            if kind == "Job":
                self._default_job(obj)
            if kind == "Pod":
                obj.setdefault("status", {"phase": "Pending"})
            self.objects[key] = obj
            self._bump(kind, ns, "ADDED", obj)
            return copy.deepcopy(obj)

    def _default_job(self, job: dict) -> None:
        spec = job.setdefault("spec", {})
        uid = job["metadata"]["uid"]
        if spec.get("selector") and not spec.get("manualSelector"):
            raise ApiError(422, "Invalid", f'Job.batch "{job["metadata"]["name"]}" is invalid: spec.selector: '
                           "Invalid value: `selector` not auto-generated")
        tmpl = spec.setdefault("template", {})
        if spec.get("podFailurePolicy") and (tmpl.get("spec") or {}).get("restartPolicy") != "Never":
            raise ApiError(422, "Invalid", "spec.podFailurePolicy: only allowed with restartPolicy Never")
        spec["selector"] = {"matchLabels": {CONTROLLER_UID: uid}}
        lbl = tmpl.setdefault("metadata", {}).setdefault("labels", {})
        lbl.update({CONTROLLER_UID: uid, "controller-uid": uid,
                    "batch.kubernetes.io/job-name": job["metadata"]["name"], "job-name": job["metadata"]["name"]})
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("suspend", False)
        spec.setdefault("completions", 1)
        spec.setdefault("parallelism", 1)
        job["status"] = {}

    def get(self, kind: str, ns: str, name: str) -> dict:
        with self.lock:
            obj = self.objects.get((kind, ns, name))
            if obj is None:
                raise ApiError(404, "NotFound", f'{kind.lower()}s "{name}" not found')
            return copy.deepcopy(obj)

    def list(self, kind: str, ns: str, labels: str | None = None, fields: str | None = None) -> tuple[list[dict], str]:
        reqs = parse_label_selector(labels)
        with self.lock:
            items = [copy.deepcopy(o) for (k, n, _), o in sorted(self.objects.items())
                     if k == kind and n == ns and labels_match(o["metadata"].get("labels") or {}, reqs)
                     and fields_match(o, fields)]
            return items, str(self.rv)

    def update(self, kind: str, ns: str, name: str, fn) -> dict:
        """Apply fn(obj) to the stored object and publish the change (controllers' writes)."""
        with self.lock:
            obj = self.objects.get((kind, ns, name))
            if obj is None:
                raise ApiError(404, "NotFound", f'{kind.lower()}s "{name}" not found')
            fn(obj)
            self._bump(kind, ns, "MODIFIED", obj)
            return copy.deepcopy(obj)

    def patch(self, kind: str, ns: str, name: str, patch: dict) -> dict:
        with self.lock:
            obj = self.objects.get((kind, ns, name))
            if obj is None:
                raise ApiError(404, "NotFound", f'{kind.lower()}s "{name}" not found')
            want = (patch.get("metadata") or {}).get("resourceVersion")
            if want and want != obj["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {kind.lower()}s "{name}": '
                               "the object has been modified; please apply your changes to the latest version")
            merged = merge_patch(obj, patch)
            for k in ("uid", "creationTimestamp", "namespace", "name"):
                merged["metadata"][k] = obj["metadata"][k]
            self.objects[(kind, ns, name)] = merged
            self._bump(kind, ns, "MODIFIED", merged)
            return copy.deepcopy(merged)

    def replace(self, kind: str, ns: str, name: str, body: dict) -> dict:
        with self.lock:
            obj = self.objects.get((kind, ns, name))
            if obj is None:
                raise ApiError(404, "NotFound", f'{kind.lower()}s "{name}" not found')
            want = (body.get("metadata") or {}).get("resourceVersion")
            if want and want != obj["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {kind.lower()}s "{name}"')
            new = copy.deepcopy(body)
            for k in ("uid", "creationTimestamp"):
                new["metadata"][k] = obj["metadata"][k]
            new["metadata"]["namespace"] = ns
            new["kind"] = kind
            self.objects[(kind, ns, name)] = new
            self._bump(kind, ns, "MODIFIED", new)
            return copy.deepcopy(new)

    def delete(self, kind: str, ns: str, name: str, options: dict | None = None) -> dict:
        options = options or {}
        with self.lock:
            obj = self.objects.get((kind, ns, name))
            if obj is None:
                raise ApiError(404, "NotFound", f'{kind.lower()}s "{name}" not found')
            pre = options.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != obj["metadata"]["uid"]:
                raise ApiError(409, "Conflict", f"Precondition failed: UID in precondition: {pre['uid']}, "
                               f"UID in object meta: {obj['metadata']['uid']}")
            policy = options.get("propagationPolicy") or ("Orphan" if kind == "Job" else "Background")
            if kind == "Pod" and self._graceful(obj):
                if not obj["metadata"].get("deletionTimestamp"):
                    obj["metadata"]["deletionTimestamp"] = rfc3339()
                    self._bump(kind, ns, "MODIFIED", obj)
                return copy.deepcopy(obj)
            if policy == "Orphan":
                if not obj["metadata"].get("deletionTimestamp"):
                    obj["metadata"]["deletionTimestamp"] = rfc3339()
                    obj["metadata"]["finalizers"] = ["orphan"]
                    self._bump(kind, ns, "MODIFIED", obj)
                    self._pending_orphans.append((time.monotonic() + self.orphan_delay, kind, ns, name,
                                                  obj["metadata"]["uid"]))
                return copy.deepcopy(obj)
            self._remove(kind, ns, name)
            self._collect(obj["metadata"]["uid"], ns)
            return copy.deepcopy(obj)

    def _graceful(self, pod: dict) -> bool:
        c = self.containers.get(pod["metadata"]["uid"])
        return bool(c and c.proc and c.proc.poll() is None)

    def _remove(self, kind: str, ns: str, name: str) -> None:
        obj = self.objects.pop((kind, ns, name))
        self._bump(kind, ns, "DELETED", obj)

    def _dependents(self, uid: str, ns: str) -> list[tuple[str, str, str]]:
        return [k for k, o in self.objects.items() if k[1] == ns
                and any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])]

    def _collect(self, uid: str, ns: str) -> None:
        for kind, _, name in self._dependents(uid, ns):
            if (kind, ns, name) in self.objects:
                self.delete(kind, ns, name, {"propagationPolicy": "Background"})

    def _finish_orphans(self) -> None:
        with self.lock:
            due = [p for p in self._pending_orphans if p[0] <= time.monotonic()]
            self._pending_orphans = [p for p in self._pending_orphans if p[0] > time.monotonic()]
            for _, kind, ns, name, uid in due:
                for dkind, _, dname in self._dependents(uid, ns):
                    def strip(o, uid=uid):
                        refs = [r for r in o["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
                        if refs:
                            o["metadata"]["ownerReferences"] = refs
                        else:
                            o["metadata"].pop("ownerReferences", None)
                    self.update(dkind, ns, dname, strip)
                obj = self.objects.get((kind, ns, name))
                if obj is not None and obj["metadata"]["uid"] == uid:
                    self._remove(kind, ns, name)

    # -- events --
    def record_event(self, pod: dict, type_: str, reason: str, message: str) -> None:
        with self.lock:
            ns = pod["metadata"]["namespace"]
            for o in self.objects.values():
                if (o["kind"] == "Event" and o["involvedObject"].get("uid") == pod["metadata"]["uid"]
                        and o["reason"] == reason and o["message"] == message):
                    return
            self.create("Event", ns, {
                "metadata": {"name": f"{pod['metadata']['name']}.{uuid.uuid4().hex[:16]}"},
                "involvedObject": {"kind": "Pod", "name": pod["metadata"]["name"], "namespace": ns,
                                   "uid": pod["metadata"]["uid"], "apiVersion": "v1"},
                "reason": reason, "message": message, "type": type_, "count": 1,
                "firstTimestamp": rfc3339(), "lastTimestamp": rfc3339(),
                "source": {"component": "fake-kube"},
            })

    # -- fault helpers tests call --
    def evict(self, pod_name: str, ns: str = "default", reason: str = "PreemptionByScheduler") -> None:
        """Preempt a running pod: DisruptionTarget, then SIGKILL (exit 137)."""
        with self.lock:
            pod = self.objects[("Pod", ns, pod_name)]

            def mark(p):
                p["status"].setdefault("conditions", []).append({
                    "type": "DisruptionTarget", "status": "True", "reason": reason,
                    "message": "Preempted in order to admit critical pod", "lastTransitionTime": rfc3339()})
            self.update("Pod", ns, pod_name, mark)
            c = self.containers.get(pod["metadata"]["uid"])
        if c and c.proc and c.proc.poll() is None:
            os.killpg(c.proc.pid, signal.SIGKILL)

    def count(self, method: str | None = None, kind: str | None = None, verb: str | None = None) -> int:
        with self.lock:
            return sum(1 for m, k, v in self.requests
                       if (method is None or m == method) and (kind is None or k == kind) and (verb is None or v == verb))

    def pods(self, ns: str = "default", labels: str | None = None) -> list[dict]:
        return self.list("Pod", ns, labels)[0]

    # -- control plane loops --
    def _control_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._finish_orphans()
                if self.run_controllers:
                    self._sync_jobs()
                    self._sync_pods()
            except Exception as e:  # noqa: BLE001 - keep the fake alive; tests see the effects
                print(f"fake-kube control loop: {type(e).__name__}: {e}", file=sys.stderr)
            with self.lock:
                self.changed.wait(0.05)

    # Job controller
    def _sync_jobs(self) -> None:
        with self.lock:
            jobs = [o for (k, _, _), o in self.objects.items() if k == "Job"]
            for job in jobs:
                self._sync_job(job)

    def _job_pods(self, job: dict) -> list[dict]:
        uid = job["metadata"]["uid"]
        return [o for (k, n, _), o in self.objects.items() if k == "Pod" and n == job["metadata"]["namespace"]
                and (o["metadata"].get("labels") or {}).get(CONTROLLER_UID) == uid]

    def _set_condition(self, job: dict, type_: str, status: str, reason: str = "", message: str = "") -> bool:
        conds = job["status"].setdefault("conditions", [])
        for c in conds:
            if c["type"] == type_:
                if c["status"] == status:
                    return False
                c.update(status=status, reason=reason, message=message, lastTransitionTime=rfc3339())
                return True
        conds.append({"type": type_, "status": status, "reason": reason, "message": message,
                      "lastProbeTime": rfc3339(), "lastTransitionTime": rfc3339()})
        return True

    def _sync_job(self, job: dict) -> None:
        meta, spec, status = job["metadata"], job["spec"], job.setdefault("status", {})
        ns = meta["namespace"]
        if meta.get("deletionTimestamp"):
            return
        conds = {c["type"]: c for c in status.get("conditions", []) if c["status"] == "True"}
        if "Complete" in conds or "Failed" in conds:
            return
        pods = self._job_pods(job)
        active = [p for p in pods if p["status"].get("phase") in ("Pending", "Running")]
        changed = False
        if spec.get("suspend"):
            for p in active:
                self.delete("Pod", ns, p["metadata"]["name"])
            if self._set_condition(job, "Suspended", "True", "JobSuspended", "Job suspended"):
                status.pop("startTime", None)
                self._bump("Job", ns, "MODIFIED", job)
            return
        if "Suspended" in conds:
            changed |= self._set_condition(job, "Suspended", "False", "JobResumed", "Job resumed")
        if not status.get("startTime"):
            status["startTime"] = rfc3339()
            changed = True
        target = conds.get("FailureTarget")
        if target is None:
            target = self._failure(job, pods)
            if target:
                self._set_condition(job, "FailureTarget", "True", *target)
                changed = True
                conds["FailureTarget"] = {"reason": target[0], "message": target[1]}
        if conds.get("FailureTarget"):
            for p in active:
                if not p["metadata"].get("deletionTimestamp"):
                    self.delete("Pod", ns, p["metadata"]["name"])
            if not [p for p in self._job_pods(job) if p["status"].get("phase") in ("Pending", "Running")]:
                t = conds["FailureTarget"]
                self._set_condition(job, "Failed", "True", t["reason"], t["message"])
                changed = True
        else:
            done = {int(p["metadata"]["annotations"][COMPLETION_INDEX]) for p in pods
                    if p["status"].get("phase") == "Succeeded"}
            if len(done) >= spec["completions"]:
                self._set_condition(job, "SuccessCriteriaMet", "True", "CompletionsReached", "Reached expected number of succeeded pods")
                self._set_condition(job, "Complete", "True", "CompletionsReached", "Reached expected number of succeeded pods")
                status["completionTime"] = rfc3339()
                changed = True
            else:
                have = {int(p["metadata"]["annotations"][COMPLETION_INDEX]) for p in pods
                        if p["status"].get("phase") in ("Pending", "Running", "Succeeded")}
                for i in range(spec["completions"]):
                    if i not in have:
                        self._create_pod(job, i)
                        changed = True
            status["completedIndexes"] = ",".join(str(i) for i in sorted(done))
        pods = self._job_pods(job)
        counts = {"active": sum(p["status"].get("phase") in ("Pending", "Running") for p in pods),
                  "succeeded": sum(p["status"].get("phase") == "Succeeded" for p in pods),
                  "failed": sum(p["status"].get("phase") == "Failed" for p in pods)}
        if any(status.get(k) != v for k, v in counts.items()):
            status.update(counts)
            changed = True
        if changed:
            self._bump("Job", ns, "MODIFIED", job)

    def _failure(self, job: dict, pods: list[dict]) -> tuple[str, str] | None:
        spec, status = job["spec"], job["status"]
        deadline = spec.get("activeDeadlineSeconds")
        if deadline and status.get("startTime"):
            started = datetime.fromisoformat(status["startTime"]).timestamp()
            if time.time() - started > deadline:
                return "DeadlineExceeded", "Job was active longer than specified deadline"
        failed = [p for p in pods if p["status"].get("phase") == "Failed"]
        for p in failed:
            for i, rule in enumerate((spec.get("podFailurePolicy") or {}).get("rules") or []):
                if rule.get("onPodConditions"):
                    have = {c["type"] for c in p["status"].get("conditions", []) if c.get("status") == "True"}
                    hit = next((pc["type"] for pc in rule["onPodConditions"] if pc["type"] in have), None)
                    if hit and rule["action"] == "FailJob":
                        return "PodFailurePolicy", (f"Pod {p['metadata']['namespace']}/{p['metadata']['name']} has "
                                                    f"condition {hit} matching FailJob rule at index {i}")
                    if hit:
                        break
                codes = rule.get("onExitCodes")
                if codes:
                    for cs in p["status"].get("containerStatuses", []):
                        term = (cs.get("state") or {}).get("terminated")
                        if not term or (codes.get("containerName") and cs["name"] != codes["containerName"]):
                            continue
                        inside = term["exitCode"] in codes["values"]
                        if inside == (codes["operator"] == "In") and rule["action"] == "FailJob":
                            return "PodFailurePolicy", (
                                f"Container {cs['name']} for pod {p['metadata']['namespace']}/{p['metadata']['name']} "
                                f"failed with exit code {term['exitCode']} matching FailJob rule at index {i}")
        if len(failed) > spec.get("backoffLimit", 6):
            return "BackoffLimitExceeded", "Job has reached the specified backoff limit"
        return None

    def _create_pod(self, job: dict, index: int) -> None:
        tmpl = copy.deepcopy(job["spec"]["template"])
        name = job["metadata"]["name"]
        meta = tmpl.setdefault("metadata", {})
        meta["name"] = f"{name}-{index}-{rand_suffix()}"
        meta.setdefault("labels", {})[COMPLETION_INDEX] = str(index)
        meta.setdefault("annotations", {})[COMPLETION_INDEX] = str(index)
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                    "uid": job["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
        tmpl["spec"]["hostname"] = f"{name}-{index}"
        tmpl["status"] = {"phase": "Pending"}
        self.create("Pod", job["metadata"]["namespace"], tmpl)

    # scheduler + kubelet
    def _sync_pods(self) -> None:
        with self.lock:
            pods = [o for (k, _, _), o in self.objects.items() if k == "Pod"]
            for pod in pods:
                if ("Pod", pod["metadata"]["namespace"], pod["metadata"]["name"]) not in self.objects:
                    continue
                self._sync_pod(pod)

    def _sync_pod(self, pod: dict) -> None:
        meta, status = pod["metadata"], pod["status"]
        ns, name = meta["namespace"], meta["name"]
        c = self.containers.get(meta["uid"])
        if meta.get("deletionTimestamp"):
            if c and c.proc and c.proc.poll() is None:
                if not getattr(c, "term_sent", None):
                    c.term_sent = time.monotonic()
                    os.killpg(c.proc.pid, signal.SIGTERM)
                elif time.monotonic() - c.term_sent > self.grace_seconds:
                    os.killpg(c.proc.pid, signal.SIGKILL)
                return
            if c is None or c.done or c.proc is None:
                self._remove("Pod", ns, name)
            return
        if status.get("phase") in ("Succeeded", "Failed"):
            return
        if not pod["spec"].get("nodeName"):
            self._schedule(pod)
            return
        if c is None:
            self._start(pod)

    def _schedule(self, pod: dict) -> None:
        spec = pod["spec"]
        want = int(((spec["containers"][0].get("resources") or {}).get("requests") or {}).get(GPU, 0))
        selector = spec.get("nodeSelector") or {}
        terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
        anti = (((spec.get("affinity") or {}).get("podAntiAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or [])
        reasons: Counter = Counter()
        running = [o for (k, _, _), o in self.objects.items() if k == "Pod" and o["spec"].get("nodeName")
                   and o["status"].get("phase") in ("Pending", "Running")]
        for node in self.nodes:
            labels = node["labels"]
            if any(labels.get(k) != v for k, v in selector.items()) or (terms and not any(
                    all(_expr_match(labels, e) for e in t.get("matchExpressions", [])) for t in terms)):
                reasons["node(s) didn't match Pod's node affinity/selector"] += 1
                continue
            if any(p["spec"]["nodeName"] == node["name"] and labels_match(
                    p["metadata"].get("labels") or {},
                    [("eq", k, v) for k, v in a["labelSelector"].get("matchLabels", {}).items()]) for a in anti
                   for p in running):
                reasons["node(s) didn't match pod anti-affinity rules"] += 1
                continue
            used = sum(int(((p["spec"]["containers"][0].get("resources") or {}).get("requests") or {}).get(GPU, 0))
                       for p in running if p["spec"]["nodeName"] == node["name"])
            if want and node.get("gpus", 0) - used < want:
                reasons[f"Insufficient {GPU}"] += 1
                continue
            ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]

            def bind(p, node=node):
                p["spec"]["nodeName"] = node["name"]
                p["status"]["conditions"] = [c for c in p["status"].get("conditions", []) if c["type"] != "PodScheduled"]
                p["status"]["conditions"].append({"type": "PodScheduled", "status": "True",
                                                  "lastTransitionTime": rfc3339()})
                p["status"]["containerStatuses"] = [{"name": ct["name"], "ready": False, "restartCount": 0,
                                                     "image": ct["image"], "state": {"waiting": {"reason": "ContainerCreating"}}}
                                                    for ct in p["spec"]["containers"]]
            self.update("Pod", ns, name, bind)
            return
        message = f"0/{len(self.nodes)} nodes are available: " + ", ".join(
            f"{n} {r}" for r, n in sorted(reasons.items())) + "."
        sched = next((c for c in pod["status"].get("conditions", []) if c["type"] == "PodScheduled"), None)
        if sched is None or sched.get("message") != message:
            def unsched(p):
                p["status"]["conditions"] = [c for c in p["status"].get("conditions", []) if c["type"] != "PodScheduled"]
                p["status"]["conditions"].append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                                  "message": message, "lastTransitionTime": rfc3339()})
            self.update("Pod", pod["metadata"]["namespace"], pod["metadata"]["name"], unsched)
            self.record_event(pod, "Warning", "FailedScheduling", message)

    def _waiting(self, pod: dict, reason: str, message: str) -> None:
        def mark(p):
            for cs in p["status"].get("containerStatuses", []):
                cs["state"] = {"waiting": {"reason": reason, "message": message}}
        cur = (pod["status"].get("containerStatuses") or [{}])[0].get("state", {}).get("waiting", {})
        if cur.get("reason") != reason or cur.get("message") != message:
            self.update("Pod", pod["metadata"]["namespace"], pod["metadata"]["name"], mark)

    def _start(self, pod: dict) -> None:
        if self.faults.hold_pods:
            return
        ns, spec = pod["metadata"]["namespace"], pod["spec"]
        ct = spec["containers"][0]
        if ct["image"] in self.faults.bad_images:
            self._waiting(pod, "ErrImagePull", f'failed to pull and unpack image "{ct["image"]}": not found')
            return
        pod_dir = self.root / pod["metadata"]["uid"]
        paths: dict[str, str] = {}
        files: list[tuple[Path, bytes, int]] = []
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for m in ct.get("volumeMounts", []):
            vol = volumes[m["name"]]
            local = pod_dir / m["mountPath"].lstrip("/")
            if "configMap" in vol or "secret" in vol:
                src_kind, ref = ("ConfigMap", vol["configMap"]["name"]) if "configMap" in vol else (
                    "Secret", vol["secret"]["secretName"])
                src = self.objects.get((src_kind, ns, ref))
                if src is None:
                    self.record_event(pod, "Warning", "FailedMount",
                                      f'MountVolume.SetUp failed for volume "{m["name"]}" : '
                                      f'{src_kind.lower()} "{ref}" not found')
                    return
                data = {k: v.encode() for k, v in (src.get("data") or {}).items()} if src_kind == "ConfigMap" else {
                    k: base64.b64decode(v) for k, v in (src.get("data") or {}).items()}
                conf = vol.get("configMap") or vol.get("secret")
                items = conf.get("items") or [{"key": k, "path": k} for k in data]
                mode = conf.get("defaultMode", 0o644)
                for it in items:
                    if it["key"] not in data:
                        self.record_event(pod, "Warning", "FailedMount",
                                          f'MountVolume.SetUp failed for volume "{m["name"]}" : '
                                          f'configmap references non-existent config key: {it["key"]}')
                        return
                    files.append((local / it["path"], data[it["key"]], it.get("mode", mode)))
            paths[m["mountPath"]] = str(local)
        env: dict[str, str] = {}
        for e in ct.get("env", []):
            if "value" in e:
                env[e["name"]] = e["value"]
                continue
            src = e.get("valueFrom") or {}
            if "secretKeyRef" in src:
                ref = src["secretKeyRef"]
                secret = self.objects.get(("Secret", ns, ref["name"]))
                if secret is None:
                    self._waiting(pod, "CreateContainerConfigError", f'secret "{ref["name"]}" not found')
                    return
                if ref["key"] not in (secret.get("data") or {}):
                    self._waiting(pod, "CreateContainerConfigError",
                                  f"couldn't find key {ref['key']} in Secret {ns}/{ref['name']}")
                    return
                env[e["name"]] = base64.b64decode(secret["data"][ref["key"]]).decode()
            elif "fieldRef" in src:
                env[e["name"]] = _field(pod, src["fieldRef"]["fieldPath"])
        for path, content, mode in files:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
            path.chmod(mode)
        for mount in paths.values():
            Path(mount).mkdir(parents=True, exist_ok=True)
        # Mount paths inside env values point at the pod's directory here.
        for var, value in env.items():
            for mount in sorted(paths, key=len, reverse=True):
                value = value.replace(mount, paths[mount])
            env[var] = value
        # The network gap: no cluster DNS and one loopback for every pod, so rank 0 is 127.0.0.1
        # and each Job gets its own free port.
        env["MASTER_ADDR"] = "127.0.0.1"
        job_uid = (pod["metadata"].get("labels") or {}).get(CONTROLLER_UID, pod["metadata"]["uid"])
        if "MASTER_PORT" in env:
            env["MASTER_PORT"] = str(self.ports.setdefault(job_uid, _free_port()))
        workdir = pod_dir / "work"
        workdir.mkdir(parents=True, exist_ok=True)
        path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "/usr/bin:/bin")])
        base = {"PATH": path, "HOME": str(workdir), "LANG": "C.UTF-8",
                "HOSTNAME": spec.get("hostname") or pod["metadata"]["name"], "LAUNCHER_GRACE_SECONDS": "2"}
        argv = list(ct.get("command") or []) + list(ct.get("args") or [])
        if argv and argv[0] in ("python", "python3"):
            argv[0] = sys.executable
        c = Container()
        self.containers[pod["metadata"]["uid"]] = c
        try:
            c.proc = subprocess.Popen(argv, cwd=workdir, env={**base, **env}, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as e:
            c.done = True
            self._waiting(pod, "RunContainerError", str(e))
            return
        c.started_ns = now_ns()
        started = rfc3339(c.started_ns)

        def running(p):
            p["status"]["phase"] = "Running"
            p["status"]["podIP"] = f"10.0.0.{random.randint(2, 250)}"
            p["status"]["startTime"] = started
            p["status"]["containerStatuses"] = [{"name": ct["name"], "ready": True, "restartCount": 0,
                                                 "image": ct["image"], "started": True,
                                                 "state": {"running": {"startedAt": started}}}]
        self.update("Pod", ns, pod["metadata"]["name"], running)
        threading.Thread(target=self._pump, args=(pod, c), daemon=True).start()

    def _pump(self, pod: dict, c: Container) -> None:
        res = self.log_resolution_ns
        for raw in iter(c.proc.stdout.readline, b""):
            text = raw.decode("utf-8", errors="replace").rstrip("\n")
            with self.lock:
                c.lines.append((now_ns() // res * res, text))
                self.changed.notify_all()
        code = c.proc.wait()
        code = code if code >= 0 else 128 - code
        with self.lock:
            c.done = True
            ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
            if ("Pod", ns, name) not in self.objects:
                return
            finished = rfc3339()
            started = rfc3339(c.started_ns)

            def terminated(p):
                p["status"]["phase"] = "Succeeded" if code == 0 else "Failed"
                for cs in p["status"]["containerStatuses"]:
                    cs.update(ready=False, started=False, state={"terminated": {
                        "exitCode": code, "reason": "Completed" if code == 0 else "Error",
                        "startedAt": started, "finishedAt": finished}})
            self.update("Pod", ns, name, terminated)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _expr_match(labels: dict[str, str], e: dict) -> bool:
    op, have = e["operator"], labels.get(e["key"])
    if op == "In":
        return have in e.get("values", [])
    if op == "NotIn":
        return have not in e.get("values", [])
    if op == "Exists":
        return e["key"] in labels
    if op == "DoesNotExist":
        return e["key"] not in labels
    return False


def _field(pod: dict, path: str) -> str:
    m = re.match(r"metadata\.(annotations|labels)\['([^']+)'\]", path)
    if m:
        return (pod["metadata"].get(m.group(1)) or {}).get(m.group(2), "")
    return {"metadata.name": pod["metadata"]["name"], "metadata.namespace": pod["metadata"]["namespace"],
            "spec.nodeName": pod["spec"].get("nodeName", ""), "status.podIP": pod["status"].get("podIP", ""),
            "metadata.uid": pod["metadata"]["uid"]}.get(path, "")


# --- HTTP ----------------------------------------------------------------------------------------
_PATH = re.compile(r"^/(?:api/v1|apis/batch/v1)/namespaces/([^/]+)/([a-z]+)(?:/([^/]+))?(?:/([a-z]+))?$")


class _Handler(BaseHTTPRequestHandler):
    kube: FakeKube
    protocol_version = "HTTP/1.1"
    # One write per response and no Nagle delay: otherwise each request waits ~40 ms for an ACK.
    wbufsize = 1 << 16
    disable_nagle_algorithm = True

    def log_message(self, *args: Any) -> None:  # quiet
        return

    # plumbing
    def _send_json(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _start_stream(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n)) if n else None

    def _dispatch(self, method: str) -> None:
        k = self.kube
        url = urlparse(self.path)
        q = {key: vals[-1] for key, vals in parse_qs(url.query).items()}
        m = _PATH.match(url.path)
        if not m or m.group(2) not in PLURALS:
            body = self._body() if method in ("POST", "PUT", "PATCH") else None
            del body
            return self._send_json(404, status_body(404, "NotFound", f"the server could not find {url.path}"))
        ns, plural, name, sub = m.groups()
        kind = PLURALS[plural]
        watch = q.get("watch") in ("true", "1")
        verb = {"GET": "watch" if watch else ("get" if name else "list"), "POST": "create", "PUT": "update",
                "PATCH": "patch", "DELETE": "delete" if name else "deletecollection"}[method]
        if sub == "log":
            verb = "log"
        with k.lock:
            k.requests.append((method, kind, verb))
            fail = k.faults.api_errors > 0 and verb not in ("watch", "log")
            if fail:
                k.faults.api_errors -= 1
        body = self._body() if method in ("POST", "PUT", "PATCH", "DELETE") else None
        if fail:
            return self._send_json(503, status_body(503, "ServiceUnavailable", "the server is currently unable to handle the request"))
        try:
            if verb == "log":
                return self._log(ns, name, q)
            if verb == "watch":
                return self._watch(kind, ns, q)
            if verb == "get":
                return self._send_json(200, k.get(kind, ns, name))
            if verb == "list":
                items, rv = k.list(kind, ns, q.get("labelSelector"), q.get("fieldSelector"))
                return self._send_json(200, {"kind": f"{kind}List", "apiVersion": API_VERSIONS.get(kind, "v1"),
                                             "metadata": {"resourceVersion": rv}, "items": items})
            if verb == "create":
                return self._send_json(201, k.create(kind, ns, body))
            if verb == "update":
                return self._send_json(200, k.replace(kind, ns, name, body))
            if verb == "patch":
                ctype = self.headers.get("Content-Type", "")
                if "json-patch" in ctype:
                    raise ApiError(415, "UnsupportedMediaType", "json-patch is not supported by the fake")
                return self._send_json(200, k.patch(kind, ns, name, body))
            if verb == "delete":
                opts = dict(body or {})
                if q.get("propagationPolicy"):
                    opts["propagationPolicy"] = q["propagationPolicy"]
                return self._send_json(200, k.delete(kind, ns, name, opts))
            if verb == "deletecollection":
                items, _ = k.list(kind, ns, q.get("labelSelector"), q.get("fieldSelector"))
                for it in items:
                    try:
                        k.delete(kind, ns, it["metadata"]["name"], body or {})
                    except ApiError:
                        pass
                return self._send_json(200, {"kind": f"{kind}List", "apiVersion": "v1", "metadata": {}, "items": items})
        except ApiError as e:
            return self._send_json(e.code, status_body(e.code, e.reason, e.message))

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    # watch: history after resourceVersion, then live events, as chunked JSON lines
    def _watch(self, kind: str, ns: str, q: dict[str, str]) -> None:
        k = self.kube
        reqs = parse_label_selector(q.get("labelSelector"))
        fields = q.get("fieldSelector")
        timeout = float(q.get("timeoutSeconds") or 1800)
        deadline = time.monotonic() + timeout
        rv_text = q.get("resourceVersion") or "0"
        self._start_stream("application/json")
        with k.lock:
            gone = k.faults.gone_watches > 0
            if gone:
                k.faults.gone_watches -= 1
            start = int(rv_text)
            if gone or (start and start < k.min_rv):
                err = status_body(410, "Expired", f"too old resource version: {start} ({k.rv})")
                self._chunk((json.dumps({"type": "ERROR", "object": err}) + "\n").encode())
                self._end_stream()
                return
            pending: list[tuple[str, dict]] = []
            if start == 0:
                start = k.rv
                pending = [("ADDED", copy.deepcopy(o)) for (kk, n, _), o in sorted(k.objects.items())
                           if kk == kind and n == ns and labels_match(o["metadata"].get("labels") or {}, reqs)]
        try:
            for type_, obj in pending:
                self._chunk((json.dumps({"type": type_, "object": obj}) + "\n").encode())
            pos = start
            while not k._stop.is_set():
                with k.lock:
                    out = [(t, o) for (rv, kk, n, t, o) in k.history
                           if rv > pos and kk == kind and n == ns
                           and labels_match(o["metadata"].get("labels") or {}, reqs) and fields_match(o, fields)]
                    pos = k.rv
                    if not out:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            break
                        k.changed.wait(min(left, 0.5))
                        continue
                for type_, obj in out:
                    self._chunk((json.dumps({"type": type_, "object": obj}) + "\n").encode())
            self._end_stream()
        except (BrokenPipeError, ConnectionResetError):
            return

    # pods/log
    def _log(self, ns: str, name: str, q: dict[str, str]) -> None:
        k = self.kube
        with k.lock:
            pod = k.objects.get(("Pod", ns, name))
            if pod is None:
                return self._send_json(404, status_body(404, "NotFound", f'pods "{name}" not found'))
            c = k.containers.get(pod["metadata"]["uid"])
            if q.get("previous") in ("true", "1"):
                return self._send_json(400, status_body(400, "BadRequest",
                                       f'previous terminated container "main" in pod "{name}" not found'))
            if c is None or c.proc is None:
                waiting = ((pod["status"].get("containerStatuses") or [{}])[0].get("state") or {}).get("waiting") or {}
                return self._send_json(400, status_body(400, "BadRequest",
                                       f'container "main" in pod "{name}" is waiting to start: '
                                       f'{waiting.get("reason", "ContainerCreating")}'))
            follow = q.get("follow") in ("true", "1")
            stamps = q.get("timestamps") in ("true", "1")
            since = int(q["sinceSeconds"]) if q.get("sinceSeconds") else None
            tail = int(q["tailLines"]) if q.get("tailLines") else None
            drop_after = None
            if (follow or k.faults.drop_finished_reads) and k.faults.drop_logs_after is not None \
                    and k.faults.drop_logs_count > 0:
                drop_after = k.faults.drop_logs_after
                k.faults.drop_logs_count -= 1
            lines = list(c.lines)
            pos = len(lines)
        floor = now_ns() - since * 1_000_000_000 if since is not None else None
        if floor is not None:
            lines = [ln for ln in lines if ln[0] >= floor]
        if tail is not None:
            lines = lines[-tail:] if tail else []
        self._start_stream("text/plain")
        sent = 0
        try:
            batch = lines
            while True:
                for stamp, text in batch:
                    if drop_after is not None and sent >= drop_after:
                        # Close mid-stream without the final chunk: a dropped connection.
                        self.wfile.flush()
                        self.close_connection = True
                        self.connection.shutdown(2)
                        return
                    prefix = f"{rfc3339(stamp, nano=True)} " if stamps else ""
                    self._chunk(f"{prefix}{text}\n".encode())
                    sent += 1
                if not follow:
                    break
                with k.lock:
                    while len(c.lines) <= pos and not c.done and not k._stop.is_set() and \
                            ("Pod", ns, name) in k.objects:
                        k.changed.wait(0.5)
                    batch = c.lines[pos:]
                    pos = len(c.lines)
                    if not batch and (c.done or ("Pod", ns, name) not in k.objects or k._stop.is_set()):
                        break
            self._end_stream()
        except (BrokenPipeError, ConnectionResetError, OSError):
            return


# --- pytest fixtures ---------------------------------------------------------------------------
def write_profile(home: Path, kube: FakeKube, *, name: str = "fake", **settings: Any) -> None:
    """Write $LAUNCHER_HOME/config.yaml with a Kubernetes profile that points at the fake."""
    import yaml

    kubeconfig = kube.write_kubeconfig(home / "kubeconfig")
    path = home / "config.yaml"
    config = yaml.safe_load(path.read_text()) if path.exists() else {}
    config = config or {}
    config.setdefault("current", "local")
    config.setdefault("clusters", {})[name] = {
        "backend": "kubernetes", "kubeconfig": str(kubeconfig), "context": "fake", "namespace": "default",
        "image": "ghcr.io/example/launcher:test", **settings}
    path.write_text(yaml.safe_dump(config, sort_keys=False))


@pytest.fixture
def fake_kube(launcher_home: Path):
    """A running fake API server with its control plane, and a `fake` cluster profile in
    the test's LAUNCHER_HOME. Yields the FakeKube (faults, requests, pods, evict)."""
    kube = FakeKube().start()
    write_profile(launcher_home, kube)
    try:
        yield kube
    finally:
        kube.close()


@pytest.fixture
def fake_kube_factory(launcher_home: Path):
    """Like fake_kube, with options: fake_kube_factory(nodes=[...], run_controllers=False, profile={...})."""
    made: list[FakeKube] = []

    def make(*, profile: dict | None = None, **options: Any) -> FakeKube:
        kube = FakeKube(**options).start()
        made.append(kube)
        write_profile(launcher_home, kube, **(profile or {}))
        return kube

    try:
        yield make
    finally:
        for kube in made:
            kube.close()

