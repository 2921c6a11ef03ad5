"""`launcher data prepare`: Parquet / CSV / JSON Lines (or a Spark DataFrame) -> a tokenized
Hugging Face DatasetDict with train and test splits, saved with save_to_disk, with the
label mapping beside it (label_mapping.json: {"id2label": {"0": "negative", ...}}), so that
the HF recipe reads id2label from the data. String labels become ids in sorted order;
integer labels are kept. A remote --out (dbfs:/Volumes/..., s3://) gets the saved
directory uploaded, dataset_dict.json last (until it is there, nothing looks complete).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.errors import InputError

LABELS_FILE = "label_mapping.json"
DICT_MARKER = "dataset_dict.json"
TASKS = ("sequence_classification", "causal_lm")


@dataclass(frozen=True)
class PrepareSummary:
    rows: dict[str, int]
    labels: dict[int, str] | None
    out: str
    seconds: float

    @property
    def data_line(self) -> str:
        from launcher.data.convert import _yaml_scalar

        return f"data: {{remote: {_yaml_scalar(self.out)}}}"


def label_ids(ds: Any, column: str) -> tuple[dict[int, str], Any]:
    """(id2label, the dataset with a `labels` int column). Strings map in sorted order,
    integers stay as they are; the same on every split."""
    first = next(iter(ds.values())) if hasattr(ds, "values") else ds
    if column not in first.column_names:
        raise InputError(f"no label column {column!r} (columns: {', '.join(first.column_names)}); use --label-column")
    splits = list(ds.values()) if hasattr(ds, "values") else [ds]
    values: set[Any] = set()
    for split in splits:
        values.update(split.unique(column))
    if None in values:
        raise InputError(f"a record has no {column!r} value")
    if all(isinstance(v, bool | int) for v in values) and not any(isinstance(v, bool) for v in values):
        id2label = {int(v): str(v) for v in sorted(values)}
        mapping = {v: int(v) for v in values}
    else:
        names = sorted(str(v) for v in values)
        id2label = dict(enumerate(names))
        mapping = {v: names.index(str(v)) for v in values}

    def to_ids(batch: dict[str, list]) -> dict[str, list]:
        return {"labels": [mapping[v] for v in batch[column]]}

    return id2label, ds.map(to_ids, batched=True, desc=None)


def tokenize_dataset(ds: Any, tokenizer: Any, text_column: str, max_length: int, label_column: str | None) -> Any:
    """Tokenized (truncated, unpadded: the collator pads each batch), keeping only what the model reads."""
    first = next(iter(ds.values())) if hasattr(ds, "values") else ds
    if text_column not in first.column_names:
        raise InputError(
            f"no text column {text_column!r} (columns: {', '.join(first.column_names)}); use --text-column"
        )

    def tok(batch: dict[str, list]) -> dict[str, Any]:
        texts = batch[text_column]
        if any(t is None for t in texts):
            raise InputError(f"a record has no {text_column!r} value")
        return tokenizer([str(t) for t in texts], truncation=True, max_length=max_length)

    keep = {"labels"} if label_column else set()
    drop = [c for c in first.column_names if c not in keep]
    return ds.map(tok, batched=True, remove_columns=drop, desc=None)


def read_local(inputs: list[str]) -> Any:
    import datasets

    from launcher.data.documents import expand_inputs

    files = expand_inputs(inputs)
    kinds = {f.kind for f in files}
    if len(kinds) != 1 or kinds & {"text", "hf"}:
        raise InputError("data prepare reads one format per run: Parquet, JSON Lines or CSV files")
    fmt = {"jsonl": "json", "parquet": "parquet", "csv": "csv"}[kinds.pop()]
    datasets.disable_progress_bars()
    return datasets.load_dataset(fmt, data_files=[f.url for f in files], split="train")


def read_spark(inputs: list[str], columns: list[str], cache_dir: str) -> Any:
    """Through a Spark DataFrame and datasets.Dataset.from_spark, as on a Databricks cluster."""
    import datasets

    from launcher.data.spark import read_dataframe, spark_session

    spark = spark_session("launcher data prepare")
    df = read_dataframe(spark, inputs, columns)
    datasets.disable_progress_bars()
    return datasets.Dataset.from_spark(df, cache_dir=cache_dir)


def prepare(
    inputs: list[str],
    out: str,
    tokenizer: str,
    *,
    text_column: str = "text",
    label_column: str | None = "label",
    test_size: float = 0.2,
    max_length: int = 128,
    seed: int = 0,
    engine: str = "local",
    overwrite: bool = False,
) -> PrepareSummary:
    import datasets

    from launcher.data.credentials import local_credentials
    from launcher.data.tokenizer import load_tokenizer
    from launcher.storage import is_remote, open_store

    if not 0 < test_size < 1:
        raise InputError(f"--test-size must be between 0 and 1, got {test_size}")
    if max_length < 1:
        raise InputError(f"--max-length must be at least 1, got {max_length}")
    started = time.monotonic()
    remote = open_store(out, local_credentials(out)) if is_remote(out) else None
    final = Path(out).expanduser()  # where a local --out goes (unused for a remote one)
    if remote is not None:
        if remote.files() and not overwrite:
            raise InputError(f"{out} is not empty; pass --overwrite to replace it")
    elif final.exists() and any(final.iterdir()) and not overwrite:
        raise InputError(f"{final} exists and is not empty; pass --overwrite to replace it")
    tok = load_tokenizer(tokenizer)
    with tempfile.TemporaryDirectory(prefix="launcher-prepare-") as tmp:
        if engine == "spark":
            ds = read_spark(
                inputs, [text_column] + ([label_column] if label_column else []), os.path.join(tmp, "spark")
            )
        else:
            ds = read_local(inputs)
        if len(ds) < 2:
            raise InputError(f"the inputs hold {len(ds)} record(s): too few to split into train and test")
        split = ds.train_test_split(test_size=test_size, seed=seed)
        dd = datasets.DatasetDict({"train": split["train"], "test": split["test"]})
        id2label = None
        if label_column:
            id2label, dd = label_ids(dd, label_column)
        dd = tokenize_dataset(dd, tok, text_column, max_length, label_column)
        stage = Path(tmp) / "dataset"
        dd.save_to_disk(str(stage))
        if id2label is not None:
            (stage / LABELS_FILE).write_text(
                json.dumps({"id2label": {str(k): v for k, v in id2label.items()}}, indent=2) + "\n"
            )
        if remote is not None:
            if overwrite:
                for rel in remote.files():
                    remote.delete(rel)
            remote.upload_tree(stage, last=(DICT_MARKER,))
        else:
            if final.exists():
                shutil.rmtree(final)
            final.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(stage), final)
    return PrepareSummary(
        rows={k: len(v) for k, v in dd.items()},
        labels=id2label,
        out=out if remote is not None else str(final.resolve()),
        seconds=time.monotonic() - started,
    )
