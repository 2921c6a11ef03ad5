"""Stop and delete.

stop writes STOPPED into the record with a summary of every attempt (statuses, exit
codes, times), detaches the ConfigMap from the JobSet or Job and deletes that (its pods
and the Service go with it): the run's history stays readable by `describe`, and its
logs by `logs` where the profile has a log_store. delete removes the JobSet or Job,
the ConfigMap, the Service and every attempt's pods.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from launcher.backends.base import Run, RunStatus, utcnow
from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.attempts import Observed, attempt_of, spec_of, summary_of
from launcher.backends.kubernetes.jobset_status import restarts_of
from launcher.backends.kubernetes.kubeapi import KubeApi, retry_on_conflict
from launcher.backends.kubernetes.observe import observe
from launcher.backends.kubernetes.reconcile import finish, settle
from launcher.backends.kubernetes.status import derive
from launcher.errors import NotFoundError


def stop_run(api: KubeApi, name: str) -> Run:
    """End the run by the user's hand. The record stays, and keeps every attempt as seen at
    the stop (its status, ranks with their exit codes, times and events), so `describe`
    reads it after the JobSet or Job and its pods are gone; `delete` removes it."""
    looks = iter([observe(api, name)])  # the first try writes what was observed; a conflict (a retry) looks again

    def stop_once() -> None:
        obs = next(looks, None) or observe(api, name)
        run, _ = derive(obs)
        if run.status.is_terminal:
            return
        finish(api, obs, "STOPPED", "stopped by the user", stop_summaries(obs, run))

    retry_on_conflict(stop_once)
    return settle(api, observe(api, name))


def stop_summaries(obs: Observed, run: Run) -> list[dict]:
    """Summaries of the run's attempts at a stop: the live one marked STOPPED (its ranks that
    still ran too), the earlier ones as they were seen."""
    live_index = restarts_of(obs.jobset) + 1 if obs.jobset is not None else attempt_of(obs.job) if obs.job else None
    now = utcnow()
    out = []
    for a in run.attempts:
        events = [e for e in run.events if e.attempt == a.index]
        failure = None
        if a.index == live_index and not a.status.is_terminal:
            a.status, a.reason, a.ended_at = RunStatus.STOPPED, "stopped by the user", now
            for r in a.ranks:
                if not r.status.is_terminal:
                    r.status = RunStatus.STOPPED
            failure = "stopped"
        out.append(summary_of(a, failure, events))
    return out


def delete_run(api: KubeApi, name: str) -> None:
    found = api.delete("JobSet", name, propagation="Foreground")
    found = api.delete("Job", name, propagation="Background") or found
    found = api.delete("ConfigMap", name) or found
    found = api.delete("Service", name) or found
    # The code snapshot is owned by the run too; deleted here so that nothing waits on the garbage collector.
    api.delete("ConfigMap", keys.code_object_name(name))
    api.delete("Secret", keys.code_object_name(name))
    pods, _ = api.list("Pod", labels=keys.run_selector(name))
    if pods:
        api.delete_collection("Pod", keys.run_selector(name))
    if not (found or pods):
        raise NotFoundError(f"no run named {name!r} in {api.profile.where}")


# How long `run -r` carries a restart on (the old Job must be gone before the next exists)
# before it leaves the rest to the next reconciler's pass (a watch, `launcher reconcile`).
RESTART_CARRY_SECONDS = 30.0

JOBSET_RESTART_REFUSAL = (
    "a JobSet that ended cannot run again: its spec is immutable and its controller numbers "
    "attempts by its own restarts"
)
JOBSET_UPDATE_REFUSAL = (
    "JobSet's replicatedJobs and failurePolicy are immutable once it is created, and its "
    "controller renders every restart from them"
)


def restart_run(api: KubeApi, name: str) -> Run:
    """Attempt N+1 of a Job-form run that ended STOPPED or FAILED, by the reconciler's own
    restart: one compare-and-swap on the record (the attempt that ended recorded, the final
    status cleared, the restart mark set, the retry budget counted from here), then the steps
    of reconcile.resume, carried on for up to RESTART_CARRY_SECONDS. The Job comes from the
    one the record keeps; a Service the stop's clean-up took is rendered again."""
    from launcher.backends.capabilities import Restartable
    from launcher.backends.kubernetes.attempts import record_json
    from launcher.backends.kubernetes.reconcile import reconcile_run
    from launcher.backends.kubernetes.render import render_service
    from launcher.backends.kubernetes.status import live_attempt
    from launcher.errors import InputError

    def mark() -> int:
        obs = observe(api, name)
        run, _ = derive(obs)
        Restartable.refuse_restart(run)
        if obs.is_jobset:
            raise InputError(
                f"run {name} cannot be restarted: {JOBSET_RESTART_REFUSAL}",
                hint=f"`launcher run --clone {name}` submits a copy of it",
            )
        if obs.record is None:
            raise InputError(f"run {name} cannot be restarted: its record (ConfigMap {name}) is gone")
        attempts = record_json(obs.record, keys.RECORD_ATTEMPTS, [])
        live = live_attempt(obs)
        if live is not None:
            attempt, failure, events = live
            attempts.append(summary_of(attempt, failure, events))
        attempt = max([int(a["index"]) for a in attempts] + [run.current_attempt]) + 1
        api.patch(
            "ConfigMap",
            name,
            {
                "metadata": {
                    "resourceVersion": obs.record["metadata"]["resourceVersion"],
                    "annotations": {
                        keys.RECORD_ATTEMPTS: json.dumps(attempts),
                        keys.RECORD_FINAL: None,
                        keys.RECORD_RESTART: str(attempt),
                        keys.RECORD_RESTARTED: str(attempt),
                    },
                }
            },
        )
        if api.get("Service", name) is None:
            from launcher.spec.models import RunSpec

            record = api.get("ConfigMap", name)
            api.create("Service", render_service(RunSpec.model_validate(spec_of(record)), api.profile))
        return attempt

    retry_on_conflict(mark)
    return reconcile_run(api, name, carry_seconds=RESTART_CARRY_SECONDS)


def update_run(api: KubeApi, name: str, changes: dict, refuse: Callable[[Run], None]) -> Run:
    """Set scheduling fields of a Job-form run that has not ended. The record's spec keeps
    them (the reconciler reads max_retries from it), and so does the Job it keeps for the next
    attempts; max_duration also moves the live Job's activeDeadlineSeconds (a Job's deadline
    may change while it runs; it counts from the Job's start). `refuse(run)` raises for what
    the backend refuses of the run as it is now (Backend.refuse_update)."""
    from launcher.backends.kubernetes.attempts import record_json
    from launcher.errors import InputError

    def write() -> None:
        obs = observe(api, name)
        run, _ = derive(obs)
        refuse(run)
        if obs.is_jobset:
            raise InputError(
                f"the kubernetes backend cannot change {', '.join('scheduling.' + k for k in changes)} "
                f"of run {name}: it is a JobSet, and {JOBSET_UPDATE_REFUSAL}"
            )
        spec = spec_of(obs.record)
        spec.setdefault("scheduling", {}).update(changes)
        patch: dict = {keys.SPEC_FILE: json.dumps(spec, sort_keys=True)}
        meta: dict = {"resourceVersion": obs.record["metadata"]["resourceVersion"]}
        kept = record_json(obs.record, keys.RECORD_JOB, None)
        if kept is not None and "max_duration" in changes:
            kept["spec"]["activeDeadlineSeconds"] = deadline_seconds(changes["max_duration"])
            meta["annotations"] = {keys.RECORD_JOB: json.dumps(kept, sort_keys=True, separators=(",", ":"))}
        api.patch("ConfigMap", name, {"metadata": meta, "data": patch})
        if "max_duration" in changes and obs.job is not None:
            api.patch("Job", name, {"spec": {"activeDeadlineSeconds": deadline_seconds(changes["max_duration"])}})

    retry_on_conflict(write)
    return settle(api, observe(api, name))


def deadline_seconds(hours: float) -> int:
    """scheduling.max_duration as a Job's activeDeadlineSeconds (as render.py renders it)."""
    return max(1, int(hours * 3600))
