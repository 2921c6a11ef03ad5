"""The Kubernetes backend: a run is a ConfigMap, a headless Service and an Indexed Job.

Objects and attempts
--------------------
The ConfigMap <run> is the run's durable record: the submitted spec, the
parameters, and annotations listing the secrets it uses (names, kinds, options;
never values), the attempts that already ended, and a final status when the
launcher itself ended the run (stop, or a container that can never start).

The Job <run> is the current attempt. Its pods are named by the Job controller,
with hostnames <run>-<rank> under the Service <run>, so MASTER_ADDR
<run>-0.<run> holds in every attempt. The Service and the ConfigMap carry an
owner reference to the current Job, so `kubectl delete job <run>` cleans up.

A failed attempt is retried by restarting the whole group (a static rendezvous
cannot take one replacement rank): whoever observes the failure first (`get`,
`list`, `watch`, `logs`; any launcher process) records the attempt in the
ConfigMap, deletes the Job with propagationPolicy Orphan (its pods, and so
their logs, stay: `logs --attempt N` reads them), creates the Job again for
attempt N+1, and points the owner references at it. Each step is guarded
(resourceVersion, uid preconditions), so two observers never restart twice.
The objects per attempt stay constant: one Job, whatever the number of nodes.

stop writes STOPPED into the record, detaches the ConfigMap from the Job and
deletes the Job in the background (its pods and the Service go with it).
delete removes the Job, the ConfigMap, the Service and every attempt's pods.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from kubernetes.client.exceptions import ApiException

from launcher.backends.base import Backend, LogLine, Run, RunStatus, utcnow
from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.informer import Informer
from launcher.backends.kubernetes.kubeapi import KubeApi, status_of
from launcher.backends.kubernetes.logs import ns_to_datetime, read_pod
from launcher.backends.kubernetes.profiles import ClusterProfile, load_profile
from launcher.backends.kubernetes.render import (
    owner_reference,
    render_job,
    render_run,
    secrets_from_refs,
)
from launcher.backends.kubernetes.status import (
    Action,
    Observed,
    annotations,
    attempt_of,
    derive,
    pod_rank,
    record_json,
    spec_of,
    summary_of,
)
from launcher.errors import InputError, LauncherError, NotFoundError
from launcher.secrets.mask import Masker

if TYPE_CHECKING:
    from launcher.config import Profile
    from launcher.secrets.kinds import Secret
    from launcher.spec.models import RunSpec

# Pending pods, and pods being created, need their Warning events to explain themselves.
EVENTS_FOR = ("QUEUED", "STARTING", "PENDING")
RESTART_WAIT_SECONDS = 30.0


class KubernetesBackend(Backend):
    name = "kubernetes"

    def __init__(self, profile: Profile | ClusterProfile, home: Path | None = None):
        self.profile = profile if isinstance(profile, ClusterProfile) else load_profile(profile)
        self.home = home
        self._api: KubeApi | None = None

    @property
    def api(self) -> KubeApi:
        if self._api is None:
            self._api = KubeApi(self.profile)
        return self._api

    def close(self) -> None:
        if self._api is not None:
            self._api.close()
            self._api = None

    # --- submit -----------------------------------------------------------------------------
    def submit(self, spec: RunSpec, secrets: list[Secret]) -> Run:
        configmap, service, job = render_run(spec, self.profile, secrets)
        try:
            created = self.api.create("Job", job)
        except ApiException as e:
            if status_of(e) == 409:
                raise InputError(f"a run named {spec.name!r} already exists in {self.profile.where}") from None
            raise LauncherError(f"cluster {self.profile.name} refused the Job: {_message(e)}") from None
        owner = [owner_reference(created)]
        configmap["metadata"]["ownerReferences"] = owner
        service["metadata"]["ownerReferences"] = owner
        try:
            record = self.api.create("ConfigMap", configmap)
            self.api.create("Service", service)
        except ApiException as e:
            self.api.delete("Job", spec.name, propagation="Background")
            raise LauncherError(f"cluster {self.profile.name} refused the run's objects: {_message(e)}") from None
        run, _ = derive(Observed(spec.name, record=record, job=created, cluster=self.profile.name))
        return run

    # --- observe ----------------------------------------------------------------------------
    def _events(self, pods: list[dict]) -> list[dict]:
        """Warning events of these pods: one list call for the namespace, filtered here."""
        names = {p["metadata"]["name"] for p in pods}
        if not names:
            return []
        items, _ = self.api.list("Event", fields="type=Warning,involvedObject.kind=Pod")
        return [e for e in items if (e.get("involvedObject") or {}).get("name") in names]

    def _needs_events(self, job: dict | None, pods: list[dict]) -> list[dict]:
        current = attempt_of(job) if job else None
        waiting = []
        for p in pods:
            if attempt_of(p) != current:
                continue
            phase = (p.get("status") or {}).get("phase", "Pending")
            if phase == "Pending":
                waiting.append(p)
        return waiting

    def _observe(self, name: str) -> Observed:
        record = self.api.get("ConfigMap", name)
        job = self.api.get("Job", name)
        if record is None and job is None:
            raise NotFoundError(f"no run named {name!r} in {self.profile.where}",
                                hint="list runs with `launcher get runs`")
        pods, _ = self.api.list("Pod", labels=keys.run_selector(name))
        waiting = self._needs_events(job, pods)
        events = self._events(waiting) if waiting else []
        return Observed(name, record=record, job=job, pods=pods, events=events, cluster=self.profile.name)

    def _settle(self, obs: Observed, *, act: bool = True) -> Run:
        run, action = derive(obs)
        if action is None or not act:
            return run
        self._act(obs, action)
        run, _ = derive(self._observe(obs.name))
        return run

    def get(self, name: str) -> Run:
        return self._settle(self._observe(name))

    def list(self) -> list[Run]:
        sel = keys.MANAGED_SELECTOR
        records, _ = self.api.list("ConfigMap", labels=sel)
        jobs, _ = self.api.list("Job", labels=sel)
        pods, _ = self.api.list("Pod", labels=sel)
        by_run: dict[str, Observed] = {}
        for cm in records:
            name = cm["metadata"].get("labels", {}).get(keys.RUN)
            if name:
                by_run[name] = Observed(name, record=cm, cluster=self.profile.name)
        for job in jobs:
            name = job["metadata"].get("labels", {}).get(keys.RUN)
            if name:
                by_run.setdefault(name, Observed(name, cluster=self.profile.name)).job = job
        for pod in pods:
            name = pod["metadata"].get("labels", {}).get(keys.RUN)
            if name in by_run:
                by_run[name].pods.append(pod)
        waiting = [p for o in by_run.values() for p in self._needs_events(o.job, o.pods)]
        if waiting:
            events = self._events(waiting)
            for o in by_run.values():
                o.events = events
        runs = [self._settle(o) for o in by_run.values()]
        return sorted(runs, key=lambda r: r.created_at.timestamp() if r.created_at else 0, reverse=True)

    # --- reconcile: retries and fatal failures ---------------------------------------------------
    def _act(self, obs: Observed, action: Action) -> None:
        try:
            if action.kind == "fail":
                self._finish(obs, "FAILED", action.reason, action.summary)
            elif action.kind == "retry":
                self._restart(obs, action)
            elif action.kind == "resume":
                self._resume(obs.name, action.next_attempt)
        except ApiException as e:
            if status_of(e) in (404, 409):
                return  # another observer got there first; the next look sees its result
            raise

    def _finish(self, obs: Observed, status: str, reason: str | None, summary: dict | None,
                exit_code: int | None = None) -> None:
        """End the run by the launcher's hand: record it, keep the record, delete the Job."""
        if obs.record is not None:
            attempts = record_json(obs.record, keys.RECORD_ATTEMPTS, [])
            if summary and all(a["index"] != summary["index"] for a in attempts):
                attempts.append(summary)
            final = {"status": status, "reason": reason, "at": utcnow().isoformat(), "exit_code": exit_code}
            self.api.patch("ConfigMap", obs.name, {"metadata": {
                "resourceVersion": obs.record["metadata"]["resourceVersion"],
                "ownerReferences": None,  # the record outlives the Job
                "annotations": {keys.RECORD_ATTEMPTS: json.dumps(attempts), keys.RECORD_FINAL: json.dumps(final)},
            }})
        if obs.job is not None:
            self.api.delete("Job", obs.name, propagation="Background", uid=obs.job["metadata"]["uid"])

    def _restart(self, obs: Observed, action: Action) -> None:
        attempts = record_json(obs.record, keys.RECORD_ATTEMPTS, [])
        attempts.append(action.summary)
        # The resourceVersion makes this a compare-and-swap: one observer wins the restart.
        self.api.patch("ConfigMap", obs.name, {"metadata": {
            "resourceVersion": obs.record["metadata"]["resourceVersion"],
            "annotations": {keys.RECORD_ATTEMPTS: json.dumps(attempts),
                            keys.RECORD_RESTART: str(action.next_attempt)},
        }})
        # Orphan: the failed attempt's pods (and logs) stay; the Service and ConfigMap lose their owner.
        self.api.delete("Job", obs.name, propagation="Orphan", uid=obs.job["metadata"]["uid"])
        self._resume(obs.name, action.next_attempt)

    def _resume(self, name: str, attempt: int) -> None:
        record = self.api.get("ConfigMap", name)
        if record is None or annotations(record).get(keys.RECORD_RESTART) != str(attempt):
            return
        job = self.api.get("Job", name)
        deadline = time.monotonic() + RESTART_WAIT_SECONDS
        while job is not None and attempt_of(job) < attempt:
            if not job["metadata"].get("deletionTimestamp"):
                self.api.delete("Job", name, propagation="Orphan", uid=job["metadata"]["uid"])
            if time.monotonic() > deadline:
                return  # still being deleted; the next observer carries on
            time.sleep(0.2)
            job = self.api.get("Job", name)
        if job is None:
            job = self._create_attempt(record, attempt)
            if job is None:
                return
        refs = [owner_reference(job)]
        if self.api.get("Service", name) is not None:
            self.api.patch("Service", name, {"metadata": {"ownerReferences": refs}})
        for _ in range(3):
            # The garbage collector edits the ConfigMap too (it strips the old owner): re-read.
            record = self.api.get("ConfigMap", name)
            if record is None or annotations(record).get(keys.RECORD_RESTART) != str(attempt):
                return
            try:
                self.api.patch("ConfigMap", name, {"metadata": {
                    "resourceVersion": record["metadata"]["resourceVersion"],
                    "ownerReferences": refs,
                    "annotations": {keys.RECORD_RESTART: None},
                }})
                return
            except ApiException as e:
                if status_of(e) != 409:
                    raise

    def _create_attempt(self, record: dict, attempt: int) -> dict | None:
        from launcher.backends.kubernetes.profiles import resolve_placement
        from launcher.spec.models import RunSpec

        spec = RunSpec.model_validate(spec_of(record))
        secrets = secrets_from_refs(record_json(record, keys.RECORD_SECRETS, []))
        job = render_job(spec, self.profile, secrets, resolve_placement(spec, self.profile), attempt=attempt)
        try:
            return self.api.create("Job", job)
        except ApiException as e:
            if status_of(e) == 409:
                existing = self.api.get("Job", spec.name)
                return existing if existing and attempt_of(existing) == attempt else None
            raise

    # --- watch -------------------------------------------------------------------------------------
    def watch(self, name: str, *, poll_seconds: float = 0.5) -> Iterator[Run]:
        changed = threading.Event()
        sel = keys.run_selector(name)
        informers = {kind: Informer(self.api, kind, sel, changed.set).start() for kind in ("ConfigMap", "Job", "Pod")}
        try:
            for inf in informers.values():
                if not inf.synced.wait(30):
                    raise LauncherError(f"cluster {self.profile.name}: cannot list the run's objects: {inf.error}")
            last: tuple | None = None
            seen = False
            events: list[dict] = []
            events_at = 0.0
            while True:
                changed.clear()
                obs = Observed(name, record=informers["ConfigMap"].get(name), job=informers["Job"].get(name),
                               pods=informers["Pod"].snapshot(), cluster=self.profile.name)
                if obs.record is None and obs.job is None:
                    if not seen:
                        obs = self._observe(name)  # raises NotFoundError, or the informers lagged
                    else:
                        return  # deleted while watched
                seen = True
                waiting = self._needs_events(obs.job, obs.pods)
                if waiting and time.monotonic() - events_at > 2.0:
                    events, events_at = self._events(waiting), time.monotonic()
                obs.events = events if waiting else []
                run, action = derive(obs)
                if action is not None:
                    self._act(obs, action)
                    changed.wait(poll_seconds)
                    continue
                key = (run.status, run.current_attempt, run.reason)
                if key != last:
                    last = key
                    yield run
                if run.status.is_terminal:
                    return
                # Wake on a change; look again now and then for events and time-based states.
                changed.wait(2.0 if waiting else 30.0)
                time.sleep(poll_seconds)
        finally:
            for inf in informers.values():
                inf.stop()

    # --- logs --------------------------------------------------------------------------------------
    def _masker(self, record: dict | None) -> Masker:
        names = {r["name"] for r in record_json(record, keys.RECORD_SECRETS, [])}
        if not names:
            return Masker([])
        from launcher.backends.kubernetes.secrets import KubernetesSecretStore

        try:
            secrets = [s for s in KubernetesSecretStore(self.profile, api=self.api).list() if s.name in names]
        except (LauncherError, ApiException):
            return Masker([])  # not allowed to read them: the entrypoint masked at the source
        return Masker(v for s in secrets for v in s.masked_values())

    def logs(self, name: str, *, rank: int | None = None, attempt: int | None = None, tail: int | None = None,
             follow: bool = False, previous: bool = False) -> Iterator[LogLine]:
        obs = self._observe(name)
        run = self._settle(obs)
        index = attempt or run.current_attempt
        # The next attempt may be starting (a retry): its pods are followed as they appear.
        if index < 1 or index > run.current_attempt + 1 or (index > run.current_attempt and not follow):
            raise NotFoundError(f"run {name!r} has no attempt {index} (it has {run.current_attempt})")
        masker = self._masker(obs.record)

        def to_line(r: int, stamp: int | None, text: str) -> LogLine:
            return LogLine(rank=r, text=masker.mask(text), attempt=index,
                           timestamp=ns_to_datetime(stamp) if stamp is not None else None)

        if not follow:
            pods, _ = self.api.list("Pod", labels=f"{keys.run_selector(name)},{keys.ATTEMPT}={index}")
            lines: list[tuple[int, int, int, str]] = []
            for pod in sorted(pods, key=pod_rank):
                r = pod_rank(pod)
                if rank is not None and r != rank:
                    continue
                for n, (stamp, text) in enumerate(read_pod(self.api, pod["metadata"]["name"], follow=False,
                                                          tail=tail, previous=previous)):
                    lines.append((stamp or 0, r, n, text))
            lines.sort()  # every rank's lines, interleaved by time
            for stamp, r, _, text in lines:
                yield to_line(r, stamp or None, text)
            return
        yield from self._follow(name, index, rank, tail, previous, to_line)

    def _follow(self, name: str, index: int, rank: int | None, tail: int | None, previous: bool, to_line) -> Iterator[LogLine]:
        """Attach each rank's pod as it starts; end when the attempt has ended and every reader is done."""
        out: queue.Queue = queue.Queue()
        stop = threading.Event()
        changed = threading.Event()
        sel = f"{keys.run_selector(name)},{keys.ATTEMPT}={index}"
        pods_inf = Informer(self.api, "Pod", sel, changed.set).start()
        job_inf = Informer(self.api, "Job", keys.run_selector(name), changed.set).start()
        readers: dict[str, threading.Thread] = {}
        done_pods: set[str] = set()

        def pod_done(pod_name: str) -> bool:
            pod = pods_inf.get(pod_name)
            return pod is None or _container_finished(pod)

        def reader(pod_name: str, r: int) -> None:
            try:
                for stamp, text in read_pod(self.api, pod_name, follow=True, tail=tail, previous=previous,
                                            is_done=lambda: pod_done(pod_name), stop=stop):
                    out.put(to_line(r, stamp, text))
            except Exception as e:  # noqa: BLE001 - surfaced to the consumer
                out.put(e)
            finally:
                out.put(("done", pod_name))
                changed.set()

        try:
            pods_inf.synced.wait(30)
            job_inf.synced.wait(30)
            while True:
                for pod in pods_inf.snapshot():
                    pname = pod["metadata"]["name"]
                    r = pod_rank(pod)
                    if pname in readers or (rank is not None and r != rank):
                        continue
                    if _container_started(pod):
                        t = threading.Thread(target=reader, args=(pname, r), daemon=True)
                        readers[pname] = t
                        t.start()
                # Drain what the readers produced.
                while True:
                    try:
                        item = out.get(timeout=0.2)
                    except queue.Empty:
                        break
                    if isinstance(item, Exception):
                        raise item
                    if isinstance(item, tuple):
                        done_pods.add(item[1])
                        continue
                    yield item
                if len(done_pods) == len(readers) and self._attempt_over(name, index, job_inf, pods_inf, rank):
                    return
                changed.wait(0.3)
                changed.clear()
        finally:
            stop.set()
            pods_inf.stop()
            job_inf.stop()

    def _attempt_over(self, name: str, index: int, job_inf: Informer, pods_inf: Informer, rank: int | None) -> bool:
        job = job_inf.get(name)
        if job is None or attempt_of(job) != index:
            return True  # stopped, deleted or superseded by a retry
        conds = {c["type"]: c.get("status") for c in (job.get("status") or {}).get("conditions") or []}
        if conds.get("Complete") == "True" or conds.get("Failed") == "True":
            return True
        pods = [p for p in pods_inf.snapshot() if rank is None or pod_rank(p) == rank]
        nodes = int((job.get("spec") or {}).get("completions") or 1)
        expected = 1 if rank is not None else nodes
        if len(pods) >= expected and all(_container_finished(p) for p in pods):
            return True
        # A container that can never start ends the attempt too (the run is FAILED fast).
        run, _ = derive(Observed(name, job=job, pods=pods_inf.snapshot()))
        return run.status.is_terminal

    # --- stop / delete -----------------------------------------------------------------------------
    def stop(self, name: str) -> Run:
        obs = self._observe(name)
        run, _ = derive(obs)
        if run.status.is_terminal:
            return run
        summary = None
        if run.attempts and obs.job is not None and run.attempts[-1].index == attempt_of(obs.job):
            live = run.attempts[-1]
            live.status, live.reason, live.ended_at = RunStatus.STOPPED, "stopped by the user", utcnow()
            for r in live.ranks:
                if not r.status.is_terminal:
                    r.status = RunStatus.STOPPED
            summary = summary_of(live, "stopped", [])
        for _ in range(3):
            try:
                self._finish(obs, "STOPPED", "stopped by the user", summary)
                break
            except ApiException as e:
                if status_of(e) != 409:
                    raise
                obs = self._observe(name)  # the record changed under us (a retry): look again
        return self._settle(self._observe(name), act=False)

    def delete(self, name: str) -> None:
        found = self.api.delete("Job", name, propagation="Background")
        found = self.api.delete("ConfigMap", name) or found
        found = self.api.delete("Service", name) or found
        pods, _ = self.api.list("Pod", labels=keys.run_selector(name))
        if pods:
            self.api.delete_collection("Pod", keys.run_selector(name))
        if not (found or pods):
            raise NotFoundError(f"no run named {name!r} in {self.profile.where}")


def _container_started(pod: dict) -> bool:
    for c in (pod.get("status") or {}).get("containerStatuses") or []:
        state = c.get("state") or {}
        if state.get("running") or state.get("terminated"):
            return True
    return (pod.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed")


def _container_finished(pod: dict) -> bool:
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return True
    return any((c.get("state") or {}).get("terminated") for c in (pod.get("status") or {}).get("containerStatuses") or [])


def _message(e: ApiException) -> str:
    from launcher.backends.kubernetes.kubeapi import message_of

    return message_of(e)

