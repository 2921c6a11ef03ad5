"""Why a rank failed, told from what it left: its exit code, the reason its backend gives
(a pod's `OOMKilled`, a node condition, an eviction) and the last lines of its log.

One pure function, `classify`, used on the host (the local supervisor, over a rank's exit
file and log tail; Kubernetes, over a pod's termination) and by the entrypoint, which also
keeps the first evidence line of each class as the command's output streams past
(`Evidence`), so a line that scrolled out of the tail still counts. Standard library only:
the entrypoint runs it on any Python 3.8 (launcher.pod.zipapp).

The classes, most telling first (a bad GPU makes the other ranks' collectives time out, so
`hardware` outranks `collective` when both are seen):

  hardware    an NVIDIA Xid that means the device or node is bad (48 double-bit ECC, 79 fallen
              off the bus, 94/95 contained/uncontained ECC), an uncorrectable ECC error, a device
              that vanished; on Kubernetes a node condition or taint that says so; a rank that
              stayed a straggler past its grace (contract.EXIT_STRAGGLER,
              EXIT_STRAGGLER_PEER)
  oom         the kernel's OOM killer (exit 137 with its note, a pod's OOMKilled) or
              `torch.OutOfMemoryError: CUDA out of memory`
  collective  an NCCL or gloo timeout or abort (`Watchdog caught collective operation timeout`)
  hang        the entrypoint saw no progress for resilience.hang_timeout (contract.EXIT_HANG)

The entrypoint's own exit code for a class (contract.SYSTEM_EXIT_CODES) tells it where nothing
else does (a pod gone with its termination message).
  preempted   the cluster took the node back (a spot reclaim, a higher-priority pod)
  evicted     the node or the queue evicted the pod
  user        anything else: the program's own failure

How each class is retried is launcher.spec.retry's (`retry_class`).
"""

from __future__ import annotations

import re
from typing import Iterable, NamedTuple

from launcher.pod.contract import EXIT_COLLECTIVE, EXIT_HANG, EXIT_HARDWARE, EXIT_STRAGGLER, EXIT_STRAGGLER_PEER

HARDWARE = "hardware"
OOM = "oom"
COLLECTIVE = "collective"
HANG = "hang"
PREEMPTED = "preempted"
EVICTED = "evicted"
USER = "user"
CLASSES = (HARDWARE, OOM, COLLECTIVE, HANG, PREEMPTED, EVICTED, USER)
"""Most telling first: where a rank's lines show several, the first of these is its class."""


MAX_EVIDENCE = 300
"""An evidence line is cut to this many characters (it is shown in one line of describe)."""

# The log lines that tell each class, each with a literal that every match holds. The
# command's output is searched as it streams: a literal's `in` test over a chunk runs at
# memory speed, and only a chunk that holds one is searched with that pattern (one regex of
# every alternative would be hundreds of times slower: bench/bench_watch.py).
_LINE_PATTERNS = {
    HARDWARE: (
        (b"Xid", rb"NVRM: Xid \([^)]*\): (?:48|79|94|95)\b"),
        (b"Xid", rb"\bXid (?:48|79|94|95)\b"),
        (b"ECC", rb"[Uu]ncorrectable ECC error"),
        (b"ECC", rb"[Dd]ouble[- ][Bb]it ECC"),
        (b"fallen off the bus", rb"GPU has fallen off the bus"),
        (b"device handle", rb"Unable to determine the device handle for GPU"),
    ),
    OOM: (
        (b"out of memory", rb"CUDA out of memory"),
        (b"OutOfMemoryError", rb"OutOfMemoryError"),
        (b"Out of memory", rb"Out of memory: Killed process"),
        (b"oom-kill", rb"\boom-kill(?:er)?\b"),
        (b"OOMKilled", rb"OOMKilled"),
    ),
    COLLECTIVE: (
        (b"Watchdog", rb"Watchdog caught collective operation timeout"),
        (b"NCCL", rb"NCCL communicator was aborted"),
        (b"nccl", rb"nccl(?:SystemError|RemoteError|InternalError|UnhandledCudaError)"),
        (b"NCCL", rb"NCCL (?:error|WARN)[^\n]*(?:[Tt]imeout|timed out|[Aa]bort)"),
        (b"NCCL", rb"ProcessGroupNCCL[^\n]*(?:[Tt]imeout|timed out|[Aa]bort)"),
        (b"loo", rb"[Gg]loo[^\n]*(?:[Tt]imed out|[Tt]imeout|Connection closed by peer|Connection reset by peer)"),
        (b"DistBackendError", rb"DistBackendError"),
    ),
}
_SEARCHES = [
    (kind, needle, re.compile(pattern)) for kind, patterns in _LINE_PATTERNS.items() for needle, pattern in patterns
]
_NEEDLES = sorted({needle for _, needle, _ in _SEARCHES})


def matches(data: bytes):
    """(class, match) for every evidence line in `data`, class by class."""
    present = {needle for needle in _NEEDLES if needle in data}
    if not present:
        return
    for kind, needle, pattern in _SEARCHES:
        if needle in present:
            for m in pattern.finditer(data):
                yield kind, m


# What a backend's reason says (a pod's termination reason, a node condition, an event).
_REASON_PATTERNS = (
    (HARDWARE, re.compile(r"\bXid\b|\bECC\b|GPU (?:lost|unhealthy|fallen)|[Hh]ardware|gpu-unhealthy", re.I)),
    (OOM, re.compile(r"OOMKilled|out of memory|\bOOM\b", re.I)),
    (PREEMPTED, re.compile(r"[Pp]reempt|spot (?:instance )?(?:reclaim|interrupt)|DisruptionTarget")),
    (EVICTED, re.compile(r"[Ee]vict")),
)


_NAMED = re.compile(r"^(" + "|".join(CLASSES) + r"): ")


class Failure(NamedTuple):
    kind: str
    """One of CLASSES."""
    evidence: str | None
    """The line (masked where it came from a log, at most MAX_EVIDENCE characters) that says so."""


def bounded(line: str) -> str:
    line = " ".join(line.split())  # one line, whatever control characters it held
    return line if len(line) <= MAX_EVIDENCE else line[: MAX_EVIDENCE - 1] + "…"


def line_class(line: str | bytes) -> str | None:
    """The class a log line is evidence of, if any (the first of _LINE_PATTERNS' classes)."""
    data = line if isinstance(line, bytes) else line.encode("utf-8", "replace")
    return next((kind for kind, _ in matches(data)), None)


def _device_oom(line: str) -> bool:
    return "CUDA out of memory" in line or "OutOfMemoryError" in line


_EXIT_CODE_CLASS = {
    EXIT_HANG: HANG,
    EXIT_HARDWARE: HARDWARE,
    EXIT_COLLECTIVE: COLLECTIVE,
    EXIT_STRAGGLER: HARDWARE,
    EXIT_STRAGGLER_PEER: HARDWARE,
}


def classify(exit_code: int | None, reason: str | None, lines: Iterable[str]) -> Failure:
    """How a rank that ended with `exit_code` failed. The backend's `reason` first (a node
    condition, a pod's OOMKilled outrank what the program printed), then the lines (the
    first of each class counts, the most telling class wins), then the exit code. The OOM
    killer's note counts only for a rank that was killed (137); CUDA's, always."""
    found: dict[str, str] = {}
    for line in lines:
        kind = line_class(line)
        if kind == OOM and not _device_oom(line) and exit_code not in (137, None):
            continue
        if kind and kind not in found:
            found[kind] = bounded(line)
    if reason:
        # The entrypoint's own verdicts (a hang, the health gate) start with their class.
        named = _NAMED.match(reason)
        if named:
            return Failure(named.group(1), bounded(reason))
        for kind, pattern in _REASON_PATTERNS:
            if pattern.search(reason):
                # The log's own line says more than the reason's word for it.
                return Failure(kind, found.get(kind) or bounded(reason))
    for kind in (HARDWARE, OOM, COLLECTIVE):
        if kind in found:
            return Failure(kind, found[kind])
    told = _EXIT_CODE_CLASS.get(exit_code) if exit_code is not None else None
    if told:  # the entrypoint's own code for the class (contract.SYSTEM_EXIT_CODES)
        return Failure(told, bounded(reason) if reason else None)
    return Failure(USER, bounded(reason) if reason else None)


SECONDHAND = "another rank's"
"""In a rank's evidence: it failed because it learned of another rank's failure (the health
gate tells every rank), so the rank that failed first-hand tells more."""


def most_telling(failures: Iterable[Failure]) -> Failure | None:
    """Of several ranks' failures, the one whose class comes first in CLASSES, first-hand
    evidence before SECONDHAND."""
    ranked = sorted(
        failures,
        key=lambda f: (
            CLASSES.index(f.kind) if f.kind in CLASSES else len(CLASSES),
            SECONDHAND in (f.evidence or ""),
        ),
    )
    return ranked[0] if ranked else None


class Evidence:
    """The first line of each class seen in a stream of output, kept as it streams past
    (chunks of bytes; a line split across chunks is joined before it is searched)."""

    MAX_CARRY = 64 * 1024

    def __init__(self) -> None:
        self.lines: dict[str, str] = {}
        self._carry = b""

    def feed(self, chunk: bytes) -> None:
        data = self._carry + chunk
        cut = data.rfind(b"\n")
        self._carry = data[cut + 1 :][-self.MAX_CARRY :] if cut >= 0 else data[-self.MAX_CARRY :]
        whole = data[: cut + 1] if cut >= 0 else b""
        if whole:
            self._search(whole)

    def close(self) -> None:
        if self._carry:
            self._search(self._carry)
            self._carry = b""

    def _search(self, data: bytes) -> None:
        if len(self.lines) == len(_LINE_PATTERNS):
            return  # every class has its first line
        first: dict[str, re.Match] = {}
        for kind, m in matches(data):
            if kind not in self.lines and (kind not in first or m.start() < first[kind].start()):
                first[kind] = m
        for kind, m in first.items():
            start = data.rfind(b"\n", 0, m.start()) + 1
            end = data.find(b"\n", m.end())
            line = data[start : end if end >= 0 else len(data)]
            self.lines[kind] = bounded(line.decode("utf-8", "replace"))
