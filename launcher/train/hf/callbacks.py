"""TrainerCallbacks of the HF recipe: our metric records, and checkpoint uploads.

Records (global rank 0, launcher.metrics.records) map transformers' logs onto the names
every run uses: loss -> loss/train/total, eval_<x> -> metrics/eval/<x>, learning_rate ->
lr, and throughput/samples_per_sec measured between two train logs. `step` is the
Trainer's global_step (optimizer steps).
"""

from __future__ import annotations

import os
import time
from typing import Any

from transformers import TrainerCallback

from launcher.train.records import RecordWriter

_SKIP = {
    "epoch",
    "total_flos",
    "train_runtime",
    "train_samples_per_second",
    "train_steps_per_second",
    "train_loss",
    "eval_runtime",
    "eval_samples_per_second",
    "eval_steps_per_second",
}


class RecordsCallback(TrainerCallback):
    def __init__(self, *, global_batch_size: int, seq_len: int):
        self.global_batch_size = global_batch_size
        self.seq_len = seq_len
        self.writer: RecordWriter | None = None
        self._last: tuple[float, int] | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not state.is_world_process_zero:
            return
        folder = os.environ.get("LAUNCHER_ARTIFACTS_DIR", "").strip()
        self.writer = RecordWriter([folder] if folder else [])
        self.writer.open()
        self.writer.emit(
            {
                "event": "fit_start",
                "step": state.global_step,
                "max_duration": f"{state.max_steps}ba",
                "max_batches": state.max_steps,
                "start_batch": state.global_step,
                "run_name": args.run_name,
                "world_size": args.world_size,
                "global_batch_size": self.global_batch_size,
                "seq_len": self.seq_len,
            }
        )
        self._last = (time.monotonic(), state.global_step)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if self.writer is None or not logs:
            return
        metrics: dict[str, float] = {}
        for key, value in logs.items():
            if key in _SKIP or not isinstance(value, int | float):
                continue
            if key == "loss":
                metrics["loss/train/total"] = float(value)
            elif key == "learning_rate":
                metrics["lr"] = float(value)
            elif key.startswith("eval_"):
                metrics[f"metrics/eval/{key[len('eval_') :]}"] = float(value)
            else:
                metrics[key] = float(value)
        if "loss" in logs and self._last is not None:
            t0, s0 = self._last
            now = time.monotonic()
            if state.global_step > s0 and now > t0:
                metrics["throughput/samples_per_sec"] = (state.global_step - s0) * self.global_batch_size / (now - t0)
            self._last = (now, state.global_step)
        if "epoch" in logs:
            metrics["time/epoch"] = float(logs["epoch"])
        if metrics:
            self.writer.emit({"step": state.global_step, "metrics": metrics})

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.writer is not None:
            self.writer.emit({"event": "fit_end", "step": state.global_step})
            self.writer.close()
            self.writer = None


class UploadCallback(TrainerCallback):
    """Each checkpoint, once saved, goes to the remote output_dir (rank 0; the marker file
    last, so that a half-uploaded checkpoint is never resumed from)."""

    def __init__(self, out: Any):
        self.out = out

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not self.out.writes:
            return
        name = f"checkpoint-{state.global_step}"
        local = self.out.local / name
        if local.is_dir():
            self.out.publish(local, name)
        self.out.prune()


class SyncBestCheckpoint(TrainerCallback):
    """Every rank learns the best checkpoint from rank 0 after each save.

    transformers (4.53) records state.best_model_checkpoint only where the checkpoint
    directory already exists when it looks, which on the other ranks races with rank 0's
    save; a rank that saw none skips the barrier before load_best_model_at_end and the run
    hangs. Broadcasting rank 0's view makes every rank take the same path."""

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            box = [state.best_model_checkpoint]
            dist.broadcast_object_list(box, src=0)
            state.best_model_checkpoint = box[0]
