"""Our Composer LoggerDestination: every metric as one JSON line per step.

Composer logs a step's metrics at several moments (the loss inside the batch,
throughput and LR at BATCH_END, eval metrics after that). We buffer them and
write one record when the step is complete (BATCH_CHECKPOINT, which follows
evaluation). `step` is the number of batches completed (Composer's
timestamp.batch after the batch). Metrics logged after the last checkpoint
event of a step (an eval at the end of fit, epoch-end metrics) go out as a
second record for that step; readers merge records of the same step, the last
value winning, which also covers steps repeated after an autoresume.

Only global rank 0 writes: to stdout with the fixed prefix of
launcher.metrics.records, and appended to metrics.jsonl in each configured
folder (LAUNCHER_ARTIFACTS_DIR, and `loggers.jsonl.folder`), from a background
thread (launcher.train.records).

The records are the metrics channel, which the log views hide. For people, rank 0 also
prints one progress line every `console_interval` (the config's console_log_interval,
as Composer's console logger prints its block), and one for the last step:

    [train] step 12/50 · loss 2.31 · 14.2k tok/s · ETA 0:00:31
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from composer.core import State, Time, TimeUnit
from composer.loggers import Logger, LoggerDestination
from composer.utils import dist

from launcher.metrics.progress import ProgressLine
from launcher.train.records import RecordWriter

PROGRESS_PREFIX = "[train] "

# Counters Composer logs at the *start* of a batch (one batch behind); we log exact ones at flush.
_STALE_COUNTERS = {
    "time/epoch",
    "time/batch",
    "time/sample",
    "time/batch_in_epoch",
    "time/sample_in_epoch",
    "time/token",
    "time/token_in_epoch",
}


def _scalar(value: Any) -> float | None:
    try:
        if hasattr(value, "numel"):
            if value.numel() != 1:
                return None
            value = value.item()
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out


class LauncherMetricsLogger(LoggerDestination):
    def __init__(
        self,
        *,
        folders: Iterable[str | os.PathLike[str]] = (),
        global_batch_size: int,
        seq_len: int,
        stream: IO[str] | None = None,
        console_interval: str | None = None,
    ):
        """`console_interval`: how often to print the progress line, a Composer time
        ("10ba", "1ep", "0.1dur", samples or tokens); None: never."""
        super().__init__()
        self.folders = [Path(f) for f in folders]
        self.global_batch_size = global_batch_size
        self.seq_len = seq_len
        self.stream = stream
        self.console_interval = Time.from_timestring(console_interval) if console_interval else None
        self.enabled = False
        self.state: State | None = None
        self.buffer: dict[str, float] = {}
        self.writer: RecordWriter | None = None
        self.progress = ProgressLine()
        self.every_batches: int | None = None
        self.said_step: int | None = None

    # ------------------------------------------------------------ output

    def _emit(self, record: dict[str, Any]) -> None:
        if self.enabled and self.writer is not None:
            self.writer.emit(record)

    def _flush(self) -> bool:
        """Write the buffered metrics as the step's record; False when there were none."""
        if not self.buffer or self.state is None:
            self.buffer.clear()
            return False
        ts = self.state.timestamp
        metrics = dict(self.buffer)
        metrics["time/sample"] = float(ts.sample.value)
        metrics["time/epoch"] = float(ts.epoch.value)
        if ts.token.value:
            metrics["time/token"] = float(ts.token.value)
        self.buffer.clear()
        step = int(ts.batch.value)
        self._emit({"step": step, "metrics": metrics})
        if self.enabled:
            self.progress.feed_record({"step": step, "time": time.time(), "rank": 0, "metrics": metrics})
        return True

    def _say_progress(self) -> None:
        """The progress line, once per step."""
        line = self.progress.render()
        if self.writer is None or line is None or self.progress.step == self.said_step:
            return
        self.said_step = self.progress.step
        self.writer.say(PROGRESS_PREFIX + line)

    def _batches_between_lines(self, state: State) -> int | None:
        """The console interval in batches; None for an interval in epochs (or none)."""
        every = self.console_interval
        if every is None or every.unit == TimeUnit.EPOCH:
            return None
        if every.unit == TimeUnit.BATCH:
            n: float = every.value
        elif every.unit == TimeUnit.SAMPLE:
            n = every.value / self.global_batch_size
        elif every.unit == TimeUnit.TOKEN:
            n = every.value / (self.global_batch_size * self.seq_len)
        elif every.unit == TimeUnit.DURATION and self.max_batches(state):
            n = every.value * (self.max_batches(state) or 0)
        else:
            n = 1  # a fraction of a run whose length in batches is not known: every batch
        return max(1, math.ceil(n))

    # ------------------------------------------------------------ LoggerDestination

    def log_metrics(self, metrics: dict[str, Any], step: int | None = None) -> None:
        del step  # we stamp records with the completed batch count at flush
        if not self.enabled:
            return
        for name, value in metrics.items():
            if name in _STALE_COUNTERS:
                continue
            v = _scalar(value)
            if v is not None:
                self.buffer[name] = v

    # ------------------------------------------------------------ events

    def init(self, state: State, logger: Logger) -> None:
        del logger
        self.state = state
        self.enabled = dist.get_global_rank() == 0
        if self.enabled:
            self.writer = RecordWriter(self.folders, self.stream)
            self.writer.open()

    def fit_start(self, state: State, logger: Logger) -> None:
        del logger
        self.every_batches = self._batches_between_lines(state)
        if self.enabled:
            self.progress.feed_record(
                {
                    "event": "fit_start",
                    "rank": 0,
                    "max_duration": str(state.max_duration),
                    "max_batches": self.max_batches(state),
                }
            )
        self._emit(
            {
                "event": "fit_start",
                "step": int(state.timestamp.batch.value),
                "max_duration": str(state.max_duration) if state.max_duration is not None else None,
                "max_batches": self.max_batches(state),
                "start_batch": int(state.timestamp.batch.value),
                "run_name": state.run_name,
                "world_size": dist.get_world_size(),
                "global_batch_size": self.global_batch_size,
                "seq_len": self.seq_len,
            }
        )

    def batch_checkpoint(self, state: State, logger: Logger) -> None:
        if self._flush() and self.every_batches and int(state.timestamp.batch.value) % self.every_batches == 0:
            self._say_progress()

    def epoch_checkpoint(self, state: State, logger: Logger) -> None:
        self._flush()
        every = self.console_interval
        if (
            every is not None
            and every.unit == TimeUnit.EPOCH
            and int(state.timestamp.epoch.value) % max(1, int(every.value)) == 0
        ):
            self._say_progress()

    def fit_end(self, state: State, logger: Logger) -> None:
        self._flush()
        if self.console_interval is not None:
            self._say_progress()  # the last step's, unless the interval just printed it

    def close(self, state: State, logger: Logger) -> None:
        self._flush()
        if self.enabled and self.state is not None and state.max_duration is not None:
            self._emit({"event": "fit_end", "step": int(state.timestamp.batch.value)})
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        self.enabled = False

    # ------------------------------------------------------------ progress

    def max_batches(self, state: State) -> int | None:
        """The run's length in batches, so readers can compute progress and ETA."""
        d: Time | None = state.max_duration
        if d is None:
            return None
        if d.unit == TimeUnit.BATCH:
            return int(d.value)
        if d.unit == TimeUnit.EPOCH:
            per_epoch = state.dataloader_len
            return int(d.value) * int(per_epoch.value) if per_epoch is not None else None
        if d.unit == TimeUnit.SAMPLE:
            return math.ceil(d.value / self.global_batch_size)
        if d.unit == TimeUnit.TOKEN:
            return math.ceil(d.value / (self.global_batch_size * self.seq_len))
        return None


class SampleAudit(LoggerDestination):
    """Writes, per rank, the global sample indices each batch consumed (one JSON line per
    batch) to <folder>/samples-rank<R>.jsonl. Enabled by LAUNCHER_TRAIN_SAMPLE_LOG=<folder>;
    for checking how data is split across ranks and where a resumed run picks up."""

    def __init__(self, folder: str | os.PathLike[str]):
        super().__init__()
        self.folder = Path(folder)
        self.file: IO[str] | None = None

    def init(self, state: State, logger: Logger) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.file = open(self.folder / f"samples-rank{dist.get_global_rank()}.jsonl", "a", encoding="utf-8")

    def after_dataloader(self, state: State, logger: Logger) -> None:
        import json

        batch = state.batch
        if self.file is None or not isinstance(batch, dict) or "sample_idx" not in batch:
            return
        ids = [int(i) for i in batch["sample_idx"].tolist()]
        self.file.write(json.dumps({"batch": int(state.timestamp.batch.value) + 1, "samples": ids}) + "\n")
        self.file.flush()

    def close(self, state: State, logger: Logger) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
