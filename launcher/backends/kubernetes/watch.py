"""Watch: yield a run each time its status changes, from informers on its objects; with
`reconcile`, acting (retries, fatal failures) as the observations call for, as
`launcher reconcile` does. Without it a watch only reads."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from launcher.backends.base import Run, utcnow
from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.attempts import Observed, attempt_of
from launcher.backends.kubernetes.informer import Informer
from launcher.backends.kubernetes.jobset_status import restarts_of
from launcher.backends.kubernetes.kubeapi import KubeApi
from launcher.backends.kubernetes.observe import jobset_events, observe, waiting_pods, warning_events
from launcher.backends.kubernetes.reconcile import apply
from launcher.backends.kubernetes.status import derive


def watch_run(api: KubeApi, name: str, *, poll_seconds: float = 0.5, reconcile: bool = False) -> Iterator[Run]:
    profile = api.profile
    changed = threading.Event()
    sel = keys.run_selector(name)
    first = observe(api, name)  # raises NotFoundError; says which form the run has
    kinds = ("ConfigMap", "JobSet", "Job", "Pod") if first.is_jobset else ("ConfigMap", "Job", "Pod")
    informers = {kind: Informer(api, kind, sel, changed.set).start() for kind in kinds}
    try:
        for inf in informers.values():
            inf.wait_synced(f"watch run {name!r}")
        last: tuple | None = None
        seen = False
        events: list[dict] = []
        events_at = 0.0
        while True:
            changed.clear()
            obs = Observed(
                name, record=informers["ConfigMap"].get(name), pods=informers["Pod"].snapshot(), cluster=profile.name
            )
            if first.is_jobset:
                obs.jobset, obs.jobs = informers["JobSet"].get(name), informers["Job"].snapshot()
            else:
                obs.job = informers["Job"].get(name)
            if obs.record is None and obs.job is None and obs.jobset is None:
                if not seen:
                    obs = observe(api, name)  # raises NotFoundError, or the informers lagged
                else:
                    return  # deleted while watched
            seen = True
            waiting = (
                waiting_pods(obs.job, obs.pods)
                if not obs.is_jobset
                else [
                    p
                    for p in obs.pods
                    if attempt_of(p) == restarts_of(obs.jobset) + 1
                    and (p.get("status") or {}).get("phase", "Pending") == "Pending"
                ]
            )
            if (waiting or obs.is_jobset) and time.monotonic() - events_at > 2.0:
                events = jobset_events(api, obs) if obs.is_jobset else warning_events(api, waiting)
                events_at = time.monotonic()
            obs.events = events if waiting or obs.is_jobset else []
            run, action = derive(obs)
            if action is not None and reconcile:
                apply(api, obs, action)
                changed.wait(poll_seconds)
                continue
            key = (run.status, run.current_attempt, run.reason)
            if key != last:
                last = key
                yield run
            if run.status.is_terminal:
                return
            # Wake on a change; look again now and then for events and time-based states, and
            # when a retry's backoff is over (nothing in the cluster changes then).
            timeout = 2.0 if waiting else 30.0
            if run.retry_at is not None:
                timeout = min(timeout, max(0.0, (run.retry_at - utcnow()).total_seconds()))
            changed.wait(timeout)
            time.sleep(poll_seconds)
    finally:
        for inf in informers.values():
            inf.stop()
