"""`launcher data convert`: text -> tokens -> concatenated samples -> MDS, published as
OUT/<split>/index.json + shards + launcher_dataset.json (see launcher.data.format)."""

from __future__ import annotations

import itertools
import json
import os
import time
from dataclasses import dataclass

from launcher.data.documents import expand_inputs, iter_batches
from launcher.data.format import SIDECAR_NAME, make_sidecar
from launcher.data.pool import Counts, Job, Progress, run_pool, run_single
from launcher.data.remote import INDEX_NAME, destination
from launcher.data.tokenizer import EOS_TOKEN, TRAIN_EXTRA, load_tokenizer
from launcher.data.writer import DEFAULT_SHARD_SIZE, quiet_streaming_logs
from launcher.errors import InputError, file_boundary, open_file_limit

ENGINES = ("local", "spark")
BATCH_DOCS = 1024
BATCH_BYTES = 1 << 20  # ~0.3 s of tokenizing: fine-grained enough to balance workers


@dataclass(frozen=True)
class ConvertSummary:
    documents: int
    tokens: int  # every token of the stream, separators included
    samples: int
    shards: int
    bytes: int  # of shard files
    seconds: float
    remote: str  # the value for a run spec's data.remote
    split: str
    url: str  # where the split is: remote/<split>
    seq_len: int
    dtype: str
    vocab_size: int
    dropped_tokens: int  # the final remainder, fewer than seq_len per stream
    text_bytes: int
    notes: tuple[str, ...] = ()

    @property
    def remote_line(self) -> str:
        """One YAML line for the run spec."""
        return f"data: {{remote: {_yaml_scalar(self.remote)}}}"

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def _yaml_scalar(value: str) -> str:
    import yaml

    return yaml.safe_dump(value, default_flow_style=True, width=1 << 16).splitlines()[0]


def _compression(value: str | None) -> str | None:
    if value in (None, "", "none"):
        return None
    from streaming.base.compression import get_compressions, is_compression

    if not is_compression(value):
        raise InputError(f"--compression {value!r} is not one of: none, {', '.join(sorted(get_compressions()))}")
    return value


# Workers tokenize on the CPU: past a few per core they only compete. Each one holds
# about 4 descriptors open in this process (its queue's pipe, its sentinel); 8 leaves room.
WORKERS_PER_CORE = 4
FILES_PER_WORKER = 8
FILES_RESERVED = 64  # the inputs, the shards being written, the tokenizer, the libraries


def max_workers() -> tuple[int, str]:
    """The most --workers this machine takes, and why, in words."""
    cores = os.cpu_count() or 1
    by_cores = WORKERS_PER_CORE * cores
    limit = open_file_limit()
    by_files = max(1, (limit - FILES_RESERVED) // FILES_PER_WORKER)
    if by_files < by_cores:
        return by_files, f"the open-file limit (ulimit -n) is {limit}, {FILES_PER_WORKER} per worker"
    return by_cores, f"{WORKERS_PER_CORE} per CPU core, {cores} cores"


def check_workers(workers: int) -> None:
    """--workers past what this machine runs is refused at once, not after the workers
    have started and the last of them failed with "Too many open files"."""
    cap, why = max_workers()
    if workers > cap:
        raise InputError(
            f"--workers {workers} is more than this machine runs: at most {cap} ({why})",
            hint=f"use --workers {cap} or fewer",
        )


def _check_args(concat_tokens: int, workers: int, engine: str, split: str) -> None:
    if concat_tokens < 1:
        raise InputError(f"--concat-tokens must be at least 1, got {concat_tokens}")
    if workers < 1:
        raise InputError(f"--workers must be at least 1, got {workers}")
    check_workers(workers)
    if engine not in ENGINES:
        raise InputError(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if not split or "/" in split or split.startswith("."):
        raise InputError(f"--split must be a plain name such as train or val, got {split!r}")


def _separator_notes(tokenizer, eos_text: str, bos_text: str) -> list[str]:
    from launcher.data.concat import text_ids

    notes = []
    for flag, text in (("--eos-text", eos_text), ("--bos-text", bos_text)):
        if text and len(text_ids(tokenizer, text)) != 1:
            notes.append(
                f"{flag} {text!r} is {len(text_ids(tokenizer, text))} tokens for this tokenizer, not one special token"
            )
    if not eos_text and not bos_text:
        notes.append("no --eos-text or --bos-text: documents run into each other")
    return notes


def _merge(stage: str, partitions: list[str]) -> None:
    from streaming.base.util import merge_index

    with quiet_streaming_logs():
        merge_index([os.path.join(stage, p, INDEX_NAME) for p in partitions], stage, keep_local=True)


def _require_streaming() -> None:
    try:
        import streaming  # noqa: F401
    except ImportError as e:
        raise InputError(f"data convert {TRAIN_EXTRA} ({e.name} is missing)") from None


def convert(
    inputs: list[str],
    out: str,
    tokenizer: str,
    concat_tokens: int,
    *,
    text_column: str = "text",
    eos_text: str = EOS_TOKEN,
    bos_text: str = "",
    split: str = "train",
    compression: str | None = "zstd",
    workers: int = 1,
    engine: str = "local",
    overwrite: bool = False,
    shard_size: int = DEFAULT_SHARD_SIZE,
    batch_docs: int = BATCH_DOCS,
    batch_bytes: int = BATCH_BYTES,
    progress: Progress | None = None,
) -> ConvertSummary:
    """Convert text inputs into a tokenized MDS split at OUT/<split>. Raises InputError for
    bad input (nothing published), LauncherError when the conversion fails."""
    _check_args(concat_tokens, workers, engine, split)
    _require_streaming()
    compression = _compression(compression)
    dest = destination(out, split, overwrite)
    files = expand_inputs(inputs) if engine == "local" else []
    dest.preflight()  # credentials and an existing dataset fail here, in seconds
    tok = load_tokenizer(tokenizer)
    notes = _separator_notes(tok, eos_text, bos_text)
    job = Job(tok, concat_tokens, eos_text, bos_text, compression, shard_size)
    started = time.monotonic()  # the conversion itself: not imports, not the tokenizer's loading
    stage = dest.open()
    progress = progress or Progress()
    try:
        with file_boundary(stage, "write"):  # a full disk, named: the shards are written there first
            if engine == "spark":
                counts = _run_spark(inputs, dest, job, text_column, workers)
            else:
                counts = _run_local(files, dest, job, text_column, split, workers, (batch_docs, batch_bytes), progress)
        if counts.samples == 0:
            raise InputError(
                f"the inputs make {counts.tokens:,} tokens, fewer than --concat-tokens {concat_tokens}: no sample to write"
            )
        sidecar = make_sidecar(
            dtype=job_dtype(job),
            seq_len=concat_tokens,
            vocab_size=len(tok),
            tokenizer=tokenizer,
            samples=counts.samples,
            tokens=counts.samples * concat_tokens,
            documents=counts.documents,
            eos_text=eos_text,
            bos_text=bos_text,
            input_tokens=counts.tokens,
            dropped_tokens=counts.dropped_tokens,
            text_bytes=counts.text_bytes,
            workers=workers,
            engine=engine,
        )
        with open(os.path.join(stage, SIDECAR_NAME), "w") as f:
            json.dump(sidecar, f, indent=2, sort_keys=True)
            f.write("\n")
        dest.publish()
    except BaseException:
        dest.abort()
        raise
    finally:
        close = getattr(progress, "close", None)
        if close:
            close()
        dest.close()
    return ConvertSummary(
        documents=counts.documents,
        tokens=counts.tokens,
        samples=counts.samples,
        shards=counts.shards,
        bytes=counts.shard_bytes,
        seconds=time.monotonic() - started,
        remote=dest.spec_remote,
        split=split,
        url=dest.url,
        seq_len=concat_tokens,
        dtype=job_dtype(job),
        vocab_size=len(tok),
        dropped_tokens=counts.dropped_tokens,
        text_bytes=counts.text_bytes,
        notes=tuple(notes),
    )


def job_dtype(job: Job) -> str:
    from launcher.data.format import narrowest_dtype

    return narrowest_dtype(len(job.tokenizer))


def _run_local(
    files, dest, job: Job, text_column: str, split: str, workers: int, batching: tuple[int, int], progress
) -> Counts:
    batches = iter_batches(files, text_column, batching[0], split, batching[1])
    first = next(batches, None)  # reading errors and an empty input surface before any fork
    if first is None:
        raise InputError(f"no documents in {', '.join(f.url for f in files)}")
    batches = itertools.chain([first], batches)
    if workers == 1:
        return run_single(job, batches, dest.stage, dest.shard_done, progress)
    counts, partitions = run_pool(job, workers, batches, dest.stage, dest.shard_done, progress)
    _merge(dest.stage, partitions)
    return counts


def _run_spark(inputs: list[str], dest, job: Job, text_column: str, workers: int) -> Counts:
    from launcher.data.remote import LocalDestination
    from launcher.data.spark import run_spark

    mds_out = dest.stage if isinstance(dest, LocalDestination) else (dest.stage, dest.url)
    result = run_spark(
        inputs,
        mds_out,
        tokenizer=job.tokenizer,
        seq_len=job.seq_len,
        text_column=text_column,
        eos_text=job.eos_text,
        bos_text=job.bos_text,
        compression=job.compression,
        shard_size=job.shard_size,
        workers=workers,
    )
    return Counts(
        documents=result.documents,
        tokens=result.samples * job.seq_len,  # Spark does not report the dropped remainders
        samples=result.samples,
        shards=result.shards,
        shard_bytes=result.shard_bytes,
    )
