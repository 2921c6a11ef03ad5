"""The Hugging Face fine-tuning recipe: transformers' Trainer, for sequence classification
or causal LM fine-tuning.

    python -m launcher.train.hf $PARAMETERS [key=value ...]                 # one process
    torchrun -m launcher.train.hf $PARAMETERS                               # all GPUs of a node,
                                                                            # and across nodes

Under the launcher, torchrun's flags default from the rank environment it sets
(PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR/PORT): the run spec's
`compute` decides the processes, as TorchDistributor's num_processes did.

Order: validate the config, then (before any weight is built) fetch the data to a per-run
cache when it is remote and check its splits and labels; then the model, the Trainer and
training. Evaluation and checkpoints each epoch (or every N steps), the best model by
eval_loss kept and saved to output_dir/best. A remote output_dir (dbfs:/Volumes/...,
s3://) gets each checkpoint as soon as it is saved; a retry resumes from the newest one.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from launcher.errors import InputError
from launcher.train.hf.ranks import process_ranks
from launcher.train.main import require_extra, run_config_command

HF_EXTRA = ("torch", "transformers", "datasets", "accelerate")
COMPLETE_MARKER = "trainer_state.json"  # written into a checkpoint last; uploaded last


def main(argv: Sequence[str] | None = None) -> int:
    return run_config_command(
        argv,
        finetune,
        prog="python -m launcher.train.hf",
        description="Fine-tune a Hugging Face model with transformers' Trainer (under torchrun for several processes).",
        config_help="the recipe's config (the run spec's parameters; $PARAMETERS)",
        input_errors_on_rank_0_only=True,
    )


def finetune(config_path: str, overrides: Sequence[str] = ()) -> None:
    from launcher.train.hf.config import load_hf_config

    cfg = load_hf_config(config_path, overrides)
    require_extra(HF_EXTRA, "launcher.train.hf")
    from launcher.train.cache import run_cache_root
    from launcher.train.hf.data import load_data

    run_name = os.environ.get("RUN_NAME") or cfg.run_name
    cache = run_cache_root(os.environ, run_name) / "hf"
    _init_distributed()
    data = load_data(cfg, cache / "data")
    out = OutputDir(cfg.output_dir, cache / "output")
    trainer = build_trainer(cfg, data, out, run_name)
    resume = out.newest_checkpoint() if cfg.autoresume else None
    if resume and process_ranks()[0] == 0:
        print(f"resuming from {resume}", file=sys.stderr, flush=True)
    trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    best = out.local / "best"
    trainer.save_model(str(best))
    if trainer.is_world_process_zero():
        data.tokenizer.save_pretrained(str(best))
        out.publish(best, "best")
    _barrier()


def _init_distributed() -> None:
    """Join the process group before reading data, so that one rank per node fetches it."""
    import torch
    import torch.distributed as dist

    _, local_rank, world_size = process_ranks()
    if world_size > 1 and not dist.is_initialized():
        if torch.cuda.is_available():
            torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")


def _barrier() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()


class OutputDir:
    """output_dir: local, or remote with a local staging copy that each save is uploaded from."""

    def __init__(self, uri: str, staging: Path):
        from launcher.storage import is_remote

        self.uri = uri
        self.remote = None
        if is_remote(uri):
            self.local = staging
            # Each node's first process reads checkpoints; only global rank 0 writes them.
            if process_ranks()[1] == 0:
                from launcher.storage import open_store

                self.remote = open_store(uri)  # the run's credentials, from its secrets
        else:
            self.local = Path(uri).expanduser()
        self.writes = self.remote is not None and process_ranks()[0] == 0

    @staticmethod
    def _steps(names: Sequence[str]) -> dict[int, str]:
        out = {}
        for n in names:
            if n.startswith("checkpoint-") and n[len("checkpoint-") :].isdigit():
                out[int(n[len("checkpoint-") :])] = n
        return out

    def newest_checkpoint(self) -> Path | None:
        """The newest complete checkpoint, local or remote (fetched by each node's first
        process; the other processes wait for it)."""
        flag = self.local / ".resume-step"
        if process_ranks()[1] == 0:
            local = {
                s
                for s, n in self._steps([p.name for p in self.local.glob("checkpoint-*")]).items()
                if (self.local / n / COMPLETE_MARKER).is_file()
            }
            newest = max(local, default=-1)
            if self.remote is not None:
                files = self.remote.files()
                complete = [f.split("/")[0] for f in files if f.count("/") == 1 and f.endswith("/" + COMPLETE_MARKER)]
                remote = max(self._steps(complete), default=-1)
                if remote > newest:
                    name = f"checkpoint-{remote}"
                    self.remote.download_tree(self.local / name, name)
                    newest = remote
            flag.parent.mkdir(parents=True, exist_ok=True)
            flag.write_text(str(newest))
        _barrier()
        step = int(flag.read_text())
        return self.local / f"checkpoint-{step}" if step >= 0 else None

    def publish(self, local_dir: Path, name: str) -> None:
        """Upload a saved directory (a checkpoint, the best model) as output_dir/<name>, marker last."""
        if not self.writes:
            return
        assert self.remote is not None  # only a process with a remote writes
        self.remote.upload_tree(local_dir, name, last=(COMPLETE_MARKER,))

    def prune(self) -> None:
        """Remove remote checkpoints the Trainer rotated out locally (save_total_limit)."""
        if not self.writes:
            return
        assert self.remote is not None  # only a process with a remote writes
        kept = {p.name for p in self.local.glob("checkpoint-*")}
        for rel in self.remote.files():
            top = rel.split("/")[0]
            if top.startswith("checkpoint-") and top not in kept:
                self.remote.delete(rel)


def compute_metrics_for(num_labels: int, average: str | None):
    """Accuracy and F1 from the eval logits, with numpy: nothing is loaded from the hub."""
    import numpy as np

    avg = average or ("binary" if num_labels == 2 else "macro")

    def compute(eval_pred: Any) -> dict[str, float]:
        logits, labels = eval_pred
        logits = logits[0] if isinstance(logits, tuple) else logits
        pred = np.asarray(logits).argmax(axis=-1)
        labels = np.asarray(labels)
        return {"accuracy": float((pred == labels).mean()), "f1": f1_score(labels, pred, num_labels, avg)}

    return compute


def f1_score(labels: Any, pred: Any, num_labels: int, average: str) -> float:
    import numpy as np

    classes = [1] if average == "binary" else list(range(num_labels))
    tp = np.array([np.sum((pred == c) & (labels == c)) for c in classes], dtype=float)
    fp = np.array([np.sum((pred == c) & (labels != c)) for c in classes], dtype=float)
    fn = np.array([np.sum((pred != c) & (labels == c)) for c in classes], dtype=float)
    if average == "micro":
        tp, fp, fn = tp.sum(keepdims=True), fp.sum(keepdims=True), fn.sum(keepdims=True)
    denom = 2 * tp + fp + fn
    f1 = np.divide(2 * tp, denom, out=np.zeros_like(tp), where=denom > 0)
    if average == "weighted":
        support = tp + fn
        return float((f1 * support).sum() / support.sum()) if support.sum() else 0.0
    return float(f1.mean())


def build_trainer(cfg: Any, data: Any, out: OutputDir, run_name: str | None) -> Any:
    import torch
    import transformers
    from transformers import PrinterCallback, TrainingArguments

    # Not `from transformers import Trainer`: to a type checker that name is transformers'
    # dummy class for when torch is missing, which has none of the Trainer's methods.
    from transformers.trainer import Trainer

    from launcher.train.hf.callbacks import RecordsCallback, SyncBestCheckpoint, UploadCallback
    from launcher.train.hf.model import build_model
    from launcher.train.trackers import hf_report_to

    transformers.logging.set_verbosity_warning()
    model = build_model(cfg, data)
    t = cfg.training
    report_to, tracker_env, tracker_args = hf_report_to(cfg.loggers)
    os.environ.update(tracker_env)
    on_gpu = torch.cuda.is_available()
    precision = t.precision or ("bf16" if on_gpu and torch.cuda.is_bf16_supported() else "fp32")
    if precision != "fp32" and not on_gpu:
        if process_ranks()[0] == 0:
            print(f"! precision {precision} needs a GPU; training in fp32 on CPU", file=sys.stderr, flush=True)
        precision = "fp32"
    save_strategy = t.save_strategy or t.eval_strategy
    kwargs: dict[str, Any] = {
        "output_dir": str(out.local),
        "run_name": run_name,
        "num_train_epochs": t.num_train_epochs,
        "max_steps": t.max_steps,
        "per_device_train_batch_size": t.per_device_train_batch_size,
        "per_device_eval_batch_size": t.per_device_eval_batch_size or t.per_device_train_batch_size,
        "gradient_accumulation_steps": t.gradient_accumulation_steps,
        "learning_rate": t.learning_rate,
        "weight_decay": t.weight_decay,
        "warmup_ratio": t.warmup_ratio,
        "lr_scheduler_type": t.lr_scheduler_type,
        "eval_strategy": t.eval_strategy,
        "eval_steps": t.eval_steps,
        "save_strategy": save_strategy,
        "save_steps": t.save_steps or t.eval_steps or 500,
        "save_total_limit": t.save_total_limit,
        "load_best_model_at_end": t.load_best_model_at_end,
        "metric_for_best_model": t.metric_for_best_model,
        "greater_is_better": t.greater_is_better,
        "logging_strategy": "steps",
        "logging_steps": t.logging_steps,
        "seed": t.seed,
        "bf16": precision == "bf16",
        "fp16": precision == "fp16",
        "dataloader_num_workers": t.dataloader_num_workers,
        "report_to": report_to or "none",
        "disable_tqdm": True,
        "save_safetensors": True,
        "ddp_find_unused_parameters": False,
        **tracker_args,
        **t.extra,
    }
    if not on_gpu:
        kwargs["use_cpu"] = True
    try:
        args = TrainingArguments(**kwargs)
    except (TypeError, ValueError) as e:
        raise InputError(f"training: {str(e).splitlines()[0]}") from None
    world = args.world_size
    metrics = None
    if cfg.task == "sequence_classification":
        metrics = compute_metrics_for(data.num_labels, cfg.f1_average)
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=data.train,
        eval_dataset=data.eval,
        data_collator=data.collator,
        compute_metrics=metrics,
        callbacks=[
            RecordsCallback(
                global_batch_size=t.per_device_train_batch_size * t.gradient_accumulation_steps * world,
                seq_len=cfg.data.max_length,
            ),
            SyncBestCheckpoint(),
            UploadCallback(out),
        ],
    )
    # Our records replace the log dicts transformers prints to stdout.
    trainer.remove_callback(PrinterCallback)
    return trainer


def now() -> float:
    return time.monotonic()
