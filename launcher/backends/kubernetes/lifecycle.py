"""Stop and delete.

stop writes STOPPED into the record, detaches the ConfigMap from the Job and deletes
the Job in the background (its pods and the Service go with it). delete removes the
Job, the ConfigMap, the Service and every attempt's pods.
"""

from __future__ import annotations

from launcher.backends.base import Run, RunStatus, utcnow
from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.kubeapi import KubeApi, KubeError
from launcher.backends.kubernetes.observe import observe
from launcher.backends.kubernetes.reconcile import finish, settle
from launcher.backends.kubernetes.status import attempt_of, derive, summary_of
from launcher.errors import NotFoundError


def stop_run(api: KubeApi, name: str) -> Run:
    obs = observe(api, name)
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
            finish(api, obs, "STOPPED", "stopped by the user", summary)
            break
        except KubeError as e:
            if e.status != 409:
                raise
            obs = observe(api, name)  # the record changed under us (a retry): look again
    return settle(api, observe(api, name), act=False)


def delete_run(api: KubeApi, name: str) -> None:
    found = api.delete("Job", name, propagation="Background")
    found = api.delete("ConfigMap", name) or found
    found = api.delete("Service", name) or found
    pods, _ = api.list("Pod", labels=keys.run_selector(name))
    if pods:
        api.delete_collection("Pod", keys.run_selector(name))
    if not (found or pods):
        raise NotFoundError(f"no run named {name!r} in {api.profile.where}")
