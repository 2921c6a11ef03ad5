"""Python's garbage collector on a schedule during training, not whenever it likes.

Composer allocates a few hundred small objects per step (timestamps, dicts, events), so
Python's automatic collector runs about once a step and a generation-1 pass every ten or so:
on the tiny CPU model that was 0.5 ms a step (of ~70), and a full pass over a process that
holds torch, transformers and Composer (~450k tracked objects) stalls every rank of a
distributed step at a different moment. As llm-foundry's ScheduledGarbageCollector, OLMo-core's
GarbageCollectorCallback and torchtitan do, automatic collection is off while training, with
a generation-1 collection every `gen_1_batch_interval` batches and a full one every
`batch_interval` (all ranks at the same batch); evaluation runs with it on (unless
`eval_keep_disabled`). The collector's state from before the run is restored at the end, and
also when the run fails (close).

    callbacks:
      scheduled_gc: {batch_interval: 1000, gen_1_batch_interval: 50}   # the defaults
      scheduled_gc: {enabled: false}                                    # Python's own schedule
"""

from __future__ import annotations

import gc

from composer.core import Callback, State
from composer.loggers import Logger

from launcher.errors import InputError

DEFAULTS = {"batch_interval": 1000, "gen_1_batch_interval": 50}


def _interval(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"callbacks.scheduled_gc: {name} must be a whole number of batches >= 1, got {value!r}")
    return value


class ScheduledGarbageCollector(Callback):
    def __init__(
        self,
        batch_interval: int = DEFAULTS["batch_interval"],
        gen_1_batch_interval: int | None = DEFAULTS["gen_1_batch_interval"],
        eval_keep_disabled: bool = False,
        enabled: bool = True,
    ):
        self.batch_interval = _interval("batch_interval", batch_interval)
        self.gen_1_batch_interval = (
            None if gen_1_batch_interval is None else _interval("gen_1_batch_interval", gen_1_batch_interval)
        )
        self.eval_keep_disabled = bool(eval_keep_disabled)
        self.enabled = bool(enabled)
        self._was_enabled: bool | None = None  # the collector's state before fit; None outside fit

    def fit_start(self, state: State, logger: Logger) -> None:
        if not self.enabled:
            return
        self._was_enabled = gc.isenabled()
        gc.disable()
        gc.collect()  # the set-up's garbage goes before the first step, not into it

    def before_dataloader(self, state: State, logger: Logger) -> None:
        if self._was_enabled is None:
            return
        batch = int(state.timestamp.batch)
        if batch and batch % self.batch_interval == 0:
            gc.collect()
        elif batch and self.gen_1_batch_interval and batch % self.gen_1_batch_interval == 0:
            gc.collect(1)

    def eval_start(self, state: State, logger: Logger) -> None:
        if self._was_enabled is not None and not self.eval_keep_disabled:
            gc.enable()

    def eval_end(self, state: State, logger: Logger) -> None:
        if self._was_enabled is not None and not self.eval_keep_disabled:
            gc.disable()

    def fit_end(self, state: State, logger: Logger) -> None:
        self._restore()

    def close(self, state: State, logger: Logger) -> None:
        self._restore()  # fit_end never came: the run failed or was stopped

    def _restore(self) -> None:
        if self._was_enabled is None:
            return
        if self._was_enabled:
            gc.enable()
        self._was_enabled = None
