"""Stop and delete.

stop writes STOPPED into the record with a summary of every attempt (statuses, exit
codes, times), detaches the ConfigMap from the JobSet or Job and deletes that (its pods
and the Service go with it): the run's history stays readable by `describe`, and its
logs by `logs` where the profile has a log_store. delete removes the JobSet or Job,
the ConfigMap, the Service and every attempt's pods.
"""

from __future__ import annotations

from launcher.backends.base import Run, RunStatus, utcnow
from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.kubeapi import KubeApi, retry_on_conflict
from launcher.backends.kubernetes.jobset_status import restarts_of
from launcher.backends.kubernetes.observe import observe
from launcher.backends.kubernetes.reconcile import finish, settle
from launcher.backends.kubernetes.attempts import Observed, attempt_of, summary_of
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
    pods, _ = api.list("Pod", labels=keys.run_selector(name))
    if pods:
        api.delete_collection("Pod", keys.run_selector(name))
    if not (found or pods):
        raise NotFoundError(f"no run named {name!r} in {api.profile.where}")
