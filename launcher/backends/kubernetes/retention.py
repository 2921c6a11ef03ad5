"""A profile's retention: `retention_days: N` deletes what `launcher delete` would of the
finished runs that ended more than N days ago (their record ConfigMap, kept logs, code
snapshot, JobSet if the cluster still has it), and with `retention_logs: delete` their
log archive in the log_store too.

It runs at submit (KubernetesBackend.submit, after the run is created): the one command a
team runs against a profile often, so that the history stays pruned without anyone
remembering to prune it; each submit deletes at most PRUNE_PAGE runs, so that a history
that piled up before the setting costs a few seconds of several submits, never one long
one. It reads only the records the created-day label says are old (a `notin` selector of
the days kept), in the profile's namespace alone (the API client is bound to it), and
deletes a run only when the launcher's own status of it (derive, as `get runs` shows it)
says it ended (finished below): a live run is never touched, however old."""

from __future__ import annotations

import contextlib
import posixpath
import time
from datetime import UTC, datetime

from launcher.backends.base import Run
from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.attempts import Observed
from launcher.backends.kubernetes.history import CREATED, FORMATS, _epoch, _runs
from launcher.backends.kubernetes.kubeapi import KubeApi, RequestRetry
from launcher.backends.runstatus import RunStatus
from launcher.errors import LauncherError

PRUNE_PAGE = 20
"""The most runs one submit deletes."""
OBSERVE_BATCH = 50
"""Old records observed at once (one `launcher.dev/run in (...)` look)."""
DAY = 86400


def old_records_selector(now: float, days: int) -> str:
    """The launcher's records whose created-day is none of the days from `days` days before
    `now` to the day after it (another submitter's clock may run ahead): older than the
    cutoff's day, or from a launcher before the labels (whose creationTimestamp decides)."""
    first = int(now - days * DAY)
    kept = [datetime.fromtimestamp(t, UTC).strftime(FORMATS[DAY]) for t in range(first, int(now) + 2 * DAY, DAY)]
    return f"{keys.MANAGED_SELECTOR},{CREATED[DAY]} notin ({','.join(sorted(set(kept)))})"


def prune(
    api: KubeApi,
    days: int,
    *,
    delete_logs: bool = False,
    now: float | None = None,
    page: int = PRUNE_PAGE,
    policy: RequestRetry | None = None,
) -> list[str]:
    """Delete up to `page` finished runs that ended more than `days` days before `now`,
    oldest first; returns their names."""
    from launcher.backends.kubernetes.lifecycle import delete_run
    from launcher.backends.kubernetes.observe import observe_all
    from launcher.backends.kubernetes.status import derive

    now = time.time() if now is None else now
    cutoff = now - days * DAY
    created = _runs(api, old_records_selector(now, days), policy, ("ConfigMap",))
    old = sorted((at, name) for name, at in created.items() if _epoch(at) < cutoff)
    deleted: list[str] = []
    for start in range(0, len(old), OBSERVE_BATCH):
        names = [name for _, name in old[start : start + OBSERVE_BATCH]]
        for observed in observe_all(api, policy, names):
            run = derive(observed)[0]
            ended = run.ended_at or run.created_at
            if run.name not in names or not finished(run, observed) or ended.timestamp() >= cutoff:
                continue
            if delete_logs:
                delete_archive(api, observed.record)
            delete_run(api, run.name)
            deleted.append(run.name)
            if len(deleted) >= page:
                return deleted
    return deleted


def finished(run: Run, observed: Observed) -> bool:
    """COMPLETED, FAILED or STOPPED; or UNKNOWN with nothing of it left running in the
    cluster (no JobSet, no pod): a detached run whose JobSet a TTL deleted before anyone
    recorded how it ended, or one whose submit died before its JobSet was created."""
    if run.status.is_terminal:
        return True
    return run.status is RunStatus.UNKNOWN and observed.jobset is None and not observed.pods


def delete_archive(api: KubeApi, record: dict | None) -> None:
    """Remove a run's log archive (every file under its directory in the log_store, then the
    directories where the storage has them); a run without one has nothing to remove."""
    from launcher.backends.kubernetes.archive import open_archive

    archive = open_archive(api, record)
    if archive is None:
        return
    store = archive.store
    files = store.files()
    for rel in files:
        store.delete(rel)
    dirs = {posixpath.dirname(rel) for rel in files}
    dirs |= {posixpath.dirname(d) for d in dirs}  # attempt-N/ above rank-M/
    for sub in sorted((d for d in dirs if d), key=lambda d: (-d.count("/"), d)):
        with contextlib.suppress(LauncherError):  # a storage without directories, or one not empty
            store.remove_dir(sub)
    with contextlib.suppress(LauncherError):
        store.remove_dir("")
