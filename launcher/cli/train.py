"""`launcher train PARAMETERS [key=value ...]`: the built-in trainer, as `composer -m launcher.train` runs it.

Where it runs:
- already inside a launched rank (RANK is set, e.g. by `composer` or torchrun): in this process;
- several GPUs on this node, or a multi-node rank environment (WORLD_SIZE larger
  than LOCAL_WORLD_SIZE), or `--nproc N` with N > 1: this process becomes the
  composer launcher (exec), which starts one process per GPU (or N) with NCCL,
  or gloo on CPU;
- otherwise (CPU, or a single GPU): in this process, without a process group.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import click

from launcher.errors import InputError


def plan_launch(
    parameters: str,
    overrides: Sequence[str],
    *,
    gpus: int,
    env: Mapping[str, str],
    nproc: int | None = None,
    python: str = sys.executable,
) -> list[str] | None:
    """The argv to exec (the composer launcher), or None to train in this process."""
    if env.get("RANK") is not None:
        return None
    try:
        world = int(env.get("WORLD_SIZE", "0") or 0)
        local_world = int(env.get("LOCAL_WORLD_SIZE", "0") or 0) or nproc or max(gpus, 1)
    except ValueError:
        raise InputError("WORLD_SIZE and LOCAL_WORLD_SIZE must be integers") from None
    multi_node = world > local_world
    wanted = nproc if nproc is not None else gpus
    if not multi_node and wanted <= 1:
        return None
    argv = [python, "-m", "composer.cli.launcher"]
    if nproc is not None:
        argv += ["-n", str(nproc)]
    return [*argv, "-m", "launcher.train", parameters, *overrides]


def _gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@click.command(
    "train",
    context_settings={"ignore_unknown_options": True, "help_option_names": ["-h", "--help"]},
)
@click.argument("parameters", metavar="PARAMETERS")
@click.argument("overrides", nargs=-1, metavar="[KEY=VALUE]...")
@click.option(
    "-n",
    "--nproc",
    type=click.IntRange(min=1),
    default=None,
    help="Processes on this node (default: one per GPU; one on CPU). With N > 1 on CPU, ranks use gloo.",
)
def train(parameters: str, overrides: tuple[str, ...], nproc: int | None) -> None:
    """Train an MPT model from a training config (a run spec's `parameters`, i.e. $PARAMETERS).

    KEY=VALUE pairs change the config, e.g. max_duration=10ba optimizer.lr=1e-4.
    """
    if not Path(parameters).is_file():
        raise InputError(f"{parameters}: no such file (the training config, usually $PARAMETERS)")
    for item in overrides:
        if "=" not in item:
            raise InputError(f"unexpected argument {item!r}: overrides are path.to.key=VALUE")

    # lazy: the trainer and its cache would double what a Tab on `launcher ` imports
    from launcher.train.main import require_train_extra
    from launcher.train.main import train as run_training

    require_train_extra("launcher train")
    argv = plan_launch(parameters, overrides, gpus=_gpu_count(), env=os.environ, nproc=nproc)
    if argv is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(argv[0], argv)
    # Errors (LauncherError) are printed and mapped to exit codes by the CLI, as for every command.
    run_training(parameters, overrides)
