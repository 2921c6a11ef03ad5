"""--engine spark: streaming's own dataframe_to_mds, with our tokenize-and-concatenate step
as its UDF, for data that outgrows one machine.

Each Spark task keeps one remainder buffer across the pandas batches of its partition, so
only the last < seq_len tokens of each partition are dropped. Streaming merges the
partitions' indexes itself and, for a remote --out, uploads index.json at the end; the
sidecar follows it (the trainer refuses a split without its sidecar).
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import pickle
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from launcher.data.concat import TokenConcatenator
from launcher.data.documents import kind_of
from launcher.data.format import MDS_COLUMNS, TOKENS_COLUMN
from launcher.data.writer import quiet_streaming_logs
from launcher.errors import InputError, LauncherError

SPARK_EXTRA = "--engine spark needs pyspark: pip install 'launcher[spark]'"
SPARK_READERS = {"jsonl": "json", "parquet": "parquet", "csv": "csv", "text": "text"}
# Arrow hands the UDF up to 10,000 records at once (tens of MB of text): tokenizing that in
# one call holds every document's Encoding in memory and runs slower than ~1 MB pieces.
FEED_CHARS = 1 << 20


class TokenizeConcatUDF:
    """dataframe_to_mds's udf_iterable: pandas DataFrame -> {"tokens": bytes} samples.

    Spark unpickles one instance per task, so its buffer spans the task's batches. The
    tokenizer travels as its own pickle, which a reused Python worker (Spark's default)
    unpickles only at its first task: see _task_concatenator."""

    def __init__(self, tokenizer, seq_len: int, text_column: str, eos_text: str, bos_text: str):
        self.tokenizer_pickle = pickle.dumps(tokenizer)
        self.seq_len = seq_len
        self.text_column = text_column
        self.eos_text = eos_text
        self.bos_text = bos_text
        self._concat: TokenConcatenator | None = None

    def __call__(self, pdf) -> Iterator[dict]:
        if self._concat is None:
            self._concat = _task_concatenator(self)
        texts = pdf[self.text_column]
        if texts.isna().any():
            raise ValueError(f"a record has no {self.text_column!r} value")
        texts = texts.astype(str).tolist()
        for piece in _pieces(texts, FEED_CHARS):
            for row in self._concat.feed(piece):
                yield {TOKENS_COLUMN: row.tobytes()}

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_concat": None}


# This worker process's concatenator, and the UDF settings it was built for.
_worker_concatenator: tuple[tuple, TokenConcatenator] | None = None


def _task_concatenator(udf: TokenizeConcatUDF) -> TokenConcatenator:
    """A concatenator with an empty buffer, for a task's first batch. A Python worker keeps
    the one it built at its first task of the conversion: unpickling the tokenizer and
    choosing its encoder cost 0.1-0.15 CPU-seconds, at every task otherwise (an input of many
    small files is as many tasks)."""
    global _worker_concatenator
    key = (hashlib.sha256(udf.tokenizer_pickle).digest(), udf.seq_len, udf.eos_text, udf.bos_text)
    if _worker_concatenator is None or _worker_concatenator[0] != key:
        tokenizer = pickle.loads(udf.tokenizer_pickle)
        concat = TokenConcatenator(tokenizer, udf.seq_len, eos_text=udf.eos_text, bos_text=udf.bos_text)
        _worker_concatenator = (key, concat)
        _freeze_long_lived()
    concat = _worker_concatenator[1]
    concat.take_remainder()  # the task before, finished or failed, leaves nothing to this one
    return concat


def _freeze_long_lived() -> None:
    """Spark's reused Python worker runs gc.collect() after every task (pyspark/daemon.py):
    with torch imported (streaming imports it) that walks ~390k objects, 0.2 CPU-seconds a
    task. Moving what exists once the first task is set up (the imports, the concatenator
    kept above) to the collector's permanent generation, once per process, leaves each
    collection the task's own objects."""
    global _frozen
    if _frozen:
        return
    _frozen = True
    try:
        from pyspark import TaskContext
    except ImportError:
        return
    if TaskContext.get() is not None:  # a Spark worker, not a caller's own process
        gc.freeze()


_frozen = False


def _pieces(texts: list[str], chars: int) -> Iterator[list[str]]:
    """Consecutive runs of texts, each ending once it holds `chars` characters."""
    start = size = 0
    for i, text in enumerate(texts):
        size += len(text)
        if size >= chars:
            yield texts[start : i + 1]
            start, size = i + 1, 0
    if start < len(texts):
        yield texts[start:]


@dataclass
class SparkResult:
    documents: int
    samples: int
    shards: int
    shard_bytes: int


def import_pyspark():
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise InputError(SPARK_EXTRA) from None
    return SparkSession


# A local session's JVM reads the inputs and hands them to the Python workers, a fraction of
# the work: its JIT's optimizing tier (C2) spent more CPU compiling than it saved, ~1
# CPU-second of a warm JVM's 10 MB conversion. The quick tier alone (C1) costs less up to
# about 1 GB of text per session (bench/README.md).
LOCAL_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
# Set when a master is already chosen: spark-submit's gateway, its arguments, Spark Connect.
SESSION_ENV = ("PYSPARK_GATEWAY_PORT", "PYSPARK_SUBMIT_ARGS", "SPARK_REMOTE")


def spark_session(app: str, cores: int | None = None):
    """The active SparkSession (a Databricks notebook's, a test's), else a new one: when
    nothing chose a master, a local one on `cores` cores (default: all), tuned for one job."""
    SparkSession = import_pyspark()
    spark = SparkSession.getActiveSession()
    if spark is None:
        # Run the Python workers with this interpreter, which has launcher and the
        # tokenizer libraries (Spark would pick `python3` from PATH).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = SparkSession.builder.appName(app)
        if not any(name in os.environ for name in SESSION_ENV):
            builder = (
                builder.master(f"local[{cores or '*'}]")
                .config("spark.driver.extraJavaOptions", LOCAL_JAVA_OPTIONS)
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")  # its stage bars would garble our output
                .config("spark.driver.bindAddress", "127.0.0.1")
                .config("spark.driver.host", "127.0.0.1")
            )
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
    return spark


def read_dataframe(spark, inputs: list[str], columns: str | list[str]):
    """The inputs as a DataFrame of `columns` (the first is the text: for text files, each
    file's whole content)."""
    columns = [columns] if isinstance(columns, str) else list(columns)
    text_column = columns[0]
    kinds = {kind_of(p.rstrip("/")) for p in inputs}
    kind = kinds.pop() if len(kinds) == 1 else None
    if kind is None:
        raise InputError(
            "--engine spark reads one format per run: JSON Lines, Parquet, CSV or text files "
            "(Hugging Face dataset directories need --engine local)"
        )
    reader = spark.read
    if kind == "csv":
        reader = reader.option("header", "true").option("multiLine", "true")
    if kind == "text":
        df = reader.option("wholetext", "true").text(inputs).withColumnRenamed("value", text_column)
    else:
        df = getattr(reader, SPARK_READERS[kind])(inputs)
    for col, flag in zip(columns, ("--text-column", "--label-column"), strict=False):
        if col not in df.columns:
            raise InputError(f"no column {col!r} in the inputs (columns: {', '.join(df.columns)}); use {flag}")
    return df.select(*columns)


def _first_json_keys(spark, inputs: list[str]) -> list[str] | None:
    """The keys of the first JSON record, read from the first non-blank line alone; None when
    that line is not a JSON object (read_dataframe then infers and reports)."""
    row = spark.read.text(inputs).where("trim(value) != ''").first()
    if row is None:
        return None
    try:
        first = json.loads(row.value)
    except ValueError:
        return None
    return list(first) if isinstance(first, dict) else None


def read_texts(spark, inputs: list[str], text_column: str):
    """The inputs as a DataFrame of the one text column. JSON Lines are read with that column's
    schema given, as the local engine reads them: Spark's schema inference would parse every
    record once more, and every other field on each pass."""
    kinds = {kind_of(p.rstrip("/")) for p in inputs}
    if kinds == {"jsonl"}:
        try:
            keys = _first_json_keys(spark, inputs)
        except Exception:  # noqa: BLE001 - a missing or unreadable path: read_dataframe reports it
            keys = None
        if keys is not None and text_column in keys:
            from pyspark.sql.types import StringType, StructField, StructType

            schema = StructType([StructField(text_column, StringType())])
            return spark.read.schema(schema).json(inputs)
    return read_dataframe(spark, inputs, text_column)


def _spark_cause(e: Exception) -> str:
    """The last `SomethingError: message` line of a Spark error, which names the cause."""
    lines = [ln.strip() for ln in str(e).splitlines() if re.match(r"^\s*[\w.]+(Error|Exception): ", ln)]
    return lines[-1] if lines else (str(e).splitlines() or [type(e).__name__])[0]


def run_spark(
    inputs: list[str],
    mds_out,
    *,
    tokenizer,
    seq_len: int,
    text_column: str,
    eos_text: str,
    bos_text: str,
    compression: str | None,
    shard_size: int,
    workers: int,
) -> SparkResult:
    """Convert with Spark into `mds_out` (a local dir, or (local, remote)); returns counts
    read back from the merged index, which streaming leaves in the local directory."""
    spark = spark_session("launcher data convert", workers)
    from streaming.base.converters import dataframe_to_mds

    df = read_texts(spark, inputs, text_column)
    try:
        documents = df.count()  # before the repartition: counting needs no shuffle
    except Exception as e:  # noqa: BLE001
        raise InputError(f"Spark cannot read the inputs: {_spark_cause(e)}") from None
    if documents == 0:
        raise InputError(f"no documents in {', '.join(inputs)}")
    if workers > 1:
        df = df.repartition(workers)
    udf = TokenizeConcatUDF(tokenizer, seq_len, text_column, eos_text, bos_text)
    mds_kwargs = {
        "out": mds_out,
        "columns": MDS_COLUMNS,
        "compression": compression,
        "size_limit": shard_size,
        "keep_local": True,
    }
    try:
        with quiet_streaming_logs():
            dataframe_to_mds(df, merge_index=True, mds_kwargs=mds_kwargs, udf_iterable=udf)
    except Exception as e:  # noqa: BLE001 - Py4J and Python worker errors: show their cause
        raise LauncherError(f"the Spark conversion failed: {_spark_cause(e)}") from None
    local = mds_out if isinstance(mds_out, str) else mds_out[0]
    with open(os.path.join(local, "index.json")) as f:
        shards = json.load(f)["shards"]
    return SparkResult(
        documents=documents,
        samples=sum(s["samples"] for s in shards),
        shards=len(shards),
        shard_bytes=sum((s.get("zip_data") or s["raw_data"])["bytes"] for s in shards),
    )
