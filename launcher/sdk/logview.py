"""What a reader of a run's logs chooses, on top of `Backend.logs`: which attempt (ours
counted from 1, mcli's resumption from 0), which node rank (mcli's --gpu and
--global-gpu-rank mapped onto the one log each node rank has), the trainer's metric
records hidden, the last N lines that remain, and the run's first Python traceback.

The CLI's `launcher logs`, the dashboard's log view and the SDK share these, so each
rule is written once and works alike on every backend.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from launcher.backends.base import LogLine, Run
from launcher.errors import InputError, LauncherError
from launcher.pod.contract import METRIC_PREFIX

# --- which attempt ----------------------------------------------------------------------


def chosen_attempt(
    run: Run, *, attempt: int | None = None, resumption: int | None = None, previous: bool = False
) -> int | None:
    """The attempt to read, counted from 1 (None: the latest). `attempt` counts from 1, as
    `launcher logs --attempt` always has; `resumption` counts from 0, as mcli's
    `--resumption` does (resumption 0 is attempt 1); `previous`, without either, is the one
    before the latest."""
    if resumption is not None:
        if resumption < 0:
            raise InputError(f"--resumption counts from 0, not {resumption}")
        if attempt is not None and attempt != resumption + 1:
            raise InputError(
                f"--attempt {attempt} and --resumption {resumption} name different attempts "
                f"(resumption {resumption} is attempt {resumption + 1}): give one"
            )
        attempt = resumption + 1
    if previous and attempt is None:  # a named attempt wins, as it always has
        if run.current_attempt <= 1:
            raise LauncherError(f"run {run.name} has no previous attempt: it has run once (attempt 1)")
        return run.current_attempt - 1
    return attempt


# --- which node rank ----------------------------------------------------------------------


def gpus_per_node(run: Run) -> int:
    """The GPUs each node rank of the run has (0 for a CPU run), from its spec."""
    gpus = int((run.spec.get("compute") or {}).get("gpus") or 0)
    return gpus // run.nodes if gpus else 0


@dataclass(frozen=True)
class RankChoice:
    rank: int | None
    """The node rank whose log to read; None: every rank."""
    note: str | None = None
    """What the reader should be told about the choice (a GPU rank read as its node's log)."""


def chosen_rank(
    run: Run, *, node_rank: int | None = None, gpu: int | None = None, global_gpu_rank: int | None = None
) -> RankChoice:
    """The node rank to read for mcli's --node-rank, --gpu (a GPU rank local to the node,
    node 0 by default) and --global-gpu-rank.

    A run has one log per node rank: what its entrypoint's command wrote. Where that
    command starts one process per GPU, GPU rank 0 of a node is the process whose output
    that log holds (the composer launcher passes local rank 0's output through and keeps
    the others' to print when one crashes; torchrun passes every local rank's through,
    unmarked). So local GPU rank 0 reads its node's log, and another GPU rank is an error
    that says so: there is no log of that GPU's own to show."""
    if gpu is None and global_gpu_rank is None:
        return RankChoice(node_rank)
    per_node = gpus_per_node(run)
    if per_node == 0:
        raise InputError(
            f"run {run.name} has no GPUs (compute.gpus is 0), so it has no GPU ranks: "
            f"its logs are one per node rank; pass --node-rank N (0..{run.nodes - 1})"
        )
    total = per_node * run.nodes
    if global_gpu_rank is not None:
        if global_gpu_rank >= total:
            raise InputError(
                f"run {run.name} has GPU ranks 0..{total - 1} "
                f"({run.nodes} node(s) of {per_node} GPUs), not {global_gpu_rank}"
            )
        node, local = divmod(global_gpu_rank, per_node)
        if node_rank is not None and node_rank != node:
            raise InputError(f"global GPU rank {global_gpu_rank} is on node rank {node}, not {node_rank}")
        if gpu is not None and gpu != local:
            raise InputError(f"global GPU rank {global_gpu_rank} is local GPU rank {local}, not {gpu}")
        what = f"global GPU rank {global_gpu_rank} (local GPU rank {local} of node rank {node})"
    else:
        assert gpu is not None
        node = node_rank or 0
        if node >= run.nodes:
            raise InputError(f"run {run.name} has node ranks 0..{run.nodes - 1}, not {node}")
        if gpu >= per_node:
            raise InputError(
                f"run {run.name} has {per_node} GPUs per node: local GPU ranks 0..{per_node - 1}, not {gpu}"
            )
        local = gpu
        what = f"local GPU rank {local} of node rank {node}"
    if local != 0:
        raise InputError(
            f"run {run.name} keeps one log per node rank, not one per GPU, so {what} has no log of its own: "
            f"node rank {node}'s log holds GPU rank 0's output (and every local rank's where the command "
            f"prints them all, as torchrun does; the composer launcher prints another rank's only when it crashes)",
            hint=f"launcher logs {run.name} --node-rank {node}",
        )
    return RankChoice(node, f"{what}: its output is node rank {node}'s log")


# --- the metrics channel -------------------------------------------------------------------


def is_metric_record(text: str) -> bool:
    """A trainer's metric record (launcher.metrics.records), whatever decorates the line."""
    return METRIC_PREFIX in text


def without_records(lines: Iterable[LogLine]) -> Iterator[LogLine]:
    """The lines a person reads: the trainer's metric records are the metrics channel
    (`launcher metrics` reads them), not log text."""
    return (line for line in lines if METRIC_PREFIX not in line.text)


def without_record_chunks(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """`without_records` for a log read as large byte chunks (cut anywhere): each chunk's
    whole lines go out with the record lines cut out; a cut line waits for the next chunk."""
    marker = METRIC_PREFIX.encode()
    carry = b""
    for chunk in chunks:
        data = carry + chunk if carry else chunk
        cut = data.rfind(b"\n") + 1
        whole, carry = (data, b"") if cut == len(data) else (data[:cut], data[cut:])
        if marker in whole:
            whole = _cut_record_lines(whole, marker)
        if whole:
            yield whole
    if carry and marker not in carry:
        yield carry


def _cut_record_lines(whole: bytes, marker: bytes) -> bytes:
    """Whole lines without those holding `marker`: a find per record, not a look at each
    line (records are a small part of a log)."""
    kept = []
    start = 0  # the start of a line: what is kept from here on is not cut yet
    at = whole.find(marker)
    while at >= 0:
        line = whole.rfind(b"\n", start, at) + 1 or start
        end = whole.find(b"\n", at) + 1  # whole lines: one ends every record
        kept.append(whole[start:line])
        start = end
        at = whole.find(marker, start)
    kept.append(whole[start:])
    return b"".join(kept)


def tail_lines(read: Callable[[int], Iterable[LogLine]], tail: int, *, raw: bool) -> tuple[list[LogLine], int]:
    """The last `tail` lines of each rank, records hidden unless `raw`, and how many of
    each rank's last lines had to be read for that (a follow can start from there).

    `read(n)` reads the last n lines of each rank. A backend's tail counts every line, so
    where records are hidden it is asked for more, four times as many each time, until
    each rank has `tail` lines left or its whole log was read."""
    asked = tail
    while True:
        got = list(read(asked))
        if raw or tail == 0:
            return _last_per_rank(got, tail), asked
        per_rank: dict[int, int] = {}
        for line in got:
            per_rank[line.rank] = per_rank.get(line.rank, 0) + 1
        shown = [line for line in got if METRIC_PREFIX not in line.text]
        left: dict[int, int] = {}
        for line in shown:
            left[line.rank] = left.get(line.rank, 0) + 1
        if all(left.get(r, 0) >= tail or n < asked for r, n in per_rank.items()):
            return _last_per_rank(shown, tail), asked
        asked *= 4


def _last_per_rank(lines: list[LogLine], tail: int) -> list[LogLine]:
    counts: dict[int, int] = {}
    for line in lines:
        counts[line.rank] = counts.get(line.rank, 0) + 1
    out = []
    for line in lines:
        if counts[line.rank] <= tail:
            out.append(line)
        else:
            counts[line.rank] -= 1
    return out


# --- the first exception -------------------------------------------------------------------

_TRACEBACK = "Traceback (most recent call last):"
_CHAINED = (
    "The above exception was the direct cause of the following exception:",
    "During handling of the above exception, another exception occurred:",
)


@dataclass
class Traceback:
    """One Python traceback a rank printed: from its `Traceback (most recent call last):`
    line through to the exception line, with the tracebacks chained before it."""

    rank: int
    attempt: int
    lines: list[LogLine] = field(default_factory=list)
    position: int = 0
    """Where it began among the lines read (the order of a rank's log)."""
    prefix: str = ""
    """What stood before `Traceback` on each of its lines (a rank tag some launchers add)."""

    @property
    def started(self) -> datetime | None:
        return self.lines[0].timestamp if self.lines else None

    @property
    def exception(self) -> str:
        """The exception line, e.g. `ValueError: boom`."""
        return self.lines[-1].text[len(self.prefix) :].strip() if self.lines else ""


class _RankParser:
    """The traceback being read in one rank's lines. A line belongs to it when it starts
    with what stood before `Traceback` on its first line (a rank tag some launchers add)."""

    def __init__(self, rank: int, attempt: int):
        self.rank, self.attempt = rank, attempt
        self.block: Traceback | None = None
        self.prefix = ""
        self.state = "idle"  # frames | done (the exception line seen) | chained (waiting for the next Traceback)
        self.held: list[LogLine] = []

    def feed(self, line: LogLine, position: int) -> Iterator[Traceback]:
        text = line.text
        if self.state != "idle":
            if not text.startswith(self.prefix):
                return  # another process's output between the traceback's lines
            body = text[len(self.prefix) :]
            if self.state == "frames":
                assert self.block is not None
                self.block.lines.append(line)
                if body and not body[0].isspace() and not body.startswith(_TRACEBACK):
                    self.state = "done"
                return
            if body.strip() == "" or body.strip() in _CHAINED:
                self.held.append(line)
                if body.strip() in _CHAINED:
                    self.state = "chained"
                return
            if self.state == "chained" and body.startswith(_TRACEBACK):
                assert self.block is not None
                self.block.lines += [*self.held, line]
                self.held, self.state = [], "frames"
                return
            yield from self.finish()
        at = text.find(_TRACEBACK)
        if at >= 0 and text[at:].rstrip() == _TRACEBACK:
            self.prefix, self.state = text[:at], "frames"
            self.block = Traceback(self.rank, self.attempt, [line], position, self.prefix)

    def finish(self) -> Iterator[Traceback]:
        if self.block is not None and len(self.block.lines) > 1:
            yield self.block
        self.block, self.state, self.held = None, "idle", []


def tracebacks(lines: Iterable[LogLine]) -> Iterator[Traceback]:
    """Every Python traceback in the lines (ranks may be interleaved), as each is complete."""
    parsers: dict[int, _RankParser] = {}
    for n, line in enumerate(lines):
        parser = parsers.get(line.rank)
        if parser is None:
            parser = parsers[line.rank] = _RankParser(line.rank, line.attempt)
        yield from parser.feed(line, n)
    for parser in parsers.values():
        yield from parser.finish()


@dataclass(frozen=True)
class FirstException:
    traceback: Traceback | None
    by_time: bool
    """True: the earliest by the log lines' timestamps (Kubernetes pod logs carry them).
    False: some line had none (a local run's log files), so the first in rank order, and
    within a rank the first written."""


def first_exception(lines: Iterable[LogLine]) -> FirstException:
    """The first Python traceback of the ranks' lines: the earliest by time where every
    traceback's first line has a timestamp, else the lowest rank's first."""
    found = list(tracebacks(lines))
    if not found:
        return FirstException(None, by_time=False)
    if all(t.started is not None for t in found):
        return FirstException(min(found, key=lambda t: (t.started, t.rank, t.position)), by_time=True)
    return FirstException(min(found, key=lambda t: (t.rank, t.position)), by_time=False)
