"""Streaming MDS token data into Composer.

Each sample of a converted split is one `tokens` bytes column holding exactly
`seq_len` little-endian ids of the dtype its sidecar records (see
launcher.data.format). The dataset decodes it; the collate stacks samples into
`input_ids` and a separate `labels` copy (HF's causal-LM loss shifts labels
itself, and Composer's metric update shifts them in place, so they must not
share memory with input_ids). `sample_idx` carries each sample's global index
so that the data a rank consumed can be audited; HuggingFaceModel drops it
before the forward pass.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from filelock import FileLock, Timeout
from streaming import StreamingDataset
from streaming.base.world import World

from launcher.data.format import TOKENS_COLUMN, numpy_dtype
from launcher.train.preflight import DatasetInfo


class TokenDataset(StreamingDataset):
    """StreamingDataset over launcher.tokens.v1 MDS: yields {'input_ids': int64[seq_len], 'sample_idx': int}."""

    def __init__(self, *, dtype: str, seq_len: int, own_caches: Sequence[Path] = (), **kwargs: Any):
        with shared_memory_registration(own_caches):
            super().__init__(**kwargs)
        self.token_dtype = numpy_dtype(dtype)
        self.seq_len = seq_len

    def get_item(self, sample_id: int, retry: int = 7) -> Any:
        sample = super().get_item(sample_id, retry)
        ids = np.frombuffer(sample[TOKENS_COLUMN], dtype=self.token_dtype)
        if ids.shape[0] != self.seq_len:
            raise ValueError(
                f"sample {sample_id} holds {ids.shape[0]} tokens, the dataset's sidecar says {self.seq_len}"
            )
        return {"input_ids": ids.astype(np.int64), "sample_idx": sample_id}


# Shared memory names are files in /dev/shm on Linux: the lock sits beside them, so every
# process that can see a dataset's shared memory sees the lock too.
SHM_DIR = "/dev/shm"
REGISTRATION_LOCK = os.path.join(
    SHM_DIR if os.path.isdir(SHM_DIR) else tempfile.gettempdir(), "launcher-streaming-registration.lock"
)
REGISTRATION_WAIT_NOTICE_S = 30.0


@contextlib.contextmanager
def shared_memory_registration(own_caches: Sequence[Path] = ()) -> Iterator[None]:
    """Around building a StreamingDataset, on every rank.

    streaming finds the first free shared-memory prefix and then creates it, with nothing in
    between: two runs on one host that build their datasets at once picked the same prefix,
    and one failed with FileExistsError ('/000001_locals'). So runs on one host take turns:
    each node's local leader holds an flock (released if its process dies) from before any
    rank of its run looks for a prefix (they wait at a barrier) until streaming's own last
    barrier, when all of them have attached. Only the leader takes it: a rank waiting here
    would hold up its leader at streaming's barriers.

    Holding it, the leader first removes the shared memory an earlier attempt of this run
    left when it was killed (`own_caches`: the caches the launcher chose for this run, which
    no other live run uses). streaming's clean_stale_shared_memory() is not used: it removes
    every dataset's shared memory from prefix 0 up, a live run's too, and the next run then
    registered the same prefix as that live one.
    """
    leader = World.detect().is_local_leader
    lock = _acquire_registration_lock() if leader else None
    try:
        if leader:
            remove_stale_shared_memory(own_caches)
        if dist.is_available() and dist.is_initialized():
            dist.barrier()
        yield
    finally:
        if lock is not None:
            lock.release()


def _acquire_registration_lock() -> FileLock | None:
    lock = FileLock(REGISTRATION_LOCK, mode=0o666)
    try:
        lock.acquire(timeout=REGISTRATION_WAIT_NOTICE_S)
    except Timeout:
        print(
            f"waiting for another run on this host to register its dataset (lock {REGISTRATION_LOCK})",
            file=sys.stderr,
            flush=True,
        )
        lock.acquire()
    except OSError as e:  # a read-only /dev/shm, or another user's lock file: as streaming alone would
        print(
            f"! registering the dataset without taking turns with other runs on this host: cannot lock "
            f"{REGISTRATION_LOCK} ({e.strerror or e})",
            file=sys.stderr,
            flush=True,
        )
        return None
    return lock


def remove_stale_shared_memory(own_caches: Sequence[Path]) -> None:
    """Remove the shared memory of every dataset registered on one of `own_caches` (left by a
    killed process: no live process may be using them)."""
    from streaming.base.constant import LOCALS, SHM_TO_CLEAN
    from streaming.base.shared.prefix import _get_path, _unpack_locals

    if not own_caches or not os.path.isdir(SHM_DIR):
        return
    roots = [Path(c).resolve() for c in own_caches]
    for entry in sorted(os.listdir(SHM_DIR)):
        prefix, _, kind = entry.partition("_")
        if kind != LOCALS or not prefix.isdigit():
            continue
        try:  # read as a file: attaching through SharedMemory would enlist it with the resource tracker
            their_locals, _ = _unpack_locals(Path(SHM_DIR, entry).read_bytes())
        except (OSError, ValueError, IndexError):
            continue
        if not any(Path(local).is_relative_to(root) for local in their_locals for root in roots):
            continue
        for name in SHM_TO_CLEAN:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(SHM_DIR, _get_path(int(prefix), name)))


def collate(samples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    input_ids = torch.from_numpy(np.stack([s["input_ids"] for s in samples]))
    return {
        "input_ids": input_ids,
        "labels": input_ids.clone(),
        "sample_idx": torch.tensor([s["sample_idx"] for s in samples], dtype=torch.int64),
    }


def num_tokens(batch: dict[str, torch.Tensor]) -> int:
    return int(batch["input_ids"].numel())


def build_dataloader(info: DatasetInfo, loader: Any, device_batch_size: int, own_caches: Sequence[Path] = ()) -> Any:
    """A Composer DataSpec over one split. `loader` is a LoaderConfig; `own_caches` are the
    caches the launcher chose for this run (see shared_memory_registration)."""
    from composer.core import DataSpec
    from torch.utils.data import DataLoader

    ds = loader.dataset
    dataset = TokenDataset(
        dtype=info.dtype,
        seq_len=info.seq_len,
        remote=info.remote,
        local=info.local,
        split=info.split,
        shuffle=ds.shuffle,
        shuffle_seed=ds.shuffle_seed,
        shuffle_algo=ds.shuffle_algo,
        shuffle_block_size=ds.shuffle_block_size,
        predownload=ds.predownload,
        num_canonical_nodes=ds.num_canonical_nodes,
        download_retry=ds.download_retry,
        download_timeout=ds.download_timeout,
        cache_limit=ds.cache_limit,
        batch_size=device_batch_size,
        own_caches=own_caches,
    )
    extra: dict[str, Any] = {}
    if loader.num_workers > 0:
        extra["persistent_workers"] = loader.persistent_workers
        if loader.prefetch_factor is not None:
            extra["prefetch_factor"] = loader.prefetch_factor
    dataloader = DataLoader(
        dataset,
        batch_size=device_batch_size,
        collate_fn=collate,
        num_workers=loader.num_workers,
        pin_memory=loader.pin_memory,
        drop_last=loader.drop_last,
        timeout=loader.timeout,
        **extra,
    )
    return DataSpec(dataloader, get_num_tokens_in_batch=num_tokens)
