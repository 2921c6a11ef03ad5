"""Observe: read a run's objects (record, Job, pods, Warning events) into `Observed`.

Nothing here writes; what the observations mean is status.derive's job, and what
must be done about them is reconcile's.
"""

from __future__ import annotations

from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.kubeapi import KubeApi, RetryPolicy
from launcher.backends.kubernetes.status import Observed, attempt_of
from launcher.errors import NotFoundError

def warning_events(api: KubeApi, pods: list[dict]) -> list[dict]:
    """Warning events of these pods: one list call for the namespace, filtered here."""
    names = {p["metadata"]["name"] for p in pods}
    if not names:
        return []
    items, _ = api.list("Event", fields="type=Warning,involvedObject.kind=Pod")
    return [e for e in items if (e.get("involvedObject") or {}).get("name") in names]


def waiting_pods(job: dict | None, pods: list[dict]) -> list[dict]:
    """The current attempt's pods that have not started: their events say why."""
    current = attempt_of(job) if job else None
    return [p for p in pods if attempt_of(p) == current
            and (p.get("status") or {}).get("phase", "Pending") == "Pending"]


def observe(api: KubeApi, name: str) -> Observed:
    record = api.get("ConfigMap", name)
    job = api.get("Job", name)
    if record is None and job is None:
        raise NotFoundError(f"no run named {name!r} in {api.profile.where}",
                            hint="list runs with `launcher get runs`")
    pods, _ = api.list("Pod", labels=keys.run_selector(name))
    waiting = waiting_pods(job, pods)
    events = warning_events(api, waiting) if waiting else []
    return Observed(name, record=record, job=job, pods=pods, events=events, cluster=api.profile.name)


def observe_all(api: KubeApi, policy: RetryPolicy | None = None) -> list[Observed]:
    """Every run in the profile's namespace: three list calls (and one for events), whatever the count."""
    cluster = api.profile.name
    sel = keys.MANAGED_SELECTOR
    records, _ = api.list("ConfigMap", labels=sel, policy=policy)
    jobs, _ = api.list("Job", labels=sel, policy=policy)
    pods, _ = api.list("Pod", labels=sel, policy=policy)
    by_run: dict[str, Observed] = {}
    for cm in records:
        name = cm["metadata"].get("labels", {}).get(keys.RUN)
        if name:
            by_run[name] = Observed(name, record=cm, cluster=cluster)
    for job in jobs:
        name = job["metadata"].get("labels", {}).get(keys.RUN)
        if name:
            by_run.setdefault(name, Observed(name, cluster=cluster)).job = job
    for pod in pods:
        name = pod["metadata"].get("labels", {}).get(keys.RUN)
        if name in by_run:
            by_run[name].pods.append(pod)
    waiting = [p for o in by_run.values() for p in waiting_pods(o.job, o.pods)]
    if waiting:
        events = warning_events(api, waiting)
        for o in by_run.values():
            o.events = events
    return list(by_run.values())
