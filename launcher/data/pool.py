"""The local engine: read in this process, tokenize and write in N worker processes.

Batch i of the document stream goes to worker i % N, which keeps its own remainder buffer
and writes its own MDS partition <split>/<i>/. When the input ends, each worker hands back
its remainder (< seq_len tokens); these are joined in worker order and cut into the last
samples, in partition <split>/<N>/. So exactly total_tokens // seq_len samples come out,
whatever N, and the output depends only on the input order and N.
With N = 1 everything runs in this process and the dataset is flat.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from launcher.data.concat import BatchEncoder, TokenConcatenator, cut
from launcher.data.documents import TextBatch
from launcher.data.format import narrowest_dtype, numpy_dtype
from launcher.data.writer import PartitionWriter
from launcher.errors import FILESYSTEM_ERRNOS, FileSystemError, LauncherError

if TYPE_CHECKING:
    from transformers.tokenization_utils_fast import PreTrainedTokenizerFast

QUEUE_DEPTH = 4  # batches in flight per worker: enough to hide reading, bounded memory
POLL_SECONDS = 0.1


@dataclass(frozen=True)
class Job:
    """What every writer needs; inherited by forked workers, never pickled."""

    tokenizer: PreTrainedTokenizerFast
    seq_len: int
    eos_text: str
    bos_text: str
    compression: str | None
    shard_size: int

    @property
    def np_dtype(self):
        return numpy_dtype(narrowest_dtype(len(self.tokenizer)))


@dataclass
class Counts:
    documents: int = 0
    tokens: int = 0
    text_bytes: int = 0
    samples: int = 0
    shards: int = 0
    shard_bytes: int = 0
    dropped_tokens: int = 0


class Progress:
    """Receives running totals; the CLI's rich display implements it."""

    def update(self, documents: int, tokens: int, text_bytes: int) -> None:
        pass


def _writer(job: Job, stage: str, prefix: str, on_shard: Callable[[str], None]) -> PartitionWriter:
    local = os.path.join(stage, prefix) if prefix else stage
    return PartitionWriter(local, prefix, compression=job.compression, shard_size=job.shard_size, on_shard=on_shard)


def _concatenator(job: Job) -> TokenConcatenator:
    return TokenConcatenator(job.tokenizer, job.seq_len, eos_text=job.eos_text, bos_text=job.bos_text)


def run_single(job: Job, batches: Iterator[TextBatch], stage: str, on_shard, progress: Progress) -> Counts:
    concat = _concatenator(job)
    writer = _writer(job, stage, "", on_shard)
    counts = Counts()
    for batch in batches:
        writer.write(concat.feed(batch.texts))
        counts.text_bytes += batch.nbytes
        progress.update(concat.documents, concat.tokens, counts.text_bytes)
    counts.shards = writer.finish()
    counts.documents, counts.tokens, counts.samples = concat.documents, concat.tokens, writer.samples
    counts.shard_bytes = writer.shard_bytes()
    counts.dropped_tokens = len(concat.take_remainder())
    return counts


# ---- worker processes ---------------------------------------------------------------------


def _worker_main(index: int, job: Job, stage: str, inbox: mp.Queue, outbox: mp.Queue) -> None:
    try:
        concat = _concatenator(job)
        writer = _writer(job, stage, str(index), lambda rel: outbox.put(("shard", index, rel)))
        while True:
            item = inbox.get()
            if item is None:
                break
            texts, nbytes = item
            before = concat.tokens
            writer.write(concat.feed(texts))
            outbox.put(("progress", index, len(texts), concat.tokens - before, nbytes))
        shards = writer.finish()
        rest = concat.take_remainder()
        outbox.put(
            (
                "done",
                index,
                (concat.documents, concat.tokens, writer.samples, shards, writer.shard_bytes(), rest.tobytes()),
            )
        )
    except LauncherError as e:
        outbox.put(("error", index, (e.exit_code, e.message)))
    except OSError as e:
        if e.errno not in FILESYSTEM_ERRNOS:
            outbox.put(("error", index, (1, f"worker {index}: {type(e).__name__}: {e}")))
        else:  # a full disk: in the words of the filesystem boundary, naming where it wrote
            error = FileSystemError.of(e, stage, "write")
            outbox.put(("error", index, (error.exit_code, error.message)))
    except BaseException as e:  # noqa: BLE001 - report anything to the parent, then exit
        if os.environ.get("LAUNCHER_DEBUG", "") not in ("", "0", "false"):
            traceback.print_exc()
        outbox.put(("error", index, (1, f"worker {index}: {type(e).__name__}: {e}")))


class _Pool:
    def __init__(self, job: Job, workers: int, stage: str, on_shard, progress: Progress):
        # fork: workers inherit the loaded tokenizer and imports (spawn would re-import
        # torch-heavy streaming in each worker). They start before the progress display's
        # and the uploads' threads exist.
        ctx = mp.get_context("fork")
        # Which encoder the tokenizer gets is decided once, here (launcher.data.tiktoken_bpe
        # caches it per process): the workers inherit it rather than each checking again.
        BatchEncoder(job.tokenizer)
        self.n = workers
        self.on_shard = on_shard
        self.progress = progress
        self.inboxes = [ctx.Queue(QUEUE_DEPTH) for _ in range(workers)]
        self.outbox = ctx.Queue()
        self.procs = [
            ctx.Process(target=_worker_main, args=(i, job, stage, self.inboxes[i], self.outbox), daemon=True)
            for i in range(workers)
        ]
        # Workers tokenize single-threaded (N processes share the cores). Setting the variable
        # across the fork also keeps tokenizers from warning about forking after parallelism.
        saved = os.environ.get("TOKENIZERS_PARALLELISM")
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
        try:
            for p in self.procs:
                p.start()
        finally:
            if saved is None:
                del os.environ["TOKENIZERS_PARALLELISM"]
            else:
                os.environ["TOKENIZERS_PARALLELISM"] = saved
        self.documents = self.tokens = self.text_bytes = 0
        self.done_documents = self.done_bytes = 0
        self.results: dict[int, tuple] = {}

    def _handle(self, msg: tuple) -> None:
        kind, index, payload = msg[0], msg[1], msg[2:]
        if kind == "shard":
            self.on_shard(payload[0])
        elif kind == "progress":  # processed, not just sent: what the display shows
            self.done_documents += payload[0]
            self.tokens += payload[1]
            self.done_bytes += payload[2]
            self.progress.update(self.done_documents, self.tokens, self.done_bytes)
        elif kind == "done":
            self.results[index] = payload[0]
        elif kind == "error":
            code, message = payload[0]
            raise LauncherError(message, exit_code=code)

    def pump(self, block: bool = False) -> None:
        """Handle worker messages; notice a worker that died without a word."""
        try:
            self._handle(self.outbox.get(timeout=POLL_SECONDS) if block else self.outbox.get_nowait())
            while True:
                self._handle(self.outbox.get_nowait())
        except queue.Empty:
            pass
        for i, p in enumerate(self.procs):
            if i not in self.results and p.exitcode is not None and self.outbox.empty():
                raise LauncherError(f"worker {i} died (exit code {p.exitcode}); is the machine out of memory?")

    def send(self, i: int, batch: TextBatch) -> None:
        box = self.inboxes[i % self.n]
        while True:
            try:
                box.put((batch.texts, batch.nbytes), timeout=POLL_SECONDS)
                break
            except queue.Full:
                self.pump()
        self.documents += len(batch.texts)
        self.text_bytes += batch.nbytes
        self.pump()

    def finish(self) -> list[tuple]:
        for box in self.inboxes:
            box.put(None)
        while len(self.results) < self.n:
            self.pump(block=True)
        for p in self.procs:
            p.join()
        return [self.results[i] for i in range(self.n)]

    def kill(self) -> None:
        for p in self.procs:
            if p.exitcode is None:
                p.terminate()
        for p in self.procs:
            p.join(timeout=5)
        # Batches still buffered for dead workers must not keep this process from exiting.
        for box in [*self.inboxes, self.outbox]:
            box.cancel_join_thread()
            box.close()


def run_pool(
    job: Job, workers: int, batches: Iterator[TextBatch], stage: str, on_shard, progress: Progress
) -> tuple[Counts, list[str]]:
    """Returns the counts and the partition directories, in merge order."""
    pool = _Pool(job, workers, stage, on_shard, progress)
    try:
        for i, batch in enumerate(batches):
            pool.send(i, batch)
        results = pool.finish()
    except BaseException:
        pool.kill()
        raise
    counts = Counts(documents=pool.documents, text_bytes=pool.text_bytes)
    partitions = [str(i) for i in range(workers)]
    rests = []
    for _documents, tokens, samples, shards, shard_bytes, rest in results:
        counts.tokens += tokens
        counts.samples += samples
        counts.shards += shards
        counts.shard_bytes += shard_bytes
        rests.append(np.frombuffer(rest, dtype=job.np_dtype))
    # The workers' remainders, joined in worker order, make the last samples.
    tail, dropped = cut(np.concatenate(rests), job.seq_len)
    counts.dropped_tokens = len(dropped)
    if len(tail):
        writer = _writer(job, stage, str(workers), on_shard)
        writer.write(tail)
        counts.shards += writer.finish()
        counts.samples += writer.samples
        counts.shard_bytes += writer.shard_bytes()
        partitions.append(str(workers))
    return counts, partitions
