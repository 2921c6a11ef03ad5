"""Reconcile: act on what an observation calls for (status.derive's Action).

A failed attempt is retried by restarting the whole group (a static rendezvous
cannot take one replacement rank): whoever observes the failure first (`get`,
`list`, `watch`, `logs`; any launcher process) records the attempt in the
ConfigMap, deletes the Job with propagationPolicy Orphan (its pods, and so their
logs, stay: `logs --attempt N` reads them), creates the Job again for attempt N+1,
and points the owner references at it. Each step is guarded (resourceVersion, uid
preconditions), so two observers never restart twice.

A run that can never start (a missing secret, an image that cannot be pulled) is
ended FAILED by the launcher: the record keeps why, the Job goes.
"""

from __future__ import annotations

import json
import time

from kubernetes.client.exceptions import ApiException

from launcher.backends.base import Run, utcnow
from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.kubeapi import KubeApi, status_of
from launcher.backends.kubernetes.observe import observe
from launcher.backends.kubernetes.render import owner_reference, render_job, secrets_from_refs
from launcher.backends.kubernetes.status import (
    Action,
    Observed,
    annotations,
    attempt_of,
    derive,
    record_json,
    spec_of,
)

RESTART_WAIT_SECONDS = 30.0


def settle(api: KubeApi, obs: Observed, *, act: bool = True) -> Run:
    """The run as observed, after doing what the observation calls for (when `act`)."""
    run, action = derive(obs)
    if action is None or not act:
        return run
    apply(api, obs, action)
    run, _ = derive(observe(api, obs.name))
    return run


def apply(api: KubeApi, obs: Observed, action: Action) -> None:
    try:
        if action.kind == "fail":
            finish(api, obs, "FAILED", action.reason, action.summary)
        elif action.kind == "retry":
            restart(api, obs, action)
        elif action.kind == "resume":
            resume(api, obs.name, action.next_attempt)
    except ApiException as e:
        if status_of(e) in (404, 409):
            return  # another observer got there first; the next look sees its result
        raise


def finish(api: KubeApi, obs: Observed, status: str, reason: str | None, summary: dict | None,
           exit_code: int | None = None) -> None:
    """End the run by the launcher's hand: record it, keep the record, delete the JobSet or Job."""
    if obs.record is not None:
        attempts = record_json(obs.record, keys.RECORD_ATTEMPTS, [])
        if summary and all(a["index"] != summary["index"] for a in attempts):
            attempts.append(summary)
        final = {"status": status, "reason": reason, "at": utcnow().isoformat(), "exit_code": exit_code}
        api.patch("ConfigMap", obs.name, {"metadata": {
            "resourceVersion": obs.record["metadata"]["resourceVersion"],
            "ownerReferences": None,  # the record outlives the Job
            "annotations": {keys.RECORD_ATTEMPTS: json.dumps(attempts), keys.RECORD_FINAL: json.dumps(final)},
        }})
    if obs.jobset is not None:
        # Foreground, as the JobSet controller deletes its Jobs: nothing of the run keeps running.
        api.delete("JobSet", obs.name, propagation="Foreground", uid=obs.jobset["metadata"]["uid"])
    if obs.job is not None:
        api.delete("Job", obs.name, propagation="Background", uid=obs.job["metadata"]["uid"])


def restart(api: KubeApi, obs: Observed, action: Action) -> None:
    attempts = record_json(obs.record, keys.RECORD_ATTEMPTS, [])
    attempts.append(action.summary)
    # The resourceVersion makes this a compare-and-swap: one observer wins the restart.
    api.patch("ConfigMap", obs.name, {"metadata": {
        "resourceVersion": obs.record["metadata"]["resourceVersion"],
        "annotations": {keys.RECORD_ATTEMPTS: json.dumps(attempts),
                        keys.RECORD_RESTART: str(action.next_attempt)},
    }})
    # Orphan: the failed attempt's pods (and logs) stay; the Service and ConfigMap lose their owner.
    api.delete("Job", obs.name, propagation="Orphan", uid=obs.job["metadata"]["uid"])
    resume(api, obs.name, action.next_attempt)


def resume(api: KubeApi, name: str, attempt: int) -> None:
    record = api.get("ConfigMap", name)
    if record is None or annotations(record).get(keys.RECORD_RESTART) != str(attempt):
        return
    job = api.get("Job", name)
    deadline = time.monotonic() + RESTART_WAIT_SECONDS
    while job is not None and attempt_of(job) < attempt:
        if not job["metadata"].get("deletionTimestamp"):
            api.delete("Job", name, propagation="Orphan", uid=job["metadata"]["uid"])
        if time.monotonic() > deadline:
            return  # still being deleted; the next observer carries on
        time.sleep(0.2)
        job = api.get("Job", name)
    if job is None:
        job = create_attempt(api, record, attempt)
        if job is None:
            return
    refs = [owner_reference(job)]
    if api.get("Service", name) is not None:
        api.patch("Service", name, {"metadata": {"ownerReferences": refs}})
    for _ in range(3):
        # The garbage collector edits the ConfigMap too (it strips the old owner): re-read.
        record = api.get("ConfigMap", name)
        if record is None or annotations(record).get(keys.RECORD_RESTART) != str(attempt):
            return
        try:
            api.patch("ConfigMap", name, {"metadata": {
                "resourceVersion": record["metadata"]["resourceVersion"],
                "ownerReferences": refs,
                "annotations": {keys.RECORD_RESTART: None},
            }})
            return
        except ApiException as e:
            if status_of(e) != 409:
                raise


def create_attempt(api: KubeApi, record: dict, attempt: int) -> dict | None:
    from launcher.backends.kubernetes.profiles import resolve_placement
    from launcher.spec.models import RunSpec

    spec = RunSpec.model_validate(spec_of(record))
    secrets = secrets_from_refs(record_json(record, keys.RECORD_SECRETS, []))
    job = render_job(spec, api.profile, secrets, resolve_placement(spec, api.profile), attempt=attempt)
    try:
        return api.create("Job", job)
    except ApiException as e:
        if status_of(e) == 409:
            existing = api.get("Job", spec.name)
            return existing if existing and attempt_of(existing) == attempt else None
        raise
