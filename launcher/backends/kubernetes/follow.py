"""A run's logs: one-shot reads of every rank, interleaved by time, and `logs -f`, which
attaches a reader thread to each rank's pod as it starts (logs.read_pod does one pod).

A rank whose pod is gone (a stop, a JobSet restart, a TTL) is read from the run's log
archive where the profile has a log_store (archive.py), else from what the stop kept of
it (keptlogs.py: a stopped attempt only); a followed pod that goes away is read on from
the archive, after as many lines as its pod gave, so the hand-over loses and repeats no
line. An attempt that ran but whose pods are all gone and whose log nothing kept is an
error that says so: never an empty answer.
"""

from __future__ import annotations

import functools
import queue
import threading
from collections.abc import Callable, Iterator

from launcher.backends.base import LogLine, Run, RunStatus
from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.archive import LogArchive, open_archive
from launcher.backends.kubernetes.attempts import (
    Observed,
    annotations_of,
    attempt_of,
    first_attempt,
    labels,
    pod_rank,
    record_json,
)
from launcher.backends.kubernetes.informer import Informer
from launcher.backends.kubernetes.keptlogs import FollowedLog, KeptLogs
from launcher.backends.kubernetes.kubeapi import KubeApi, WatchHandle
from launcher.backends.kubernetes.logs import ns_to_datetime, read_pod
from launcher.backends.kubernetes.observe import observe
from launcher.backends.kubernetes.status import child_job_name, derive
from launcher.errors import LauncherError, LogsGoneError, NeverStartedError, NotFoundError
from launcher.secrets.mask import Masker

ToLine = Callable[[int, "int | None", str], LogLine]


def masker_for(api: KubeApi, record: dict | None) -> Masker:
    names = {r["name"] for r in record_json(record, keys.RECORD_SECRETS, [])}
    if not names:
        return Masker([])
    from launcher.backends.kubernetes.secrets import KubernetesSecretStore

    try:
        secrets = [s for s in KubernetesSecretStore(api.profile, api=api).list() if s.name in names]
    except LauncherError:
        return Masker([])  # not allowed to read them: the entrypoint masked at the source
    return Masker(v for s in secrets for v in s.masked_values())


def run_logs(
    api: KubeApi,
    name: str,
    *,
    rank: int | None = None,
    attempt: int | None = None,
    tail: int | None = None,
    follow: bool = False,
    previous: bool = False,
    cancel: threading.Event | None = None,
) -> Iterator[LogLine]:
    obs = observe(api, name)
    run, _ = derive(obs)
    # Opened only when a rank's pod is gone: it reads the archive's secret and lists the store.
    archive = functools.cache(lambda: open_archive(api, obs.record))
    kept: Callable[[], LogSource | None] = functools.cache(lambda: archive() or KeptLogs(api, name))
    # A record whose JobSet the cluster deleted (its TTL) before anything recorded how the run
    # ended: its attempts are those the archive holds.
    unrecorded = obs.jobset is None and record_json(obs.record, keys.RECORD_FINAL, None) is None
    last = max(run.current_attempt, (a.last_attempt() if unrecorded and (a := archive()) else 0))
    index = attempt or last
    # The next attempt may be starting (a retry): its pods are followed as they appear.
    if index < 1 or index > last + 1 or (index > last and not follow):
        raise NotFoundError(f"run {name!r} has no attempt {index} (it has {last})")
    masker = masker_for(api, obs.record)

    def to_line(r: int, stamp: int | None, text: str) -> LogLine:
        return LogLine(
            rank=r,
            text=masker.mask(text),
            attempt=index,
            timestamp=ns_to_datetime(stamp) if stamp is not None else None,
        )

    sel = attempt_selector(name, index, first_attempt(obs.jobset))
    ended = index < run.current_attempt or run.status.is_terminal or obs.jobset is None
    if not follow or ended:  # an attempt that has ended is read once: its log will not grow
        wanted = {rank} if rank is not None else set(range(run.nodes))
        yield from _read_all(
            api,
            sel,
            rank,
            tail,
            previous,
            to_line,
            kept,
            index,
            wanted,
            lambda: gone_error(run, index, rank, kept(), unrecorded=unrecorded),
        )
        return
    # What the follow reads is kept if the JobSet controller's restart deletes the pods (no log_store).
    followed = None if annotations_of(obs.record).get(keys.RECORD_LOG_ARCHIVE) else FollowedLog(api, name, index)
    yield from _follow(
        api,
        name,
        child_job_name(name),
        sel,
        index,
        rank,
        tail,
        previous,
        to_line,
        cancel or threading.Event(),
        archive,
        followed,
    )


LogSource = LogArchive | KeptLogs
"""Where a rank's log is read once its pod is gone."""


def gone_error(
    run: Run, index: int, rank: int | None, archive: LogSource | None, *, unrecorded: bool = False
) -> LauncherError | None:
    """Why an attempt's log cannot be read: its pods are gone and no archive has it, or it
    never started a container (None: the attempt is yet to start). `unrecorded`: the run's
    JobSet is gone and nothing recorded its attempts (a TTL)."""
    attempt = next((a for a in run.attempts if a.index == index), None)
    if attempt is None and unrecorded:
        return _gone(index, rank, "removed after the run ended", archive)
    if attempt is None:
        return None
    ran = (
        index < run.current_attempt
        or attempt.started_at is not None
        or any(r.exit_code is not None for r in attempt.ranks)
    )
    if not ran:
        if not attempt.status.is_terminal:
            return None
        why = attempt.reason or (run.reason if index == run.current_attempt else None)
        return NeverStartedError(
            f"attempt {index} of run {run.name} never started a container "
            f"({attempt.status.value}{f': {why}' if why else ''}), so it has no logs"
        )
    if index < run.current_attempt:
        why = "JobSet restart"
    elif run.status is RunStatus.STOPPED:
        why = "the run was stopped"
    elif run.status.is_terminal:
        why = "removed after the run ended"
    else:
        why = "deleted"
    return _gone(index, rank, why, archive)


def _gone(index: int, rank: int | None, why: str, archive: LogSource | None) -> LogsGoneError:
    what = (
        f"the pods of attempt {index} are gone"
        if rank is None
        else f"the pod of rank {rank} of attempt {index} is gone"
    )
    if archive is None or not archive.keeps_every_attempt:
        return LogsGoneError(f"{what} ({why}); set log_store in the profile to keep logs")
    return LogsGoneError(f"{what} ({why}), and the log archive {archive.url} holds nothing of it")


def attempt_selector(name: str, index: int, first: int) -> str:
    """The pods of attempt `index` of the JobSet whose first attempt is `first`: their restart
    count (index - first) labels them, and, after a restart, the first attempt does too."""
    if index < first:  # an earlier JobSet's: its pods went with it
        return f"{keys.run_selector(name)},{keys.ATTEMPT}=gone"
    restarts = f"{keys.JOBSET_RESTART}={index - first}"
    if first == 1:  # also the pods of a JobSet rendered before the attempt label was
        return f"{keys.run_selector(name)},{restarts}"
    return f"{keys.run_selector(name)},{keys.ATTEMPT}={first},{restarts}"


def _read_all(
    api: KubeApi,
    sel: str,
    rank: int | None,
    tail: int | None,
    previous: bool,
    to_line: ToLine,
    archive_of: Callable[[], LogSource | None] = lambda: None,
    index: int = 1,
    wanted: set[int] | None = None,
    gone: Callable[[], LauncherError | None] = lambda: None,
) -> Iterator[LogLine]:
    """Every rank's lines: from its pod while it exists, else (a rank of `wanted` without a
    log from its pod) from the archive."""
    pods, _ = api.list("Pod", labels=sel)
    lines: list[tuple[int, int, int, str]] = []
    read: set[int] = set()
    for pod in sorted(pods, key=pod_rank):
        r = pod_rank(pod)
        if rank is not None and r != rank:
            continue
        before = len(lines)
        for n, (stamp, text) in enumerate(
            read_pod(api, pod["metadata"]["name"], follow=False, tail=tail, previous=previous)
        ):
            lines.append((stamp or 0, r, n, text))
        if len(lines) > before:
            read.add(r)
    archive = archive_of() if wanted is None or not wanted <= read else None
    if archive is not None:
        for r in sorted(archive.ranks(index)):
            if r in read or (rank is not None and r != rank):
                continue
            got = [(stamp, r, n, text) for n, (stamp, text) in enumerate(archive.lines(index, r))]
            lines += got[-tail:] if tail else [] if tail == 0 else got
            read.add(r)
    if not read and not any(rank is None or pod_rank(p) == rank for p in pods):
        error = gone()
        if error is not None:
            raise error
    lines.sort()  # every rank's lines, interleaved by time
    for stamp, r, _, text in lines:
        yield to_line(r, stamp or None, text)


def _follow(
    api: KubeApi,
    name: str,
    job_name: str,
    sel: str,
    index: int,
    rank: int | None,
    tail: int | None,
    previous: bool,
    to_line: ToLine,
    cancel: threading.Event,
    archive_of: Callable[[], LogArchive | None] = lambda: None,
    followed: FollowedLog | None = None,
) -> Iterator[LogLine]:
    """Attach a reader to each rank's pod as it starts; end when the attempt has ended and
    every reader is done, or soon after `cancel` is set. `followed` gets every line, and
    keeps them where the attempt did not complete, read from its start: a JobSet restart
    deletes its pods with no one else to keep their log.

    However it ends (cancel, the consumer closing it, an error), it stops its informers and
    shuts every reader's log stream, so no thread or connection outlives it: a reader
    waiting on a quiet pod's stream would otherwise hold both until the pod's next line.

    Readers are attached by their own thread, on every pod change, so a chatty rank
    never delays the others' attach. `tail` applies to pods already running when we
    began; a pod that starts later is read from its first line, so none of its lines
    were printed before the command began and none are dropped."""
    out: queue.Queue = queue.Queue()
    stop = threading.Event()
    pods_changed = threading.Event()

    pods_inf = Informer(api, "Pod", sel, pods_changed.set).start()
    job_inf = Informer(api, "Job", keys.run_selector(name), lambda: None).start()
    readers: dict[str, threading.Thread] = {}
    handles: list[WatchHandle] = []
    done_pods: set[str] = set()
    attach_lock = threading.Lock()
    tailed: set[str] = set()

    def pod_done(pod_name: str) -> bool:
        pod = pods_inf.get(pod_name)
        return pod is None or container_finished(pod)

    def reader(pod_name: str, r: int, handle: WatchHandle) -> None:
        try:
            seen = 0
            for stamp, text in read_pod(
                api,
                pod_name,
                follow=True,
                tail=tail if pod_name in tailed else None,
                previous=previous,
                is_done=lambda: pod_done(pod_name),
                handle=handle,
            ):
                out.put(to_line(r, stamp, text))
                seen += 1
            gone = pods_inf.get(pod_name) is None and not handle.stopped and (tail is None or pod_name not in tailed)
            archive = archive_of() if gone else None
            if archive is not None:
                # The pod went away while followed: the archive has the rest, after its first `seen` lines.
                archive.forget(index)
                for stamp, text in archive.lines(index, r, skip=seen):
                    out.put(to_line(r, stamp, text))
        except Exception as e:  # noqa: BLE001 - surfaced to the consumer
            out.put(e)
        finally:
            out.put(("done", pod_name))

    def attach_new() -> None:
        with attach_lock:
            if stop.is_set():  # ending: its handles are being stopped
                return
            for pod in pods_inf.snapshot():
                pname = pod["metadata"]["name"]
                r = pod_rank(pod)
                if pname in readers or (rank is not None and r != rank) or not container_started(pod):
                    continue
                handle = WatchHandle()
                handles.append(handle)
                t = threading.Thread(target=reader, args=(pname, r, handle), name=f"logs-{pname}", daemon=True)
                readers[pname] = t
                t.start()

    def attacher() -> None:
        while not stop.is_set():
            pods_changed.wait(1.0)
            pods_changed.clear()
            attach_new()

    try:
        for inf in (pods_inf, job_inf):
            inf.wait_synced(f"follow the logs of run {name!r}")
        tailed.update(p["metadata"]["name"] for p in pods_inf.snapshot() if container_started(p))
        attach_new()
        threading.Thread(target=attacher, name=f"logs-attach-{name}", daemon=True).start()
        while not cancel.is_set():
            try:
                item = out.get(timeout=0.3)
            except queue.Empty:
                item = None
            if isinstance(item, Exception):
                raise item
            if isinstance(item, LogLine):
                if followed is not None and (rank is None or item.rank == rank):
                    followed.add(item.rank, _ns(item), item.text)
                yield item
                continue
            if isinstance(item, tuple):
                done_pods.add(item[1])
            # Attach here too: the end check must never run before a finished pod has its reader.
            attach_new()
            with attach_lock:
                all_done = done_pods >= set(readers)
            if all_done and out.empty() and _attempt_over(name, job_name, index, job_inf, pods_inf, rank):
                if (
                    followed is not None
                    and rank is None
                    and tail is None
                    and _failed(job_inf.get(job_name), index, pods_inf.snapshot())
                ):
                    followed.keep()  # the JobSet controller's restart of the group deletes its pods
                return
    finally:
        stop.set()
        with attach_lock:
            for handle in handles:
                handle.stop()
        pods_changed.set()
        pods_inf.stop()
        job_inf.stop()


def _failed(job: dict | None, index: int, pods: list[dict]) -> bool:
    """Whether attempt `index` ended other than complete: its child Job failed, or is gone or
    superseded (a restart, a stop, a delete)."""
    if job is None or attempt_of(job) != index:
        return True
    conds = {c["type"]: c.get("status") for c in (job.get("status") or {}).get("conditions") or []}
    if conds.get("Complete") == "True":
        return False
    return not (pods and all((p.get("status") or {}).get("phase") == "Succeeded" for p in pods))


def _ns(line: LogLine) -> int | None:
    ts = line.timestamp
    return None if ts is None else int(ts.timestamp()) * 1_000_000_000 + ts.microsecond * 1000


def _attempt_over(
    name: str, job_name: str, index: int, job_inf: Informer, pods_inf: Informer, rank: int | None
) -> bool:
    job = job_inf.get(job_name)  # the JobSet's child Job <run>-node-0
    if job is None or attempt_of(job) != index:
        return True  # stopped, deleted or superseded by a retry
    conds = {c["type"]: c.get("status") for c in (job.get("status") or {}).get("conditions") or []}
    if conds.get("Complete") == "True" or conds.get("Failed") == "True":
        return True
    pods = [p for p in pods_inf.snapshot() if rank is None or pod_rank(p) == rank]
    nodes = int((job.get("spec") or {}).get("completions") or 1)
    expected = 1 if rank is not None else nodes
    if len(pods) >= expected and all(container_finished(p) for p in pods):
        return True
    # A container that can never start ends the attempt too (the run is FAILED fast).
    restarts = attempt_of(job) - first_attempt(job)
    # A JobSet as derive reads one: the child Job's labels and creation time stand for its.
    meta = {"labels": labels(job), "creationTimestamp": (job.get("metadata") or {}).get("creationTimestamp")}
    jobset = {"metadata": meta, "status": {"restarts": restarts}}
    run, _ = derive(Observed(name, jobset=jobset, jobs=[job], pods=pods_inf.snapshot()))
    return run.status.is_terminal


def container_started(pod: dict) -> bool:
    for c in (pod.get("status") or {}).get("containerStatuses") or []:
        state = c.get("state") or {}
        if state.get("running") or state.get("terminated"):
            return True
    return (pod.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed")


def container_finished(pod: dict) -> bool:
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return True
    return any(
        (c.get("state") or {}).get("terminated") for c in (pod.get("status") or {}).get("containerStatuses") or []
    )
