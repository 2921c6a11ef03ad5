"""Stop and delete.

stop writes STOPPED into the record, detaches the ConfigMap from the JobSet or Job and
deletes that (its pods and the Service go with it). delete removes the JobSet or Job,
the ConfigMap, the Service and every attempt's pods.
"""

from __future__ import annotations

from launcher.backends.base import Run, RunStatus, utcnow
from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.kubeapi import KubeApi, retry_on_conflict
from launcher.backends.kubernetes.jobset_status import restarts_of
from launcher.backends.kubernetes.observe import observe
from launcher.backends.kubernetes.reconcile import finish, settle
from launcher.backends.kubernetes.attempts import attempt_of, summary_of
from launcher.backends.kubernetes.status import derive
from launcher.errors import NotFoundError


def stop_run(api: KubeApi, name: str) -> Run:
    obs = observe(api, name)
    run, _ = derive(obs)
    if run.status.is_terminal:
        return run
    summary = None
    live_index = restarts_of(obs.jobset) + 1 if obs.jobset is not None else attempt_of(obs.job) if obs.job else None
    if run.attempts and run.attempts[-1].index == live_index:
        live = run.attempts[-1]
        live.status, live.reason, live.ended_at = RunStatus.STOPPED, "stopped by the user", utcnow()
        for r in live.ranks:
            if not r.status.is_terminal:
                r.status = RunStatus.STOPPED
        summary = summary_of(live, "stopped", [])
    looks = iter([obs])  # the first try writes what was observed; a conflict (a retry) looks again
    retry_on_conflict(lambda: finish(api, next(looks, None) or observe(api, name), "STOPPED",
                                     "stopped by the user", summary))
    return settle(api, observe(api, name))


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
