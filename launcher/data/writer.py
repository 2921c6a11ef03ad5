"""One MDS partition: samples in, shard files out, each announced as soon as it is complete
so that an upload can start while conversion goes on."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

from launcher.data.format import MDS_COLUMNS, TOKENS_COLUMN

DEFAULT_SHARD_SIZE = 1 << 26  # streaming's default: 64 MiB of raw samples per shard


@contextmanager
def quiet_streaming_logs() -> Iterator[None]:
    """streaming logs chatty warnings, some through the root logger, which would install a
    stderr handler for the whole process (logging.basicConfig). While it runs, give the root
    logger a silent handler if it has none; an application that configured logging keeps it."""
    root = logging.getLogger()
    handler = logging.NullHandler()
    added = not root.handlers
    if added:
        root.addHandler(handler)
    try:
        yield
    finally:
        if added:
            root.removeHandler(handler)


def shard_file(shard: dict) -> str:
    """The basename of the file MDSWriter wrote for a shard entry of its index."""
    return (shard.get("zip_data") or shard["raw_data"])["basename"]


class PartitionWriter:
    """Writes samples into an MDS directory `local`. `prefix` is the partition's path
    relative to the split root ("" for a flat dataset, "3" for partition 3); `on_shard`
    receives each finished shard as prefix/basename."""

    def __init__(
        self,
        local: str,
        prefix: str = "",
        *,
        compression: str | None,
        shard_size: int = DEFAULT_SHARD_SIZE,
        on_shard: Callable[[str], None] | None = None,
    ):
        from streaming import MDSWriter

        self.prefix = prefix
        self.on_shard = on_shard or (lambda rel: None)
        self.writer = MDSWriter(out=local, columns=MDS_COLUMNS, compression=compression, size_limit=shard_size)
        self.samples = 0
        self._announced = 0

    def _announce(self, upto: int) -> None:
        for shard in self.writer.shards[self._announced : upto]:
            self.on_shard(os.path.join(self.prefix, shard_file(shard)) if self.prefix else shard_file(shard))
        self._announced = upto

    def write(self, samples: np.ndarray) -> None:
        for row in samples:
            self.writer.write({TOKENS_COLUMN: row.tobytes()})
            if len(self.writer.shards) > self._announced:
                self._announce(len(self.writer.shards))
        self.samples += len(samples)

    def finish(self) -> int:
        """Flush the last shard and write the partition's index.json; returns the shard count."""
        self.writer.finish()
        self._announce(len(self.writer.shards))
        return len(self.writer.shards)

    def shard_bytes(self) -> int:
        return sum((s.get("zip_data") or s["raw_data"])["bytes"] for s in self.writer.shards)
