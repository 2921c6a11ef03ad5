"""Experiment trackers, from one llm-foundry-style `loggers:` block, for both trainers:

    loggers:
      mlflow: {experiment_name: /Users/me/finetune, tracking_uri: file:./mlruns}
      tensorboard: {log_dir: ./tb}
      wandb: {project: my-project}

The MPT trainer builds Composer's own loggers from it (MLFlowLogger, TensorboardLogger,
WandBLogger, with their own options); the HF recipe maps it onto TrainingArguments'
report_to and the environment variables transformers' callbacks read. MLflow goes to the
workspace's tracking server when the run has Databricks credentials and no tracking_uri
is given, else to tracking_uri (any MLflow URI), else to MLflow's default (./mlruns).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from typing import Any

from launcher.errors import InputError
from launcher.metrics.export import allow_file_store

TRACKERS = ("mlflow", "tensorboard", "wandb")
# What the HF recipe understands of each block (Composer takes its loggers' own options).
HF_OPTIONS = {
    "mlflow": ("experiment_name", "tracking_uri", "run_name"),
    "tensorboard": ("log_dir",),
    "wandb": ("project", "entity", "name", "group"),
}

INIT_PREFIX = re.compile(r"^[\w.]+\.__init__\(\) ")  # "MLFlowLogger.__init__() got an unexpected ..."


def mlflow_tracking_uri(options: Mapping[str, Any], env: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if env is None else env
    if options.get("tracking_uri"):
        allow_file_store(str(options["tracking_uri"]))
        return str(options["tracking_uri"])
    if env.get("DATABRICKS_HOST", "").strip() and env.get("DATABRICKS_TOKEN", "").strip():
        return "databricks"
    return None


def construct(where: str, cls: Any, kwargs: dict[str, Any]) -> Any:
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise InputError(f"{where}: {INIT_PREFIX.sub('', str(e))}") from None
    except ImportError as e:
        raise InputError(f"{where} needs a package that is not installed: {str(e).splitlines()[0]}") from None


@functools.cache
def mlflow_logger_class() -> type:
    """Composer's MLFlowLogger, post-closed once. Composer's Engine post-closes its loggers on
    trainer.close() and again from the atexit hook that close() leaves registered; with a
    Databricks tracking URI the second time signals the run-monitor process the first one
    already reaped, and every finished run ended in "Error running MLFlowLogger.post_close()"
    and a ProcessLookupError traceback."""
    from composer.loggers import MLFlowLogger

    class OncePostClosedMLFlowLogger(MLFlowLogger):
        def post_close(self) -> None:
            if getattr(self, "_launcher_post_closed", False):
                return
            self._launcher_post_closed = True
            super().post_close()

    return OncePostClosedMLFlowLogger


def composer_loggers(loggers: Mapping[str, Mapping[str, Any]], env: Mapping[str, str] | None = None) -> list[Any]:
    """Composer LoggerDestinations for the mlflow/tensorboard/wandb entries."""
    from composer.loggers import TensorboardLogger, WandBLogger

    classes = {"wandb": WandBLogger, "mlflow": mlflow_logger_class(), "tensorboard": TensorboardLogger}
    out = []
    for name, options in loggers.items():
        if name not in classes:
            continue
        kwargs = dict(options)
        if name == "mlflow":
            uri = mlflow_tracking_uri(kwargs, env)
            if uri:
                kwargs["tracking_uri"] = uri
        out.append(construct(f"loggers.{name}", classes[name], kwargs))
    return out


def hf_report_to(
    loggers: Mapping[str, Mapping[str, Any]], env: Mapping[str, str] | None = None
) -> tuple[list[str], dict[str, str], dict[str, Any]]:
    """(report_to, environment variables to set, extra TrainingArguments) for transformers."""
    report: list[str] = []
    env_out: dict[str, str] = {}
    args: dict[str, Any] = {}
    for name, options in loggers.items():
        unknown = set(options) - set(HF_OPTIONS[name])
        if unknown:
            raise InputError(
                f"loggers.{name}: unknown option(s) {', '.join(sorted(unknown))}; the HF recipe takes: {', '.join(HF_OPTIONS[name])}"
            )
        report.append(name)
        if name == "mlflow":
            uri = mlflow_tracking_uri(options, env)
            if uri:
                env_out["MLFLOW_TRACKING_URI"] = uri
            if options.get("experiment_name"):
                env_out["MLFLOW_EXPERIMENT_NAME"] = str(options["experiment_name"])
            if options.get("run_name"):
                args["run_name"] = str(options["run_name"])
        elif name == "tensorboard":
            if options.get("log_dir"):
                args["logging_dir"] = str(options["log_dir"])
        elif name == "wandb":
            for key, var in (
                ("project", "WANDB_PROJECT"),
                ("entity", "WANDB_ENTITY"),
                ("group", "WANDB_RUN_GROUP"),
                ("name", "WANDB_NAME"),
            ):
                if options.get(key):
                    env_out[var] = str(options[key])
    return report, env_out, args
