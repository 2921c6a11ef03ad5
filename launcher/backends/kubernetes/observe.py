"""Observe: read a run's objects (record, JobSet, its child Jobs, pods, Warning events)
into `Observed`. Nothing here writes; what the observations mean is status.derive's job.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.attempts import Observed, attempt_of, first_attempt
from launcher.backends.kubernetes.kubeapi import KubeApi, KubeError, RequestRetry
from launcher.backends.kubernetes.kueue import read_view
from launcher.backends.kubernetes.status import child_job_name, failed_pod_of_event, job_failure_events, restarts_of
from launcher.errors import NotFoundError


def warning_events(api: KubeApi, pods: list[dict], objects: tuple[tuple[str, str], ...] = ()) -> list[dict]:
    """Warning events of these pods and of the (kind, name) objects: one list call for the
    namespace, filtered here."""
    names = {("Pod", p["metadata"]["name"]) for p in pods} | set(objects)
    if not names:
        return []
    kinds = {k for k, _ in names}
    fields = "type=Warning" + (f",involvedObject.kind={kinds.pop()}" if len(kinds) == 1 else "")
    items, _ = api.list("Event", fields=fields)
    return [
        e
        for e in items
        if ((e.get("involvedObject") or {}).get("kind"), (e.get("involvedObject") or {}).get("name")) in names
    ]


def jobset_events(api: KubeApi, obs: Observed) -> list[dict]:
    """A JobSet run's pending pods' events, and its child Job's failure events, which tell the
    attempts whose pods the JobSet controller already deleted, or why it has no pods yet (the
    API server refused them: FailedCreate)."""
    waiting = waiting_pods(obs)
    ended = restarts_of(obs.jobset) > 0 or bool(((obs.jobset or {}).get("status") or {}).get("terminalState"))
    asked = ended or pods_missing(obs)
    return warning_events(api, waiting, jobset_objects(obs.name) if asked else ())


def current_attempt(obs: Observed) -> int:
    return first_attempt(obs.jobset) + restarts_of(obs.jobset)


def waiting_pods(obs: Observed) -> list[dict]:
    """The current attempt's pods that have not started: their events say why."""
    current = current_attempt(obs)
    return [
        p for p in obs.pods if attempt_of(p) == current and (p.get("status") or {}).get("phase", "Pending") == "Pending"
    ]


def pods_missing(obs: Observed) -> bool:
    """The current attempt's Job is there, not suspended (a queued run has no pods by
    design), and has no pod: its controller's events say why."""
    current = current_attempt(obs)
    running = [j for j in obs.jobs if attempt_of(j) == current and not (j.get("spec") or {}).get("suspend")]
    return bool(running) and not any(attempt_of(p) == current for p in obs.pods)


def jobset_objects(run: str) -> tuple[tuple[str, str], ...]:
    """Whose Warning events tell a JobSet run's ended attempts: its child Job's and its own."""
    return (("Job", child_job_name(run)), ("JobSet", run))


# At most this many of a run's newest failed attempts that a restart deleted are looked up.
SCHEDULED_LOOKUPS = 10
SCHEDULED_MESSAGE = re.compile(r"^Successfully assigned [^/\s]+/(?P<pod>\S+) to (?P<node>\S+)$")


def scheduled_nodes(api: KubeApi, obs: Observed, known: dict[str, str] | None = None) -> dict[str, str]:
    """The node each failed pod that a JobSet restart deleted ran on (pod -> node), from the
    scheduler's Scheduled event ("Successfully assigned ns/pod to node"), which outlives the
    pod for the cluster's event TTL (an hour by default): so a hardware or collective
    failure is pinned to its node even when the Job's failure event alone tells the attempt
    (attempts.excluded_nodes). One list call per such attempt, the newest SCHEDULED_LOOKUPS,
    but for those `known` from an earlier look (a gone pod's node does not change)."""
    present = {p["metadata"]["name"] for p in obs.pods}
    gone = [
        pod
        for e in job_failure_events(obs.name, obs.events)
        if (pod := failed_pod_of_event(e)) is not None and pod not in present
    ][-SCHEDULED_LOOKUPS:]
    out = {pod: (known or {})[pod] for pod in gone if pod in (known or {})}
    for pod in [p for p in gone if p not in out]:
        items, _ = api.list("Event", fields=f"involvedObject.kind=Pod,involvedObject.name={pod},reason=Scheduled")
        for e in items:
            m = SCHEDULED_MESSAGE.match(e.get("message") or "")
            if m and m.group("pod") == pod:
                out[pod] = m.group("node")
    return out


def failed_pod_nodes(api: KubeApi, pods: list[dict], also: Iterable[str] = ()) -> dict[str, dict]:
    """The nodes the failed pods ran on, and the nodes `also` (one read each), for a hardware
    fault they show (attempts.node_fault). A user who may not read nodes (403) gets none:
    the class then comes from the pods alone."""
    names = sorted(
        {
            p["spec"]["nodeName"]
            for p in pods
            if (p.get("status") or {}).get("phase") == "Failed" and (p.get("spec") or {}).get("nodeName")
        }
        | set(also)
    )
    out: dict[str, dict] = {}
    for node in names:
        try:
            found = api.get("Node", node)
        except KubeError as e:
            if e.status in (401, 403):
                return {}
            raise
        if found is not None:
            out[node] = found
    return out


def read_events(api: KubeApi, obs: Observed, known: dict[str, str] | None = None) -> None:
    """What `derive` reads beyond the run's own objects: its events, the nodes its failed
    pods ran on (those a restart deleted from their Scheduled events; `known`: see
    scheduled_nodes) and those nodes' own word."""
    obs.events = jobset_events(api, obs)
    obs.scheduled = scheduled_nodes(api, obs, known)
    obs.nodes = failed_pod_nodes(api, obs.pods, obs.scheduled.values())


def observe(api: KubeApi, name: str) -> Observed:
    record = api.get("ConfigMap", name)
    obs = Observed(name, record=record, cluster=api.profile.name)
    obs.jobset = _get_jobset(api, name)
    if record is None and obs.jobset is None:
        raise NotFoundError(f"no run named {name!r} in {api.profile.where}", hint="list runs with `launcher get runs`")
    obs.pods, _ = api.list("Pod", labels=keys.run_selector(name))
    obs.kueue = read_view(api, [obs.jobset])
    obs.jobs, _ = api.list("Job", labels=keys.run_selector(name))
    read_events(api, obs)
    return obs


def _get_jobset(api: KubeApi, name: str) -> dict | None:
    try:
        return api.get("JobSet", name)
    except KubeError as e:
        if e.status == 404:  # JobSet was removed from the cluster: the record still reads
            return None
        raise


def _list_jobsets(api: KubeApi, selector: str, policy: RequestRetry | None) -> list[dict]:
    try:
        return api.list("JobSet", labels=selector, policy=policy)[0]
    except KubeError as e:
        if e.status == 404:  # JobSet was removed from the cluster: the records still list
            return []
        raise


def runs_selector(names: list[str] | None = None) -> str:
    """The label selector of the launcher's objects, of these runs only where `names` is given."""
    if names is None:
        return keys.MANAGED_SELECTOR
    return f"{keys.MANAGED_SELECTOR},{keys.RUN} in ({','.join(sorted(names))})"


def observe_all(api: KubeApi, policy: RequestRetry | None = None, names: list[str] | None = None) -> list[Observed]:
    """Every run in the profile's namespace (or those of `names`, by a label selector):
    four list calls (and one for events, one for Kueue's Workloads where runs name a
    queue), whatever the count."""
    cluster = api.profile.name
    sel = runs_selector(names)
    records, _ = api.list("ConfigMap", labels=sel, policy=policy)
    jobsets = _list_jobsets(api, sel, policy)
    jobs, _ = api.list("Job", labels=sel, policy=policy)
    pods, _ = api.list("Pod", labels=sel, policy=policy)
    by_run: dict[str, Observed] = {}
    for cm in records:
        name = cm["metadata"].get("labels", {}).get(keys.RUN)
        if name:
            by_run[name] = Observed(name, record=cm, cluster=cluster)
    # A JobSet whose submit died before its record counts too.
    for js in jobsets:
        name = js["metadata"].get("labels", {}).get(keys.RUN)
        if name:
            by_run.setdefault(name, Observed(name, cluster=cluster)).jobset = js
    for job in jobs:
        name = job["metadata"].get("labels", {}).get(keys.RUN)
        if name in by_run:
            by_run[name].jobs.append(job)
    for pod in pods:
        name = pod["metadata"].get("labels", {}).get(keys.RUN)
        if name in by_run:
            by_run[name].pods.append(pod)
    kueue = read_view(api, [o.jobset for o in by_run.values()])
    for o in by_run.values():
        o.kueue = kueue
    waiting = [p for o in by_run.values() for p in waiting_pods(o)]
    ended = tuple(
        obj
        for o in by_run.values()
        if restarts_of(o.jobset) or ((o.jobset or {}).get("status") or {}).get("terminalState") or pods_missing(o)
        for obj in jobset_objects(o.name)
    )
    if waiting or ended:
        events = warning_events(api, waiting, ended)
        for o in by_run.values():
            o.events = events
    nodes = failed_pod_nodes(api, pods)
    for o in by_run.values():
        o.nodes = nodes
    return list(by_run.values())
