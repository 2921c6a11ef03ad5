"""Stop, restart, update and delete: what a user's command changes in the cluster.

stop writes STOPPED into the record with a summary of every attempt (statuses, exit
codes, times), detaches the record and the code snapshot from the JobSet and deletes it
(its Jobs and pods go with it): the run's history stays readable by `describe`, and its
logs by `logs`: from the profile's log_store, or without one from what the stop read of
the live attempt's pods until they were gone (keptlogs.py). A run whose container can
never start (status.derive says FAILED, its pods wait forever) is ended the same way,
as FAILED.

restart (`run -r`) starts attempt N+1 of a STOPPED or FAILED run as a new JobSet of the
same name (a FAILED run's last attempt's log kept first, as a stop keeps it), rendered
by the restarting user's backend from the spec the record keeps, validated again:
nothing is created from what an annotation says; its pods keep off the nodes the run's
hardware or collective failures were on (resilience.exclude_faulty_nodes). update changes what a live run's
objects let change. delete removes the JobSet, the record, the code snapshot, the kept
logs and every pod.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from launcher.backends.base import Run, RunStatus, utcnow
from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.attempts import (
    Observed,
    annotations_of,
    attempt_of,
    excluded_nodes,
    record_json,
    spec_of,
    summary_of,
)
from launcher.backends.kubernetes.follow import container_started, masker_for
from launcher.backends.kubernetes.keptlogs import Keeper, scheduled_pods
from launcher.backends.kubernetes.kubeapi import KubeApi, KubeError, retry_on_conflict
from launcher.backends.kubernetes.observe import current_attempt, observe
from launcher.backends.kubernetes.render import owner_reference
from launcher.backends.kubernetes.status import derive
from launcher.backends.kubernetes.submit import record_outlives
from launcher.errors import InputError, LauncherError, NotFoundError

# How long a restart waits for the old JobSet (and its pods) to be gone before it creates the next.
OLD_JOBSET_WAIT_SECONDS = 60.0
POLL_SECONDS = 0.2


def finish(api: KubeApi, obs: Observed, status: str, reason: str | None, summaries: list[dict]) -> None:
    """End the run by the launcher's hand: record it (compare-and-swap on the record that was
    observed) with the summaries of attempts it does not have yet, keep the record and the code
    snapshot (no longer owned by the JobSet), and delete the JobSet."""
    if obs.record is not None:
        attempts = _merged(record_json(obs.record, keys.RECORD_ATTEMPTS, []), summaries)
        final = {"status": status, "reason": reason, "at": utcnow().isoformat(), "exit_code": None}
        api.patch(
            "ConfigMap",
            obs.name,
            {
                "metadata": {
                    "resourceVersion": obs.record["metadata"]["resourceVersion"],
                    "ownerReferences": None,  # the record outlives the JobSet
                    "annotations": {keys.RECORD_ATTEMPTS: json.dumps(attempts), keys.RECORD_FINAL: json.dumps(final)},
                }
            },
        )
        _own_code(api, obs.name, None)
    # Foreground, as the JobSet controller deletes its Jobs: nothing of the run keeps running.
    api.delete("JobSet", obs.name, propagation="Foreground")


def record_outcome(api: KubeApi, obs: Observed, run: Run) -> None:
    """Write a run's outcome and every attempt's summary into its record, as a stop does,
    where the JobSet has a TTL: the cluster deletes it soon, and with it all that says how
    the run ended. Done by a watch that saw the end (`run --follow`); a record that changed
    meanwhile (409), is gone, or may not be written is left as it is."""
    if obs.record is None or record_json(obs.record, keys.RECORD_FINAL, None):
        return
    summaries = [summary_of(a, None, [e for e in run.events if e.attempt == a.index]) for a in run.attempts]
    at = (run.ended_at or utcnow()).isoformat()
    final = {"status": run.status.value, "reason": run.reason, "at": at, "exit_code": run.exit_code}
    try:
        api.patch(
            "ConfigMap",
            obs.name,
            {
                "metadata": {
                    "resourceVersion": obs.record["metadata"]["resourceVersion"],
                    "annotations": {
                        keys.RECORD_ATTEMPTS: json.dumps(
                            _merged(record_json(obs.record, keys.RECORD_ATTEMPTS, []), summaries)
                        ),
                        keys.RECORD_FINAL: json.dumps(final),
                    },
                }
            },
        )
    except KubeError as e:
        if e.status not in (403, 404, 409):
            raise


def _merged(attempts: list[dict], summaries: list[dict]) -> list[dict]:
    have = {a["index"] for a in attempts}
    out = attempts + [s for s in summaries if s["index"] not in have]
    return sorted(out, key=lambda a: a["index"])


def _own_code(api: KubeApi, name: str, refs: list[dict] | None) -> None:
    """Point the run's code snapshot (ConfigMap or Secret <run>-code) at the JobSet, or at
    nothing (refs None) so that it outlives the JobSet for a restart."""
    for kind in ("ConfigMap", "Secret"):
        if api.get(kind, keys.code_object_name(name)) is not None:
            api.patch(kind, keys.code_object_name(name), {"metadata": {"ownerReferences": refs}})


def stop_run(api: KubeApi, name: str) -> Run:
    """End the run by the user's hand. The record stays, and keeps every attempt as seen at
    the stop (its status, ranks with their exit codes, times and events), so `describe`
    reads it after the JobSet and its pods are gone; `delete` removes it. A run that can
    never start is ended FAILED, with why. Without a log_store, the live attempt's log is
    kept with the record (keptlogs.py): each rank's pod is read from before the JobSet's
    deletion until it is gone."""
    first = observe(api, name)
    looks = iter([first])  # the first try writes what was observed; a conflict looks again
    keeper = _stop_keeper(api, first)

    def stop_once() -> None:
        obs = next(looks, None) or observe(api, name)
        run, action = derive(obs)
        if action is not None and action.kind == "fail" and obs.jobset is not None:
            finish(api, obs, "FAILED", action.reason, [action.summary] if action.summary else [])
            return
        if run.status.is_terminal:
            return
        finish(api, obs, "STOPPED", "stopped by the user", stop_summaries(obs, run))

    retry_on_conflict(stop_once)
    warnings = keeper.keep(api.get("ConfigMap", name)) if keeper is not None else []
    run = derive(observe(api, name))[0]
    run.warnings += warnings
    return run


def _stop_keeper(api: KubeApi, obs: Observed) -> Keeper | None:
    """Readers of the live attempt's pods, where a stop must keep their log: the run goes on
    and has pods on nodes (a container still being created gets a few seconds)."""
    run, action = derive(obs)
    if obs.jobset is None or run.status.is_terminal or (action is not None and action.kind == "fail"):
        return None
    return _keeper(api, obs, scheduled_pods(obs.pods, current_attempt(obs)))


def _keeper(api: KubeApi, obs: Observed, pods: list[dict]) -> Keeper | None:
    """Readers of these pods of the JobSet's current attempt, which the launcher is about to
    delete, where no log_store archives them."""
    if annotations_of(obs.record).get(keys.RECORD_LOG_ARCHIVE) or not pods:
        return None  # the pods' entrypoint writes the archive to the end
    keeper = Keeper(api, obs.name, current_attempt(obs), pods, masker_for(api, obs.record))
    keeper.wait_reading()
    return keeper


def stop_summaries(obs: Observed, run: Run) -> list[dict]:
    """Summaries of the run's attempts at a stop: the live one marked STOPPED (its ranks that
    still ran too), the earlier ones as they were seen."""
    live_index = current_attempt(obs) if obs.jobset is not None else None
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
    found = api.delete("ConfigMap", name) or found
    # The code snapshot is owned by the run too; deleted here so that nothing waits on the garbage collector.
    api.delete("ConfigMap", keys.code_object_name(name))
    api.delete("Secret", keys.code_object_name(name))
    # The stopped attempts' kept logs are owned by the record; deleted here for the same reason.
    api.delete_collection("ConfigMap", f"{keys.LOGS_OF}={name}")
    # The run's own Secret (`launcher secret bundle`, for an applied dry-run): by its label, never another's.
    api.delete_collection("Secret", f"{keys.SECRETS_OF}={name}")
    pods, _ = api.list("Pod", labels=keys.run_selector(name))
    if pods:
        api.delete_collection("Pod", keys.run_selector(name))
    if not (found or pods):
        raise NotFoundError(f"no run named {name!r} in {api.profile.where}")


Render = Callable[[dict[str, Any], int, tuple[str, ...]], tuple[dict[str, Any], dict[str, str]]]
"""render(spec as the record keeps it, attempt, nodes to keep off) -> (the JobSet, the record's
new data): the backend's own rendering with its own profile and secrets, which validates the
spec again."""


def nodes_to_exclude(spec: dict[str, Any], run: Run) -> list[dict[str, Any]]:
    """The nodes the next attempt keeps off: those its attempts' hardware or collective
    failures are pinned to, unless the spec sets resilience.exclude_faulty_nodes false."""
    if ((spec.get("resilience") or {}).get("exclude_faulty_nodes", True)) is False:
        return []
    return excluded_nodes(run.attempts)


def restart_run(api: KubeApi, name: str, render: Render) -> Run:
    """Attempt N+1 of a run that ended STOPPED or FAILED: every attempt so far recorded in
    the record (which no longer belongs to the old JobSet), the old JobSet gone, then a new
    JobSet rendered by `render` from the record's spec, whose attempts count on from N+1
    (JobSet's maxRestarts, the retry budget, counts afresh from it). Its pods keep off the
    nodes an attempt's hardware or collective failure was pinned to (nodes_to_exclude), which
    the record lists: the JobSet controller restarts with the same template (a JobSet's
    replicatedJobs are immutable), so the launcher leaves a node out only where it creates
    the JobSet, and a read never writes one."""
    from launcher.backends.capabilities import Restartable

    obs = observe(api, name)
    run, _ = derive(obs)
    Restartable.refuse_restart(run)
    if obs.record is None:
        raise InputError(f"run {name} cannot be restarted: its record (ConfigMap {name}) is gone")
    attempt = max([a.index for a in run.attempts] + [run.current_attempt]) + 1
    # Rendered before anything changes: a spec or a secret that no longer passes is refused here.
    excluded = nodes_to_exclude(spec_of(obs.record), run)
    jobset, data = render(spec_of(obs.record), attempt, tuple(e["node"] for e in excluded))
    code = keys.code_object_name(name)
    if _mounts_code(jobset) and all(api.get(kind, code) is None for kind in ("ConfigMap", "Secret")):
        raise InputError(
            f"run {name} cannot be restarted: its code snapshot ({code}) is gone",
            hint=f"`launcher run --clone {name} --code DIR` submits a copy with a new one",
        )
    summaries = [summary_of(a, None, [e for e in run.events if e.attempt == a.index]) for a in run.attempts]

    def record_attempts() -> None:
        record = api.get("ConfigMap", name)
        if record is None:
            raise InputError(f"run {name} cannot be restarted: its record (ConfigMap {name}) is gone")
        api.patch(
            "ConfigMap",
            name,
            {
                "metadata": {
                    "resourceVersion": record["metadata"]["resourceVersion"],
                    "ownerReferences": None,  # deleting the old JobSet must not take the record
                    "annotations": {
                        keys.RECORD_ATTEMPTS: json.dumps(
                            _merged(record_json(record, keys.RECORD_ATTEMPTS, []), summaries)
                        ),
                        keys.RECORD_FINAL: None,
                        keys.RECORD_RESTARTED: str(attempt),
                        keys.RECORD_TTL: _ttl_of(jobset),
                        keys.RECORD_EXCLUDED: json.dumps(excluded) if excluded else None,
                    },
                },
                "data": data,
            },
        )

    # A FAILED run's last attempt still has its pods, which deleting its JobSet takes.
    ended = [p for p in scheduled_pods(obs.pods, current_attempt(obs)) if container_started(p)]
    keeper = _keeper(api, obs, ended) if obs.jobset is not None else None
    retry_on_conflict(record_attempts)
    _own_code(api, name, None)
    if obs.jobset is not None:
        api.delete("JobSet", name, propagation="Foreground", uid=obs.jobset["metadata"]["uid"])
        _wait_gone(api, name)
    warnings = keeper.keep(api.get("ConfigMap", name)) if keeper is not None else []
    created = api.create("JobSet", jobset)
    refs = [owner_reference(created)]
    if not record_outlives(created):
        api.patch("ConfigMap", name, {"metadata": {"ownerReferences": refs}})
    _own_code(api, name, refs)
    run = derive(observe(api, name))[0]
    run.warnings += warnings
    return run


def _ttl_of(jobset: dict[str, Any]) -> str | None:
    ttl = (jobset.get("spec") or {}).get("ttlSecondsAfterFinished")
    return None if ttl is None else str(ttl)


def _mounts_code(jobset: dict[str, Any]) -> bool:
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    return any(v.get("name") == "code" for v in pod.get("volumes") or [])


def _wait_gone(api: KubeApi, name: str) -> None:
    deadline = time.monotonic() + OLD_JOBSET_WAIT_SECONDS
    while api.get("JobSet", name) is not None:
        if time.monotonic() >= deadline:
            raise LauncherError(
                f"run {name}: its old JobSet is still being deleted after {OLD_JOBSET_WAIT_SECONDS:g} s; "
                f"the attempts so far are recorded: `launcher run -r {name}` again starts the next",
                exit_code=1,
            )
        time.sleep(POLL_SECONDS)


def update_run(api: KubeApi, name: str, changes: dict, refuse: Callable[[Run], None]) -> Run:
    """Set scheduling.max_duration of a run that has not ended. The record's spec keeps it
    (describe shows it; a `run -r` renders it), and the live attempt's child Job gets it as
    its activeDeadlineSeconds, which a Job lets change while it runs (it counts from the
    Job's start). The JobSet's own template cannot change (JobSet's replicatedJobs are
    immutable), so an attempt the JobSet controller starts after a failure has the
    submitted max_duration: the returned run's warnings say so. `refuse(run)` raises for
    what the backend refuses of the run as it is now (Updatable.refuse_update)."""

    def write() -> Run:
        obs = observe(api, name)
        run, _ = derive(obs)
        refuse(run)
        spec = spec_of(obs.record)
        spec.setdefault("scheduling", {}).update(changes)
        meta = {"resourceVersion": obs.record["metadata"]["resourceVersion"]} if obs.record else {}
        api.patch("ConfigMap", name, {"metadata": meta, "data": {keys.SPEC_FILE: json.dumps(spec, sort_keys=True)}})
        live = [j for j in obs.jobs if attempt_of(j) == current_attempt(obs)]
        for job in live:
            seconds = deadline_seconds(changes["max_duration"])
            api.patch("Job", job["metadata"]["name"], {"spec": {"activeDeadlineSeconds": seconds}})
        return run

    retry_on_conflict(write)
    run = derive(observe(api, name))[0]
    run.warnings.append(
        f"scheduling.max_duration: attempt {run.current_attempt} now ends after {changes['max_duration']:g} h; "
        "an attempt the JobSet controller starts after a failure has the submitted one (a JobSet's "
        f"replicatedJobs are immutable), and `launcher run -r {name}` takes the new one"
    )
    return run


def deadline_seconds(hours: float) -> int:
    """scheduling.max_duration as a Job's activeDeadlineSeconds (as render.py renders it)."""
    return max(1, int(hours * 3600))
