"""A stopped attempt's log, kept in the cluster where the profile has no log_store.

Deleting a JobSet deletes its pods, and a pod's log goes with it. So `launcher stop`
follows each rank's pod of the live attempt from before it deletes the JobSet until the
pod is gone (the lines the entrypoint prints after SIGTERM included), and writes what it
read into a ConfigMap `<run>-logs-<attempt>`, owned by the run's record: it lives as
long as the record does (`launcher delete` removes both). `logs` and `metrics` read it
as they read a log archive.

A ConfigMap holds at most 1 MiB: each rank's lines are gzipped, and a rank keeps its last
lines within an equal share of KEPT_BYTES; a rank that printed more says, in a first
line, how many earlier lines were not kept. `run -r` of a FAILED run keeps its last
attempt the same way. An attempt the JobSet controller ended by restarting the group (its
pods deleted with no launcher watching) is kept where a follow (`run --follow`, `logs -f`)
read it (FollowedLog), else by a log_store alone.
"""

from __future__ import annotations

import base64
import collections
import gzip
import json
import threading
import time
from collections.abc import Iterator

from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.attempts import annotations_of, attempt_of, pod_rank
from launcher.backends.kubernetes.kubeapi import KubeApi, KubeError, WatchHandle
from launcher.backends.kubernetes.logs import read_pod
from launcher.errors import LauncherError
from launcher.secrets.mask import Masker

KEPT_BYTES = 900 * 1024
"""The compressed log of one stopped attempt, every rank together: under a ConfigMap's 1 MiB."""
KEPT_TAIL_LINES = 20_000
"""The most lines a stop reads of a rank's log: its last (a long run's whole log would be gigabytes)."""
DROPPED = "launcher.dev/kept-dropped"
"""On the ConfigMap: JSON {rank: what was not kept ("1200 earlier lines")} for the ranks whose log was cut."""
FOLLOWED_BYTES = 4 * KEPT_BYTES
"""The most of a rank's log a follow holds, to keep it at a restart (text, before it is gzipped)."""
READ_START_SECONDS = 10.0
"""How long a stop waits for its readers' first lines before it deletes the JobSet."""
READ_SLACK_SECONDS = 15.0
"""How long past its grace period a stop waits for a rank's pod to go before it keeps what it read."""


def kept_name(run: str, attempt: int) -> str:
    return f"{run}-logs-{attempt}"


def _key(rank: int) -> str:
    return f"rank-{rank}.log.gz"


class KeptLogs:
    """One run's kept logs, read as a LogArchive is: every stopped attempt's ConfigMap."""

    keeps_every_attempt = False
    """Only a stopped attempt is kept (a log_store's archive keeps them all)."""

    def __init__(self, api: KubeApi, run: str):
        self.api = api
        self.run = run
        self.url = f"ConfigMap {run}-logs-<attempt>"
        self._read: dict[int, dict[int, list[tuple[int | None, str]]]] = {}

    def ranks(self, attempt: int) -> dict[int, list[tuple[int | None, str]]]:
        """rank -> its kept lines, for one attempt ({} when it was not kept)."""
        if attempt not in self._read:
            obj = self.api.get("ConfigMap", kept_name(self.run, attempt))
            out: dict[int, list[tuple[int | None, str]]] = {}
            if obj is not None and (obj["metadata"].get("labels") or {}).get(keys.LOGS_OF) == self.run:
                dropped = {int(k): str(v) for k, v in json.loads(annotations_of(obj).get(DROPPED) or "{}").items()}
                for key, blob in (obj.get("binaryData") or {}).items():
                    if not (key.startswith("rank-") and key.endswith(".log.gz")):
                        continue
                    rank = int(key[len("rank-") : -len(".log.gz")])
                    lines = [_parse(raw) for raw in gzip.decompress(base64.b64decode(blob)).decode().splitlines()]
                    if dropped.get(rank):
                        stamp = lines[0][0] if lines else None
                        lines.insert(
                            0,
                            (
                                stamp,
                                f"[launcher] {dropped[rank]} of rank {rank} were not kept: without a "
                                f"log_store, a stopped attempt keeps the last {KEPT_BYTES // 1024} KiB "
                                "(compressed) of its ranks' logs",
                            ),
                        )
                    out[rank] = lines
            self._read[attempt] = out
        return self._read[attempt]

    def forget(self, attempt: int) -> None:
        self._read.pop(attempt, None)

    def lines(self, attempt: int, rank: int, *, skip: int = 0) -> Iterator[tuple[int, str]]:
        for stamp, text in self.ranks(attempt).get(rank, [])[skip:]:
            yield stamp or 0, text


def _parse(raw: str) -> tuple[int | None, str]:
    stamp, _, text = raw.partition(" ")
    return (int(stamp) if stamp.isdigit() else None), text


class Keeper:
    """Reads each rank's pod of a stopped attempt to its end, then keeps the lines."""

    def __init__(self, api: KubeApi, run: str, attempt: int, pods: list[dict], masker: Masker):
        self.api = api
        self.run = run
        self.attempt = attempt
        self.masker = masker
        self.lines: dict[int, list[str]] = {}
        self.errors: dict[int, str] = {}
        self.handles: list[WatchHandle] = []
        self.threads: list[threading.Thread] = []
        self.reading: list[threading.Event] = []
        grace = max([int(p["spec"].get("terminationGracePeriodSeconds") or 30) for p in pods] or [30])
        self.wait_seconds = grace + READ_SLACK_SECONDS
        for pod in pods:
            handle = WatchHandle()
            rank = pod_rank(pod)
            self.lines[rank] = []
            reading = threading.Event()
            t = threading.Thread(
                target=self._read,
                args=(pod["metadata"]["name"], rank, handle, reading),
                name=f"keep-{pod['metadata']['name']}",
                daemon=True,
            )
            self.handles.append(handle)
            self.threads.append(t)
            self.reading.append(reading)
            t.start()

    def wait_reading(self, timeout: float = READ_START_SECONDS) -> None:
        """Until every reader has its first lines (a rank that started has printed the
        entrypoint's), or has ended: the JobSet is deleted only then, or a pod could go before
        it was read. A container still being created gets `timeout` to start."""
        deadline = time.monotonic() + timeout
        for reading in self.reading:
            reading.wait(max(0.0, deadline - time.monotonic()))

    def _read(self, pod: str, rank: int, handle: WatchHandle, reading: threading.Event) -> None:
        out = self.lines[rank]
        try:
            for stamp, text in read_pod(
                self.api,
                pod,
                follow=True,
                tail=KEPT_TAIL_LINES,
                is_done=lambda: self._gone_or_finished(pod),
                handle=handle,
            ):
                out.append(f"{stamp if stamp is not None else '-'} {self.masker.mask(text)}\n")
                reading.set()
        except LauncherError as e:
            self.errors[rank] = e.message
        except Exception as e:  # noqa: BLE001 - a stop must not fail for its log
            self.errors[rank] = f"{type(e).__name__}: {e}"
        finally:
            reading.set()

    def _gone_or_finished(self, pod: str) -> bool:
        try:
            obj = self.api.get("Pod", pod)
        except LauncherError:
            return True
        if obj is None:
            return True
        return (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")

    def keep(self, record: dict | None) -> list[str]:
        """Wait for the readers (the pods' grace period, and a little), write what they read;
        the warnings of what could not be kept."""
        deadline = time.monotonic() + self.wait_seconds
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        for h in self.handles:
            h.stop()
        for t in self.threads:
            t.join(5)
        warnings = [
            f"rank {r} of attempt {self.attempt}: its log could not be read to the end ({why}); "
            + ("what was read is kept" if self.lines.get(r) else "it is not kept")
            for r, why in sorted(self.errors.items())
        ]
        if not any(self.lines.values()):
            return warnings
        try:
            self.api.create("ConfigMap", kept_object(self.run, self.attempt, self.lines, record))
        except KubeError as e:
            if e.status == 409:  # a stop that was retried kept it already
                return warnings
            warnings.append(f"the log of attempt {self.attempt} could not be kept: {e.message}")
        return warnings


class FollowedLog:
    """What a follow (`run --follow`, `logs -f`) read of an attempt, each rank's last lines
    within a bound, kept when the JobSet controller's restart deletes the attempt's pods:
    without a log_store nothing else would keep them."""

    def __init__(self, api: KubeApi, run: str, attempt: int):
        self.api = api
        self.run = run
        self.attempt = attempt
        self.lines: dict[int, collections.deque[str]] = {}
        self.size: dict[int, int] = {}

    def add(self, rank: int, stamp: int | None, text: str) -> None:
        line = f"{stamp if stamp is not None else '-'} {text}\n"
        kept = self.lines.setdefault(rank, collections.deque())
        kept.append(line)
        self.size[rank] = self.size.get(rank, 0) + len(line)
        # Each rank's last lines, as many as a stop reads and a few times what compresses into
        # KEPT_BYTES: a long run's follow never holds its whole log.
        while len(kept) > KEPT_TAIL_LINES or self.size[rank] > FOLLOWED_BYTES:
            self.size[rank] -= len(kept.popleft())

    def keep(self) -> None:
        """Keep what was read, where nothing kept this attempt yet; a reader who may not write
        ConfigMaps keeps nothing (the follow itself showed every line)."""
        if not self.lines:
            return
        try:
            record = self.api.get("ConfigMap", self.run)
            self.api.create(
                "ConfigMap", kept_object(self.run, self.attempt, {r: list(v) for r, v in self.lines.items()}, record)
            )
        except LauncherError:
            return


def kept_object(run: str, attempt: int, lines: dict[int, list[str]], record: dict | None) -> dict:
    """The ConfigMap that keeps a stopped attempt's log: each rank's last lines that fit in
    its share of KEPT_BYTES, gzipped; owned by the record where there is one."""
    share = KEPT_BYTES // max(1, len(lines))
    data: dict[str, str] = {}
    dropped: dict[str, str] = {}
    for rank, rank_lines in sorted(lines.items()):
        blob, cut = fit(rank_lines, share)
        data[_key(rank)] = base64.b64encode(blob).decode()
        if len(rank_lines) >= KEPT_TAIL_LINES:  # the stop read its last lines only
            dropped[str(rank)] = "the earlier lines"
        elif cut:
            dropped[str(rank)] = f"{cut} earlier lines"
    meta: dict = {
        "name": kept_name(run, attempt),
        "labels": {keys.LOGS_OF: run, keys.ATTEMPT: str(attempt)},
        "annotations": {DROPPED: json.dumps(dropped)} if dropped else {},
    }
    if record is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": run, "uid": record["metadata"]["uid"]}
        ]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "binaryData": data}


def fit(lines: list[str], budget: int) -> tuple[bytes, int]:
    """The gzip of the last of `lines` that fit in `budget` bytes, and how many were cut."""
    cut = 0
    blob = gzip.compress("".join(lines).encode(), mtime=0)
    while len(blob) > budget and cut < len(lines):
        left = len(lines) - cut
        cut = len(lines) - min(left - 1, int(left * budget / len(blob) * 0.95))
        blob = gzip.compress("".join(lines[cut:]).encode(), mtime=0)
    return blob, cut


def scheduled_pods(pods: list[dict], attempt: int) -> list[dict]:
    """The attempt's pods on a node: their container runs, or is about to (an unscheduled pod
    never has a log)."""
    return [p for p in pods if attempt_of(p) == attempt and (p.get("spec") or {}).get("nodeName")]
