"""Checks that run before any weight is built, each failing with one clear line.

For every dataset the trainer reads: the credentials its scheme needs are
present; its split directory holds an index.json; the sidecar written by
`launcher data convert` is there and agrees with the model (token dtype,
sequence length, vocabulary). The sidecar is the only source of the dtype and
sequence length: the trainer never guesses them.

Remote reads go through launcher.storage with its PREFLIGHT patience (the
Databricks SDK retries a dead host for five minutes by default) so that a wrong
host fails in seconds.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.data.format import SIDECAR_NAME
from launcher.errors import InputError, LauncherError
from launcher.storage import PREFLIGHT, Credentials, StorageNotFoundError, Store, open_store, scheme_of

INDEX = "index.json"


class PreflightError(InputError):
    """A dataset or credential problem found before training starts (exit 2)."""


@dataclass(frozen=True)
class DatasetInfo:
    """One split the trainer will stream, with what its sidecar says."""

    remote: str | None
    """Passed to StreamingDataset as remote (None: read `local` in place)."""
    local: str | None
    split: str
    dtype: str
    seq_len: int
    vocab_size: int | None
    samples: int | None

    @property
    def where(self) -> str:
        return join(self.remote or self.local or "", self.split)


def join(base: str, *parts: str) -> str:
    out = base.rstrip("/")
    for p in parts:
        out += "/" + p.strip("/")
    return out


def _open(base: str, where: str, env: dict[str, str]) -> Store:
    """The store of a split directory. A run's credentials come with the run (its secrets),
    never from this machine's secret store."""
    try:
        return open_store(where, Credentials(env), patience=PREFLIGHT, what=base)
    except LauncherError as e:
        raise _one_line(e) from None


def _read(store: Store, name: str) -> bytes | None:
    """A small file beside the data; None when it is not there."""
    try:
        return store.read(name)
    except StorageNotFoundError:
        return None
    except LauncherError as e:
        raise _one_line(e) from None


def _one_line(e: LauncherError) -> PreflightError:
    """Each pre-flight failure is one line: the hint joins the message."""
    return PreflightError(f"{e.message}: {e.hint}" if e.hint else e.message)


# ---------------------------------------------------------------- the checks


def check_dataset(
    *,
    name: str,
    remote: str | None,
    local: str | None,
    split: str,
    max_seq_len: int,
    vocab_size: int,
    env: dict[str, str] | None = None,
) -> DatasetInfo:
    """Check one split; `name` (e.g. train_loader) prefixes the messages."""
    env = dict(os.environ) if env is None else env
    if remote is not None and scheme_of(remote) == "local":
        # A local "remote" is read in place; streaming copies only when a cache is named.
        remote, local = (None, remote) if local is None else (remote, local)
    base = remote if remote is not None else local
    assert base is not None
    where = join(base, split)
    if remote is None and not Path(where).is_dir():
        raise PreflightError(f"{name}: {where} does not exist (no such directory: {Path(where).resolve()})")
    store = _open(base, where, env)
    if _read(store, INDEX) is None:
        raise PreflightError(
            f"{name}: {where} has no {INDEX} (checked as {store.describe(INDEX)}): convert the data there with "
            f"`launcher data convert ... --out {base} --split {split}`, or fix {name}.dataset.remote"
        )
    raw = _read(store, SIDECAR_NAME)
    if raw is None:
        raise PreflightError(
            f"{where} has no {SIDECAR_NAME}, so its token dtype and sequence length are unknown "
            "(prepare data with `launcher data convert`; the trainer does not guess)"
        )
    sidecar = _parse_sidecar(raw, where)
    if sidecar["seq_len"] != max_seq_len:
        raise PreflightError(
            f"{where} holds sequences of {sidecar['seq_len']} tokens but model.max_seq_len is {max_seq_len}: "
            "convert the data with the model's sequence length, or change model.max_seq_len"
        )
    data_vocab = sidecar.get("vocab_size")
    if isinstance(data_vocab, int) and data_vocab > vocab_size:
        raise PreflightError(
            f"{where} was tokenized with a vocabulary of {data_vocab} but model.vocab_size is {vocab_size}"
        )
    return DatasetInfo(
        remote=remote,
        local=local,
        split=split,
        dtype=sidecar["dtype"],
        seq_len=sidecar["seq_len"],
        vocab_size=data_vocab if isinstance(data_vocab, int) else None,
        samples=sidecar.get("samples") if isinstance(sidecar.get("samples"), int) else None,
    )


def _parse_sidecar(raw: bytes, where: str) -> dict[str, Any]:
    from launcher.data.format import check_sidecar

    try:
        return check_sidecar(json.loads(raw), where=f"{where}/{SIDECAR_NAME}")
    except ValueError:
        raise PreflightError(f"{where}/{SIDECAR_NAME} is not valid JSON") from None
    except InputError as e:
        raise PreflightError(e.message) from None


def preflight(cfg: Any, env: dict[str, str] | None = None) -> dict[str, DatasetInfo]:
    """Check every dataset of a TrainConfig; return {'train': info, 'eval': info?}."""
    env = dict(os.environ) if env is None else env
    out = {}
    for key, loader_name in (("train", "train_loader"), ("eval", "eval_loader")):
        loader = getattr(cfg, loader_name)
        if loader is None:
            continue
        ds = loader.dataset
        out[key] = check_dataset(
            name=loader_name,
            remote=ds.remote,
            local=ds.local,
            split=ds.split,
            max_seq_len=cfg.model.max_seq_len,
            vocab_size=cfg.model.vocab_size,
            env=env,
        )
    return out
