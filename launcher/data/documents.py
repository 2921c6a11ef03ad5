"""Input discovery and reading: text documents out of JSON Lines, Parquet, CSV, plain text
and Hugging Face `save_to_disk` datasets, local or remote (launcher.storage: dbfs:/Volumes,
s3://, gs://, any fsspec URL), in fixed-size batches.

Batches hold exactly `batch_docs` documents (the last one fewer) whatever the files' block
or row-group sizes, so the batch -> worker assignment, and with it the output, depends only
on the input order and the worker count.
"""

from __future__ import annotations

import glob
import json
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from launcher.data.credentials import local_credentials
from launcher.errors import InputError, LauncherError
from launcher.storage import Store, is_remote, join, open_store

COMPRESSIONS = (".gz", ".bz2", ".xz", ".zst", ".lz4")
KINDS_BY_SUFFIX = {
    ".jsonl": "jsonl",
    ".json": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".csv": "csv",
    ".tsv": "csv",
    ".txt": "text",
    ".text": "text",
    ".md": "text",
}
HF_MARKERS = ("dataset_info.json", "state.json", "dataset_dict.json")
JSON_BLOCK = 16 << 20  # a JSON line must fit in one block; 16 MiB covers real documents


@dataclass(frozen=True)
class InputFile:
    url: str  # a local path or a storage URL
    kind: str  # jsonl | parquet | csv | text | hf
    size: int  # bytes on storage (0 when unknown), for progress only


@dataclass
class TextBatch:
    texts: list[str]
    nbytes: int  # UTF-8 bytes of text, for MB/s


def _split_pattern(pattern: str) -> tuple[str, str]:
    """A glob split into the directory it starts from and the rest: 's3://b/in/*.jsonl' ->
    ('s3://b/in', '*.jsonl'); no glob: (pattern, '')."""
    if not glob.has_magic(pattern):
        return pattern, ""
    literal = re.split(r"[*?\[]", pattern, maxsplit=1)[0]
    root = literal.rsplit("/", 1)[0] if "/" in literal else ""
    if not root and literal.startswith("/"):
        root = "/"
    return root, pattern[len(root) :].lstrip("/")


def _store(url: str) -> Store:
    return open_store(url, local_credentials(url))


def kind_of(name: str) -> str | None:
    low = name.lower()
    for comp in COMPRESSIONS:
        if low.endswith(comp):
            low = low[: -len(comp)]
            break
    return KINDS_BY_SUFFIX.get(os.path.splitext(low)[1])


def _classify(store: Store, rel: str) -> InputFile:
    url = store.url_of(rel)
    if store.isdir(rel):
        if any(store.exists(join(rel, m)) for m in HF_MARKERS):
            return InputFile(url, "hf", 0)
        raise InputError(
            f"{url} is a directory but not a Hugging Face dataset saved with save_to_disk; "
            f"pass its files, e.g. '{url.rstrip('/')}/*.jsonl'"
        )
    kind = kind_of(url)
    if kind is None:
        raise InputError(
            f"{url}: unknown input format; use .jsonl/.json, .parquet, .csv/.tsv, .txt, "
            "or a Hugging Face dataset directory"
        )
    try:
        size = store.size(rel)
    except LauncherError:
        size = 0  # for progress only
    return InputFile(url, kind, size)


def expand_inputs(patterns: Iterable[str]) -> list[InputFile]:
    """Expand globs (sorted, for a deterministic order) and classify every input."""
    out: list[InputFile] = []
    for pattern in patterns:
        root, rest = _split_pattern(pattern if is_remote(pattern) else os.path.expanduser(pattern))
        store = _store(root)
        if rest:
            matches = store.glob(rest)
        else:
            matches = [""] if store.exists() else []
        if not matches:
            what = "no files match" if glob.has_magic(pattern) else "input not found:"
            raise InputError(f"{what} {pattern}")
        out += [_classify(store, m) for m in matches]
    return out


# ---- readers: each yields pyarrow string arrays of one column -------------------------------


def _missing_column(url: str, column: str, available: Iterable[str]) -> InputError:
    names = ", ".join(sorted(available)) or "none"
    return InputError(f"{url}: no column {column!r} (columns: {names}); choose one with --text-column")


@contextmanager
def _open(url: str) -> Iterator[BinaryIO]:
    """A file for reading, decompressed by its suffix (.gz, .zst, ...)."""
    from fsspec.compression import compr
    from fsspec.utils import infer_compression

    with _store(url).open() as raw:
        compression = infer_compression(url)
        if compression is None:
            yield raw
        else:
            with compr[compression](raw, mode="rb") as f:
                yield f


def _first_json_object(url: str) -> dict | None:
    with _open(url) as f:
        for raw in f:
            line = raw.strip()
            if line:
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as e:
                    raise InputError(f"{url}: not JSON Lines ({e.msg} on the first record)") from None
                if not isinstance(obj, dict):
                    raise InputError(f"{url}: each JSON line must be an object, got {type(obj).__name__}")
                return obj
    return None


def _read_jsonl(url: str, column: str):
    import pyarrow as pa
    import pyarrow.json as pj

    first = _first_json_object(url)
    if first is None:
        return
    if column not in first:
        raise _missing_column(url, column, first)
    parse = pj.ParseOptions(
        explicit_schema=pa.schema([pa.field(column, pa.large_string())]),
        unexpected_field_behavior="ignore",
    )
    with _open(url) as f:
        try:
            # open_json parses the first block at once; later blocks may fail as well.
            reader = pj.open_json(f, read_options=pj.ReadOptions(block_size=JSON_BLOCK), parse_options=parse)
            for batch in reader:
                yield batch.column(0)
        except pa.ArrowInvalid as e:
            raise InputError(f"{url}: {str(e).splitlines()[0]}") from None


def _read_csv(url: str, column: str):
    import pyarrow as pa
    import pyarrow.csv as pc

    parse = pc.ParseOptions(delimiter="\t" if ".tsv" in url.lower() else ",", newlines_in_values=True)
    with _open(url) as f:
        header = pc.open_csv(f, parse_options=parse).schema.names
    if column not in header:
        raise _missing_column(url, column, header)
    convert = pc.ConvertOptions(include_columns=[column], column_types={column: pa.large_string()})
    with _open(url) as f:
        try:
            reader = pc.open_csv(f, parse_options=parse, convert_options=convert)
            for batch in reader:
                yield batch.column(0)
        except pa.ArrowInvalid as e:
            raise InputError(f"{url}: {str(e).splitlines()[0]}") from None


def _read_parquet(url: str, column: str):
    import pyarrow as pa
    import pyarrow.parquet as pq

    with _open(url) as f:
        try:
            pf = pq.ParquetFile(f)
        except pa.ArrowInvalid as e:
            raise InputError(f"{url}: not a Parquet file ({e})") from None
        if column not in pf.schema_arrow.names:
            raise _missing_column(url, column, pf.schema_arrow.names)
        for batch in pf.iter_batches(columns=[column], batch_size=8192):
            yield batch.column(0)


def _read_hf(url: str, column: str, split: str):
    import datasets

    datasets.disable_progress_bars()
    store = _store(url)
    with tempfile.TemporaryDirectory(prefix="launcher-hf-input-") as tmp:
        local = store.local_path()
        if local is None:  # a remote dataset is fetched whole first
            local = Path(tmp) / "dataset"
            store.download_tree(local)
        yield from _hf_arrays(datasets, url, str(local), column, split)


def _hf_arrays(datasets, url: str, path: str, column: str, split: str):
    try:
        ds = datasets.load_from_disk(path)
    except (FileNotFoundError, ValueError) as e:
        raise InputError(f"{url}: cannot load the Hugging Face dataset ({e})") from None
    if isinstance(ds, datasets.DatasetDict):
        if split not in ds:
            raise InputError(f"{url}: a DatasetDict without split {split!r} (splits: {', '.join(ds)}); use --split")
        ds = ds[split]
    if column not in ds.column_names:
        raise _missing_column(url, column, ds.column_names)
    for table in ds.select_columns([column]).with_format("arrow").iter(batch_size=8192):
        yield table.column(0)


def _read_text(url: str):
    import pyarrow as pa

    with _open(url) as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{url}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    yield pa.array([text], type=pa.large_string())


def _arrays(item: InputFile, column: str, split: str):
    if item.kind == "jsonl":
        return _read_jsonl(item.url, column)
    if item.kind == "csv":
        return _read_csv(item.url, column)
    if item.kind == "parquet":
        return _read_parquet(item.url, column)
    if item.kind == "hf":
        return _read_hf(item.url, column, split)
    return _read_text(item.url)


def iter_batches(
    files: list[InputFile],
    column: str = "text",
    batch_docs: int = 1024,
    split: str = "train",
    batch_bytes: int = 1 << 20,
) -> Iterator[TextBatch]:
    """Documents of every file in order, in batches that end at `batch_docs` documents or
    once they hold `batch_bytes` of text: boundaries that depend on the input alone."""
    import pyarrow as pa
    import pyarrow.compute as pc

    texts: list[str] = []
    size = 0
    for item in files:
        row = 0
        for arr in _arrays(item, column, split):
            if isinstance(arr, pa.ChunkedArray):
                arr = arr.combine_chunks()
            if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
                try:
                    arr = arr.cast(pa.large_string())
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    raise InputError(f"{item.url}: column {column!r} holds {arr.type}, not text") from None
            if arr.null_count:
                first_null = row + arr.is_null().to_pylist().index(True)
                raise InputError(f"{item.url}: record {first_null + 1} has no {column!r} value")
            row += len(arr)
            for text, nbytes in zip(arr.to_pylist(), pc.binary_length(arr).to_pylist(), strict=True):
                texts.append(text)
                size += nbytes
                if len(texts) >= batch_docs or size >= batch_bytes:
                    yield TextBatch(texts, size)
                    texts, size = [], 0
    if texts:
        yield TextBatch(texts, size)
