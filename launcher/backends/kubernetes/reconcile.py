"""Reconcile: act on what an observation calls for (status.derive's Action).

Reads never act (`get`, `list`, `describe`, `logs`, `metrics`, the dashboard: a
read-only identity can run them, and two users looking at once cannot race). A
reconciler is named: `launcher reconcile [RUN] [--watch]` (also as a Deployment in
the cluster: docs/reconciler.yaml), `launcher run --follow` for the run it follows,
and `Backend.reconcile`.

A failed attempt is retried by restarting the whole group (a static rendezvous
cannot take one replacement rank): the reconciler records the attempt in the
ConfigMap, deletes the Job with propagationPolicy Orphan (its pods, and so their
logs, stay: `logs --attempt N` reads them), creates the Job again for attempt N+1
from the Job the submit rendered and the record keeps (never from the reconciler's
own profile), and points the owner references at it. A record from before the Job
was kept there (no `launcher.dev/job` annotation) is rendered again from its spec
with the reconciler's profile, as every retry was then.

Every step is guarded, so two reconcilers never restart twice and a stop always wins:

  1. restart: a compare-and-swap on the record (its resourceVersion) marks attempt
     N+1 as starting (`launcher.dev/restart`); one reconciler wins it.
  2. resume, step by step, each step safe to repeat by any reconciler, and none of
     them waiting (a watch wakes when the old Job is gone):
     a. the old Job is deleted (Orphan) and must be gone before the new one exists;
     b. the Job of attempt N+1 is created suspended (held): no pod can start yet;
     c. a compare-and-swap on the record, re-read just before, points its owner at
        the new Job. It fails if anyone wrote the record since (a stop writes it), and
        a record that is final by then means the held Job is deleted unseen;
     d. only then is the Job released (unsuspended; with Kueue, Kueue admits it), and
        the restart mark is cleared.
  A stop writes the final status with its own compare-and-swap and then deletes
  whatever Job exists: if it came after (c), the Job it deletes may have started
  pods, and they go with it before stop returns; if it came before, (c) fails and
  the Job never ran.

A run that can never start (a missing secret, an image that cannot be pulled) is
ended FAILED by the reconciler: the record keeps why, the Job goes. So is a Job or
JobSet left without its record by a submit that failed part way and could not clean up.
"""

from __future__ import annotations

import json
import time

from launcher.backends.base import Run, RunStatus, utcnow
from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.attempts import (
    Action,
    Observed,
    annotations,
    attempt_of,
    labels,
    record_json,
    spec_of,
    ts,
)
from launcher.backends.kubernetes.kubeapi import KubeApi, KubeError, RequestRetry, retry_on_conflict
from launcher.backends.kubernetes.observe import observe, observe_all
from launcher.backends.kubernetes.render import job_for_attempt, owner_reference, render_job, secrets_from_refs
from launcher.backends.kubernetes.status import derive
from launcher.errors import NotFoundError

# The record is created right after the Job; a submit's retries end well within this.
UNFINISHED_SUBMIT_SECONDS = 120.0
# How often a pass that carries a restart through looks again (see settle's carry_seconds).
RESUME_POLL_SECONDS = 0.2


def settle(api: KubeApi, obs: Observed, *, act: bool = False, carry_seconds: float = 0.0) -> Run:
    """The run as observed; with `act` (a reconciler), after doing what the observation
    calls for. Without it nothing is written, and what is due is said in the run's reason.

    A restart's steps wait on the cluster (the old Job must be gone before the next one
    exists), and a pass never waits by default: a watch, or the next pass, carries it on.
    `carry_seconds` keeps acting on a restart under way for up to that long, for a caller
    after which nothing may act (a one-shot `launcher reconcile`)."""
    run, action = derive(obs)
    if unfinished_submit(obs):
        # Its pods wait for a ConfigMap that will never come: without this it is STARTING forever.
        kind, owner = ("JobSet", obs.jobset) if obs.jobset is not None else ("Job", obs.job)
        if not act:
            run.status, run.reason = (
                RunStatus.FAILED,
                (f"its submit never finished (no record); its {kind} is left until `launcher reconcile` removes it"),
            )
            return run
        api.delete(kind, obs.name, propagation="Background", uid=owner["metadata"]["uid"])
        run.status, run.reason = RunStatus.FAILED, f"its submit never finished (no record); its {kind} was removed"
        return run
    if action is None or not act:
        return run
    apply(api, obs, action)
    deadline = time.monotonic() + carry_seconds
    while True:
        obs = observe(api, obs.name)
        run, action = derive(obs)
        if action is None or action.kind != "resume" or time.monotonic() >= deadline:
            return run
        time.sleep(RESUME_POLL_SECONDS)
        apply(api, obs, action)


def reconcile_run(api: KubeApi, name: str, carry_seconds: float = 0.0) -> Run:
    """One reconciler's pass over one run. Raises NotFoundError."""
    return settle(api, observe(api, name), act=True, carry_seconds=carry_seconds)


def reconcile_all(api: KubeApi, policy: RequestRetry | None = None, carry_seconds: float = 0.0) -> list[Run]:
    """One reconciler's pass over every run in the profile's namespace (a run deleted
    meanwhile is left out)."""
    runs = []
    for obs in observe_all(api, policy):
        try:
            runs.append(settle(api, obs, act=True, carry_seconds=carry_seconds))
        except NotFoundError:
            continue
    return runs


def unfinished_submit(obs: Observed) -> bool:
    """A JobSet or Job without its record, older than any submit still on its way: the submit
    failed part way and could not clean up (the cluster went away, the launcher was killed)."""
    owner = obs.jobset if obs.jobset is not None else obs.job
    if obs.record is not None or owner is None:
        return False
    created = ts(owner["metadata"].get("creationTimestamp"))
    return created is not None and (utcnow() - created).total_seconds() > UNFINISHED_SUBMIT_SECONDS


def apply(api: KubeApi, obs: Observed, action: Action) -> None:
    try:
        if action.kind == "fail":
            finish(api, obs, "FAILED", action.reason, [action.summary] if action.summary else [])
        elif action.kind == "retry":
            restart(api, obs, action)
        elif action.kind == "resume":
            resume(api, obs.name, action.next_attempt)
    except KubeError as e:
        if e.status in (404, 409):
            return  # another observer got there first; the next look sees its result
        raise


def finish(
    api: KubeApi, obs: Observed, status: str, reason: str | None, summaries: list[dict], exit_code: int | None = None
) -> None:
    """End the run by the launcher's hand: record it (compare-and-swap on the record that
    was observed) with the summaries of attempts it does not have yet, keep the record, and
    delete the JobSet, or whatever Job exists now."""
    if obs.record is not None:
        attempts = record_json(obs.record, keys.RECORD_ATTEMPTS, [])
        have = {a["index"] for a in attempts}
        attempts += [s for s in summaries if s["index"] not in have]
        attempts.sort(key=lambda a: a["index"])
        final = {"status": status, "reason": reason, "at": utcnow().isoformat(), "exit_code": exit_code}
        api.patch(
            "ConfigMap",
            obs.name,
            {
                "metadata": {
                    "resourceVersion": obs.record["metadata"]["resourceVersion"],
                    "ownerReferences": None,  # the record outlives the Job
                    "annotations": {
                        keys.RECORD_ATTEMPTS: json.dumps(attempts),
                        keys.RECORD_FINAL: json.dumps(final),
                        keys.RECORD_RESTART: None,
                    },
                }
            },
        )
    if obs.is_jobset:
        # Foreground, as the JobSet controller deletes its Jobs: nothing of the run keeps running.
        api.delete("JobSet", obs.name, propagation="Foreground")
        return
    # Look again rather than trust the observation: a retry may have created a Job since.
    job = api.get("Job", obs.name)
    if job is not None:
        api.delete("Job", obs.name, propagation="Background", uid=job["metadata"]["uid"])


def restart(api: KubeApi, obs: Observed, action: Action) -> None:
    attempts = record_json(obs.record, keys.RECORD_ATTEMPTS, [])
    attempts.append(action.summary)
    # The resourceVersion makes this a compare-and-swap: one observer wins the restart.
    api.patch(
        "ConfigMap",
        obs.name,
        {
            "metadata": {
                "resourceVersion": obs.record["metadata"]["resourceVersion"],
                "annotations": {
                    keys.RECORD_ATTEMPTS: json.dumps(attempts),
                    keys.RECORD_RESTART: str(action.next_attempt),
                },
            }
        },
    )
    # Orphan: the failed attempt's pods (and logs) stay; the Service and ConfigMap lose their owner.
    api.delete("Job", obs.name, propagation="Orphan", uid=obs.job["metadata"]["uid"])
    resume(api, obs.name, action.next_attempt)


def _restarting(record: dict | None, attempt: int) -> bool:
    """Is the record still asking for this attempt (not ended, not moved on)?"""
    return (
        record is not None
        and annotations(record).get(keys.RECORD_RESTART) == str(attempt)
        and not annotations(record).get(keys.RECORD_FINAL)
    )


def resume(api: KubeApi, name: str, attempt: int) -> None:
    """Carry a restart one step further (see the module docstring); never waits."""
    record = api.get("ConfigMap", name)
    if not _restarting(record, attempt):
        return
    job = api.get("Job", name)
    if job is not None and attempt_of(job) < attempt:
        if not job["metadata"].get("deletionTimestamp"):
            api.delete("Job", name, propagation="Orphan", uid=job["metadata"]["uid"])
        return  # still being deleted; the next look carries on
    if job is None:
        job = create_attempt(api, record, attempt)
        if job is None:
            return
    refs = [owner_reference(job)]

    def point_owner() -> bool:
        # Re-read: the record may have changed since (a stop; the garbage collector stripping
        # the old owner). The resourceVersion makes the write fail if it changes again.
        record = api.get("ConfigMap", name)
        if not _restarting(record, attempt):
            if record is None or annotations(record).get(keys.RECORD_FINAL):
                # Ended (stopped) while the attempt was being created: it must never run.
                api.delete("Job", name, propagation="Background", uid=job["metadata"]["uid"])
            return False
        api.patch(
            "ConfigMap",
            name,
            {"metadata": {"resourceVersion": record["metadata"]["resourceVersion"], "ownerReferences": refs}},
        )
        return True

    # A record that keeps changing answers 409 to the last try: apply() leaves it to the next pass.
    if not retry_on_conflict(point_owner):
        return
    if (job.get("spec") or {}).get("suspend") and not labels(job).get(keys.KUEUE_QUEUE):
        api.patch("Job", name, {"spec": {"suspend": False}})  # with Kueue, Kueue releases it
    if api.get("Service", name) is not None:
        api.patch("Service", name, {"metadata": {"ownerReferences": refs}})

    def clear_mark() -> None:
        record = api.get("ConfigMap", name)
        if _restarting(record, attempt):
            api.patch(
                "ConfigMap",
                name,
                {
                    "metadata": {
                        "resourceVersion": record["metadata"]["resourceVersion"],
                        "annotations": {keys.RECORD_RESTART: None},
                    }
                },
            )

    retry_on_conflict(clear_mark)


def create_attempt(api: KubeApi, record: dict, attempt: int) -> dict | None:
    """Create the Job of `attempt`, held (suspended) until the record confirms it."""
    stored = record_json(record, keys.RECORD_JOB, None)
    job = job_for_attempt(stored if stored else _render_again(api, record), attempt)
    token = labels(record).get(keys.SUBMISSION)
    if token:
        job["metadata"].setdefault("labels", {})[keys.SUBMISSION] = token
    name = job["metadata"]["name"]
    try:
        created = api.create("Job", job)
        return created if attempt_of(created) == attempt else None
    except KubeError as e:
        if e.status == 409:
            existing = api.get("Job", name)
            return existing if existing and attempt_of(existing) == attempt else None
        raise


def _render_again(api: KubeApi, record: dict) -> dict:
    """The Job of a record that does not keep it (a submit from before it did), rendered
    again from its spec and secret references with this reconciler's profile."""
    from launcher.backends.kubernetes.profiles import resolve_placement
    from launcher.spec.models import RunSpec

    spec = RunSpec.model_validate(spec_of(record))
    secrets = secrets_from_refs(record_json(record, keys.RECORD_SECRETS, []))
    return render_job(spec, api.profile, secrets, resolve_placement(spec, api.profile))
