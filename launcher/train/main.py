"""The built-in trainer: `composer -m launcher.train PARAMETERS.yaml [path.to.key=value ...]`.

Order matters: the config is validated, then the data and credentials are
checked (pre-flight), all before torch allocates a tensor. Only then is the
process group initialised (NCCL on GPUs, gloo on CPU; the rank environment
comes from the composer launcher), and the model, data and Composer Trainer
built (the datasets' shared memory: launcher.train.data.shared_memory_registration).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from launcher.errors import InputError, LauncherError
from launcher.train.cache import assign_caches, remove_caches, streaming_errors

SAMPLE_LOG_ENV = "LAUNCHER_TRAIN_SAMPLE_LOG"
ARTIFACTS_ENV = "LAUNCHER_ARTIFACTS_DIR"
TRAIN_EXTRA = ("torch", "composer", "streaming", "transformers")
DEFAULT_SPEED_WINDOW = 10


def main(argv: Sequence[str] | None = None) -> int:
    return run_config_command(
        argv,
        train,
        prog="python -m launcher.train",
        description="Train an MPT model with Composer on MDS data (run it under `composer` for several GPUs).",
        config_help="the training config (the run spec's parameters; $PARAMETERS)",
    )


def run_config_command(
    argv: Sequence[str] | None,
    run: Callable[[str, Sequence[str]], None],
    *,
    prog: str,
    description: str,
    config_help: str,
    input_errors_on_rank_0_only: bool = False,
) -> int:
    """The command line both built-in trainers share: `CONFIG [path.to.key=VALUE ...]`, and a
    LauncherError as one `✗` line (plus its hint) and its exit code, never a traceback.
    With input_errors_on_rank_0_only, a bad config (which every rank finds alike) is told once."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("config", help=config_help)
    parser.add_argument("overrides", nargs="*", help="path.to.key=VALUE changes to the config")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        run(args.config, args.overrides)
    except LauncherError as e:
        if not input_errors_on_rank_0_only or os.environ.get("RANK", "0") == "0" or not isinstance(e, InputError):
            print(f"✗ {e.message}", file=sys.stderr, flush=True)
            if e.hint:
                print(f"  {e.hint}", file=sys.stderr, flush=True)
        return e.exit_code
    return 0


def require_extra(modules: Sequence[str], what: str) -> None:
    """An InputError naming the train extra's modules that are not installed."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise InputError(f"{what} needs the train extra ({', '.join(missing)} missing): pip install 'launcher[train]'")


def require_train_extra(what: str = "launcher.train") -> None:
    require_extra(TRAIN_EXTRA, what)


def _note(message: str) -> None:
    """A warning on the first rank only (all ranks reach the same conclusions)."""
    if os.environ.get("RANK", "0") == "0":
        print(f"! {message}", file=sys.stderr, flush=True)


def train(config_path: str, overrides: Sequence[str] = (), *, extra_callbacks: Sequence[Any] = ()) -> None:
    """Validate, pre-flight, train to the end. `extra_callbacks` (Composer Callbacks) run after
    the config's own, for programs that drive the trainer (bench/bench_trainer.py)."""
    from launcher.train.config import load_config
    from launcher.train.preflight import preflight

    cfg = load_config(config_path, overrides)
    if cfg.autoresume and not (cfg.run_name or os.environ.get("RUN_NAME") or os.environ.get("COMPOSER_RUN_NAME")):
        raise InputError(
            "autoresume needs a stable run name to find its checkpoints: set run_name in the config "
            "(the launcher sets RUN_NAME for runs it starts)"
        )
    require_train_extra()
    caches = assign_caches(cfg)
    datasets = preflight(cfg)
    with streaming_errors(loader_infos(datasets), download_timeouts(cfg)):
        trainer = build_trainer(cfg, datasets, extra_callbacks, own_caches=caches)
        try:
            trainer.fit()
        finally:
            trainer.close()
    finished(caches)


def loader_infos(datasets: dict[str, Any]) -> dict[str, Any]:
    return {f"{key}_loader": info for key, info in datasets.items()}


def download_timeouts(cfg: Any) -> dict[str, float]:
    return {n: getattr(cfg, n).dataset.download_timeout for n in ("train_loader", "eval_loader") if getattr(cfg, n)}


def finished(caches: list[Any]) -> None:
    """The run trained to the end: its caches go (one rank per node, once all ranks are done
    reading). After a failure they stay, for the retry."""
    from composer.utils import dist

    if dist.is_initialized():
        dist.barrier()
    if dist.get_local_rank() == 0:
        remove_caches(caches)


def build_trainer(
    cfg: Any, datasets: dict[str, Any], extra_callbacks: Sequence[Any] = (), *, own_caches: Sequence[Path] = ()
) -> Any:
    """`own_caches`: the streaming caches assign_caches chose for this run."""
    import torch
    from composer import Trainer
    from composer.core import Evaluator
    from composer.utils import dist, get_device, reproducibility

    from launcher.train.data import build_dataloader
    from launcher.train.metrics_logger import LauncherMetricsLogger, SampleAudit
    from launcher.train.model import build_model
    from launcher.train.optim import build_optimizer, build_scheduler

    on_gpu = torch.cuda.is_available()
    device = get_device("gpu" if on_gpu else "cpu")
    world = dist.get_world_size()  # from WORLD_SIZE, before any process group exists
    if world > 1:
        # One process trains without a process group, as Composer's Trainer does (it makes
        # one itself for FSDP): with one, every step pays four all_reduces that reduce nothing.
        dist.initialize_dist(device, timeout=cfg.dist_timeout)
    if not on_gpu and "OMP_NUM_THREADS" not in os.environ:
        # Ranks sharing a node's cores: oversubscribed threads slow every rank down (torchrun
        # sets OMP_NUM_THREADS=1 for the same reason; the composer launcher does not).
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // dist.get_local_world_size()))
    if cfg.global_train_batch_size % world:
        raise InputError(
            f"global_train_batch_size ({cfg.global_train_batch_size}) must be a multiple of the number of ranks ({world})"
        )
    device_batch = cfg.global_train_batch_size // world

    precision = cfg.precision or ("amp_bf16" if on_gpu else "fp32")
    if not on_gpu and precision != "fp32":
        _note(f"precision {precision} needs a GPU; training in fp32 on CPU")
        precision = "fp32"
    parallelism = None
    if cfg.fsdp_config is not None:
        if on_gpu:
            parallelism = {"fsdp": dict(cfg.fsdp_config)}
        else:
            _note("fsdp_config is ignored on CPU (FSDP needs GPUs); training with plain data parallelism")
    if cfg.model.attn_config.attn_impl != "torch":
        _note(
            f"attn_impl {cfg.model.attn_config.attn_impl} is not available in Hugging Face's MPT; using torch attention"
        )

    # Options Composer checks only when each callback is built: before any weight is.
    train_callbacks = [*callbacks(cfg), *extra_callbacks]

    reproducibility.seed_all(cfg.seed)
    tokenizer = load_tokenizer(cfg)
    model = build_model(cfg.model, tokenizer, count_flops=on_gpu)

    train_data = build_dataloader(datasets["train"], cfg.train_loader, device_batch, own_caches)
    evaluators = []
    if "eval" in datasets:
        eval_batch = cfg.device_eval_batch_size or device_batch
        evaluators.append(
            Evaluator(
                label="eval",
                dataloader=build_dataloader(datasets["eval"], cfg.eval_loader, eval_batch, own_caches),
                metric_names=["LanguageCrossEntropy", "LanguagePerplexity"],
            )
        )

    loggers: list[Any] = [
        LauncherMetricsLogger(
            folders=metric_folders(cfg),
            global_batch_size=cfg.global_train_batch_size,
            seq_len=cfg.model.max_seq_len,
            console_interval=cfg.console_log_interval if cfg.log_to_console else None,
        ),
        *extra_loggers(cfg),
    ]
    if os.environ.get(SAMPLE_LOG_ENV):
        loggers.append(SampleAudit(os.environ[SAMPLE_LOG_ENV]))

    trainer = Trainer(
        model=model,
        train_dataloader=train_data,
        eval_dataloader=evaluators or None,
        eval_interval=(cfg.eval_interval or cfg.max_duration) if evaluators else 1,
        eval_subset_num_batches=cfg.eval_subset_num_batches,
        optimizers=build_optimizer(cfg.optimizer, model.parameters()),
        schedulers=build_scheduler(cfg.scheduler),
        max_duration=cfg.max_duration,
        algorithms=algorithms(cfg),
        callbacks=train_callbacks,
        loggers=loggers,
        run_name=cfg.run_name,
        progress_bar=cfg.progress_bar,
        # The console gets our one progress line per interval (LauncherMetricsLogger), not
        # Composer's block of every metric: those are in the records, for `launcher metrics`.
        log_to_console=False,
        python_log_level=cfg.python_log_level,
        load_path=cfg.load_path,
        load_weights_only=cfg.load_weights_only,
        save_folder=cfg.save_folder,
        save_interval=cfg.save_interval,
        save_num_checkpoints_to_keep=cfg.save_num_checkpoints_to_keep,
        # A resumed attempt redoes the steps after its checkpoint, and may save checkpoints an
        # earlier attempt had saved (or half-uploaded) before it died: they must be replaced.
        save_overwrite=cfg.save_overwrite or cfg.autoresume,
        save_weights_only=cfg.save_weights_only,
        autoresume=cfg.autoresume,
        parallelism_config=parallelism,
        device=device,
        precision=precision,
        device_train_microbatch_size=cfg.device_train_microbatch_size or device_batch,
        seed=cfg.seed,
        dist_timeout=cfg.dist_timeout,
    )
    poll_uploads_often(trainer)
    return trainer


SYMLINK_POLL_SECONDS = 1.0
"""How often Composer looks whether a checkpoint's upload has landed before it uploads the
`latest` symlink that points at it (its default, 30 s, is a private attribute its own tests
shorten): the end of training waits for that symlink, so with a remote save_folder every run
could end with up to 30 s of idle GPUs. One HEAD request a second is nothing beside that."""


def poll_uploads_often(trainer: Any) -> None:
    for callback in trainer.state.callbacks:
        if hasattr(callback, "_symlink_upload_wait_before_next_try_in_seconds"):
            callback._symlink_upload_wait_before_next_try_in_seconds = SYMLINK_POLL_SECONDS


def load_tokenizer(cfg: Any) -> Any:
    from launcher.data.tokenizer import load_tokenizer as load

    tok = load(cfg.tokenizer.name)
    for key, value in cfg.tokenizer.kwargs.items():
        setattr(tok, key, value)
    if len(tok) > cfg.model.vocab_size:
        raise InputError(
            f"tokenizer {cfg.tokenizer.name} has {len(tok)} tokens but model.vocab_size is {cfg.model.vocab_size}"
        )
    return tok


def metric_folders(cfg: Any) -> list[str]:
    folders = []
    if os.environ.get(ARTIFACTS_ENV, "").strip():
        folders.append(os.environ[ARTIFACTS_ENV].strip())
    folder = cfg.loggers.get("jsonl", {}).get("folder")
    if folder:
        folders.append(str(folder))
    return folders


def extra_loggers(cfg: Any) -> list[Any]:
    from launcher.train.trackers import composer_loggers

    jsonl = cfg.loggers.get("jsonl", {})
    unknown = set(jsonl) - {"folder"}
    if unknown:
        raise InputError(f"loggers.jsonl: unknown option(s) {', '.join(sorted(unknown))}; it takes: folder")
    return composer_loggers(cfg.loggers)


def callbacks(cfg: Any) -> list[Any]:
    from composer.callbacks import LRMonitor, MemoryMonitor, OptimizerMonitor, RuntimeEstimator, SpeedMonitor

    from launcher.train.collector import ScheduledGarbageCollector

    classes = {
        "speed_monitor": SpeedMonitor,
        "lr_monitor": LRMonitor,
        "memory_monitor": MemoryMonitor,
        "runtime_estimator": RuntimeEstimator,
        "optimizer_monitor": OptimizerMonitor,
        "scheduled_gc": ScheduledGarbageCollector,
    }
    wanted = {name: dict(kwargs) for name, kwargs in cfg.callbacks.items()}
    # Throughput and LR are part of every run's metrics, listed or not; wall-clock
    # times (time/train, time/total) in seconds, which ETA estimates need.
    wanted.setdefault("speed_monitor", {})
    wanted["speed_monitor"].setdefault("window_size", DEFAULT_SPEED_WINDOW)
    wanted["speed_monitor"].setdefault("time_unit", "seconds")
    wanted.setdefault("lr_monitor", {})
    wanted.setdefault("scheduled_gc", {})  # Python's collector between steps, not inside them
    from launcher.train.trackers import construct

    return [construct(f"callbacks.{name}", classes[name], kwargs) for name, kwargs in wanted.items()]


def algorithms(cfg: Any) -> list[Any]:
    out = []
    gc = cfg.algorithms.gradient_clipping
    if gc is not None:
        from composer.algorithms import GradientClipping

        out.append(GradientClipping(clipping_type=gc.clipping_type, clipping_threshold=gc.clipping_threshold))
    return out
