"""Watch: yield a run each time its status changes, from informers on its objects.

A watch writes two things: a run whose container can never start (an image that does not
pull, a missing secret, pods the namespace's Pod Security level refuses) is ended FAILED as
`launcher stop` ends a run (the record keeps
why; the JobSet, whose pods Kubernetes would leave Pending forever, goes), so that
`run --follow` leaves nothing holding GPUs; and a run whose JobSet has a TTL has its
outcome and attempts written into its record as it ends, before the cluster deletes the
JobSet and all it says (lifecycle.record_outcome). An identity that may not do so leaves
them. Reads (get, list, describe, the dashboard) never write."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from launcher.backends.base import Run, utcnow
from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.attempts import Action, Observed
from launcher.backends.kubernetes.informer import Informer
from launcher.backends.kubernetes.kubeapi import KubeApi, KubeError
from launcher.backends.kubernetes.lifecycle import finish, record_outcome
from launcher.backends.kubernetes.observe import observe, pods_missing, read_events, waiting_pods
from launcher.backends.kubernetes.status import derive, gone_after_its_ttl


def watch_run(api: KubeApi, name: str, *, poll_seconds: float = 0.5) -> Iterator[Run]:
    profile = api.profile
    changed = threading.Event()
    sel = keys.run_selector(name)
    observe(api, name)  # raises NotFoundError
    informers = {kind: Informer(api, kind, sel, changed.set).start() for kind in ("ConfigMap", "JobSet", "Job", "Pod")}
    try:
        for inf in informers.values():
            inf.wait_synced(f"watch run {name!r}")
        last: tuple | None = None
        seen = False
        # The last look at the run's events and its failed pods' nodes (read_events), kept
        # between looks; a gone pod's node, once known, is not looked up again.
        looked = Observed(name)
        events_at = 0.0
        while True:
            changed.clear()
            obs = Observed(
                name,
                record=informers["ConfigMap"].get(name),
                jobset=informers["JobSet"].get(name),
                jobs=informers["Job"].snapshot(),
                pods=informers["Pod"].snapshot(),
                cluster=profile.name,
            )
            if obs.record is None and obs.jobset is None:
                if not seen:
                    obs = observe(api, name)  # raises NotFoundError, or the informers lagged
                else:
                    return  # deleted while watched
            seen = True
            waiting = waiting_pods(obs)
            if time.monotonic() - events_at > 2.0:
                read_events(api, obs, looked.scheduled)
                looked, events_at = obs, time.monotonic()
            obs.events, obs.scheduled, obs.nodes = looked.events, looked.scheduled, looked.nodes
            run, action = derive(obs)
            if last is not None and (run.status.is_terminal or run.current_attempt != last[1]):
                # An attempt just ended: its story is in events (and its nodes) newer than the last look.
                read_events(api, obs, looked.scheduled)
                looked, events_at = obs, time.monotonic()
                run, action = derive(obs)
            if action is not None and action.kind == "fail" and obs.jobset is not None:
                end_unstartable(api, obs, action)
            if run.status.is_terminal and has_ttl(obs.jobset):
                record_outcome(api, obs, run)  # before the cluster deletes the JobSet, and all it says
            key = (run.status, run.current_attempt, run.reason)
            if key != last:
                last = key
                yield run
            if run.status.is_terminal or gone_after_its_ttl(obs):
                return  # nothing of it changes any more
            # Wake on a change; look again now and then for events and time-based states.
            timeout = 2.0 if waiting or pods_missing(obs) else 30.0
            if run.retry_at is not None:
                timeout = min(timeout, max(0.0, (run.retry_at - utcnow()).total_seconds()))
            changed.wait(timeout)
            time.sleep(poll_seconds)
    finally:
        for inf in informers.values():
            inf.stop()


def has_ttl(jobset: dict | None) -> bool:
    return ((jobset or {}).get("spec") or {}).get("ttlSecondsAfterFinished") is not None


def end_unstartable(api: KubeApi, obs: Observed, action: Action) -> None:
    try:
        finish(api, obs, "FAILED", action.reason, [action.summary] if action.summary else [])
    except KubeError as e:
        if e.status not in (403, 404, 409):  # not allowed, gone, or someone got there first
            raise
