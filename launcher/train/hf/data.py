"""The HF recipe's data: a dataset saved with save_to_disk (tokenized by `launcher data
prepare`, with its label mapping beside it), or Parquet / JSON Lines / CSV files tokenized
here. Remote datasets (dbfs:/Volumes/..., s3://) are fetched once per node into the run's
cache (local rank 0 fetches, the others wait; nodes that share a host take turns); a retry
of the run reuses the copy. So is a remote tokenizer (a folder saved with save_pretrained),
so that a spec whose files are all on a Volume runs unchanged where no Volume is mounted
(the local backend, Kubernetes)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.data.prepare import LABELS_FILE
from launcher.errors import InputError
from launcher.train.hf.ranks import process_ranks

FETCHED = ".fetched"
# How long the other processes of a node wait for its local rank 0 to fetch a remote dataset.
WAIT_FOR_DATA_S = 1800


@dataclass
class HFData:
    train: Any
    eval: Any
    tokenizer: Any
    collator: Any
    id2label: dict[int, str] | None
    num_labels: int


def fetch(uri: str, cache: Path, what: str = "dataset") -> Path:
    """A local copy of a remote directory (`what`: the dataset, the tokenizer); a local path
    is used in place."""
    from launcher.storage import is_remote, open_store

    if not is_remote(uri):
        path = Path(uri).expanduser()
        if not path.exists():
            field = "data.path" if what == "dataset" else what
            raise InputError(f"{field} {uri} does not exist (no such directory: {path.resolve()})")
        return path
    dest = cache / what
    done = cache / (FETCHED if what == "dataset" else f"{FETCHED}-{what}")
    _, local_rank, _ = process_ranks()
    if local_rank == 0:
        from filelock import FileLock

        # Every node's local rank 0 fetches, and the local backend's nodes share one host and
        # this cache: one at a time, so a node never loads a copy another is still writing.
        cache.mkdir(parents=True, exist_ok=True)
        with FileLock(str(cache / f"{what}.lock")):
            if not (done.is_file() and done.read_text() == uri):  # a retry, or another node, fetched it
                done.unlink(missing_ok=True)
                open_store(uri).download_tree(dest)  # the run's credentials, from its secrets
                done.write_text(uri)
    else:
        deadline = time.monotonic() + WAIT_FOR_DATA_S
        while not (done.is_file() and done.read_text() == uri):
            if time.monotonic() > deadline:
                raise InputError(f"local rank 0 did not fetch {uri} within {WAIT_FOR_DATA_S} s")
            time.sleep(0.5)
    return dest


def labels_beside(path: Path) -> dict[int, str] | None:
    """The id2label mapping `launcher data prepare` writes beside the data, if any."""
    f = path / LABELS_FILE
    if not f.is_file():
        return None
    try:
        raw = json.loads(f.read_text())
        return {int(k): str(v) for k, v in raw["id2label"].items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        raise InputError(f'{f} is not a label mapping ({{"id2label": {{"0": NAME, ...}}}})') from None


def _file_format(files: list[str]) -> str:
    from launcher.data.documents import kind_of

    kinds = {kind_of(f) for f in files}
    kind = kinds.pop() if len(kinds) == 1 else None
    if kind is None or kind in ("text", "hf"):
        raise InputError(f"data files must all be Parquet, JSON Lines or CSV, got {', '.join(files)}")
    return {"jsonl": "json", "parquet": "parquet", "csv": "csv"}[kind]


def load_data(cfg: Any, cache: Path) -> HFData:
    import datasets
    from transformers import AutoTokenizer, DataCollatorForLanguageModeling, DataCollatorWithPadding

    d = cfg.data
    datasets.disable_progress_bars()
    tok_name = cfg.tokenizer or cfg.model.name_or_path
    from launcher.storage import is_remote

    if cfg.tokenizer and is_remote(cfg.tokenizer):
        tok_name = str(fetch(cfg.tokenizer, cache, "tokenizer"))
    try:
        tokenizer = AutoTokenizer.from_pretrained(tok_name)
    except (OSError, ValueError) as e:
        raise InputError(f"tokenizer {tok_name}: {str(e).splitlines()[0]}") from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    id2label = None
    if d.path is not None:
        local = fetch(d.path, cache)
        try:
            ds = datasets.load_from_disk(str(local))
        except FileNotFoundError:
            raise InputError(
                f"data.path {d.path} is not a dataset saved with save_to_disk (prepare it with `launcher data prepare`)"
            ) from None
        if not isinstance(ds, datasets.DatasetDict):
            raise InputError(
                f"data.path {d.path} holds one split; it needs {d.train_split} and {d.eval_split} (a DatasetDict)"
            )
        id2label = labels_beside(local)
    else:
        files = {"train": [d.train_files] if isinstance(d.train_files, str) else list(d.train_files or [])}
        if d.eval_files:
            files["eval"] = [d.eval_files] if isinstance(d.eval_files, str) else list(d.eval_files)
        fmt = _file_format([f for fs in files.values() for f in fs])
        raw = datasets.load_dataset(fmt, data_files=files)
        ds = datasets.DatasetDict({d.train_split: raw["train"]})
        if "eval" in raw:
            ds[d.eval_split] = raw["eval"]
    for split in (d.train_split, d.eval_split):
        if split not in ds:
            raise InputError(f"data: no split {split!r} in {d.path or d.train_files} (splits: {', '.join(ds)})")

    if "input_ids" not in ds[d.train_split].column_names:
        from launcher.data.prepare import label_ids, tokenize_dataset

        if cfg.task == "sequence_classification":
            id2label, ds = label_ids(ds, d.label_column)
        ds = tokenize_dataset(
            ds,
            tokenizer,
            d.text_column,
            d.max_length,
            d.label_column if cfg.task == "sequence_classification" else None,
        )
    if cfg.task == "sequence_classification":
        if "labels" not in ds[d.train_split].column_names:
            raise InputError(
                f"data: the dataset has no labels column (columns: {', '.join(ds[d.train_split].column_names)})"
            )
        num_labels = cfg.model.num_labels or (len(id2label) if id2label else _count_labels(ds[d.train_split]))
        collator: DataCollatorWithPadding | DataCollatorForLanguageModeling = DataCollatorWithPadding(tokenizer)
    else:
        keep = {"input_ids", "attention_mask"}
        ds = ds.remove_columns([c for c in ds[d.train_split].column_names if c not in keep])
        num_labels = 0
        collator = DataCollatorForLanguageModeling(tokenizer, mlm=False)
    return HFData(ds[d.train_split], ds[d.eval_split], tokenizer, collator, id2label, num_labels)


def _count_labels(train: Any) -> int:
    return int(max(train["labels"])) + 1
