"""The HF recipe's config (the run spec's `parameters`), validated with file:line errors
like the MPT config (launcher.train.config.load_validated).

    task: sequence_classification        # or causal_lm
    model:
      name_or_path: distilbert-base-uncased   # a hub name or a local directory
      # config: {model_type: bert, ...}       # or: a fresh model built from a config
    tokenizer: ./out/tokenizer           # default: model.name_or_path
    data:
      path: dbfs:/Volumes/main/default/data/imdb   # empty: DATA_REMOTE (the spec's data.remote)
      train_split: train
      eval_split: test
    output_dir: dbfs:/Volumes/main/default/ckpt/{run_name}
    training: {num_train_epochs: 3, per_device_train_batch_size: 16, learning_rate: 5e-5, ...}
    loggers: {mlflow: {tracking_uri: ...}, tensorboard: {}, wandb: {}}
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from launcher.errors import SpecError
from launcher.train.config import _named
from launcher.train.trackers import TRACKERS

PosInt = Annotated[int, Field(ge=1)]
TASKS = ("sequence_classification", "causal_lm")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelConfig(_Model):
    name_or_path: str | None = None
    """A hub name or a local directory, loaded with from_pretrained."""
    config: dict[str, Any] | None = None
    """Build a fresh model from this config instead (model_type plus its fields)."""
    num_labels: PosInt | None = None
    """Default: the number of labels in the data's label mapping."""

    @model_validator(mode="after")
    def _one_source(self) -> ModelConfig:
        if (self.name_or_path is None) == (self.config is None):
            raise ValueError("give exactly one of name_or_path (a pretrained model) and config (a fresh one)")
        if self.config is not None and "model_type" not in self.config:
            raise ValueError("config needs model_type (e.g. bert, distilbert, gpt2)")
        return self


class DataConfig(_Model):
    path: str | None = None
    """A dataset saved with save_to_disk (what `launcher data prepare` writes): local,
    dbfs:/Volumes/... or s3://. Empty: DATA_REMOTE."""
    train_files: str | list[str] | None = None
    """Instead of path: Parquet, JSON Lines or CSV files (tokenized here)."""
    eval_files: str | list[str] | None = None
    train_split: str = "train"
    eval_split: str = "test"
    text_column: str = "text"
    label_column: str = "label"
    max_length: PosInt = 128


class TrainingConfig(_Model):
    """The transformers TrainingArguments the recipe sets; `extra` passes any other."""

    num_train_epochs: Annotated[float, Field(gt=0)] = 3.0
    max_steps: int = -1
    per_device_train_batch_size: PosInt = 16
    per_device_eval_batch_size: PosInt | None = None
    gradient_accumulation_steps: PosInt = 1
    learning_rate: Annotated[float, Field(gt=0)] = 5e-5
    weight_decay: Annotated[float, Field(ge=0)] = 0.0
    warmup_ratio: Annotated[float, Field(ge=0, lt=1)] = 0.0
    lr_scheduler_type: str = "linear"
    eval_strategy: Literal["epoch", "steps", "no"] = "epoch"
    eval_steps: PosInt | None = None
    save_strategy: Literal["epoch", "steps", "no"] | None = None
    """Default: the same as eval_strategy (load_best_model_at_end needs them equal)."""
    save_steps: PosInt | None = None
    save_total_limit: PosInt | None = 2
    load_best_model_at_end: bool = True
    metric_for_best_model: str = "eval_loss"
    greater_is_better: bool | None = None
    logging_steps: PosInt = 10
    seed: int = 42
    precision: Literal["fp32", "bf16", "fp16"] | None = None
    """Default: bf16 on GPUs that support it, fp32 otherwise."""
    dataloader_num_workers: Annotated[int, Field(ge=0)] = 0
    extra: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _steps(self) -> TrainingConfig:
        if self.eval_strategy == "steps" and self.eval_steps is None:
            raise ValueError("eval_strategy: steps needs eval_steps")
        save = self.save_strategy or self.eval_strategy
        if save == "steps" and (self.save_steps or self.eval_steps) is None:
            raise ValueError("save_strategy: steps needs save_steps")
        if self.load_best_model_at_end and save != self.eval_strategy:
            raise ValueError(
                f"load_best_model_at_end needs save_strategy equal to eval_strategy ({save} vs {self.eval_strategy})"
            )
        if self.load_best_model_at_end and self.eval_strategy == "no":
            raise ValueError("load_best_model_at_end needs evaluation: set eval_strategy to epoch or steps")
        return self


class HFConfig(_Model):
    variables: dict[str, Any] = Field(default_factory=dict)
    run_name: str | None = None
    task: Literal["sequence_classification", "causal_lm"] = "sequence_classification"
    model: ModelConfig
    tokenizer: str | None = None
    data: DataConfig = Field(default_factory=DataConfig)
    output_dir: str
    """Checkpoints and the best model: local, dbfs:/Volumes/... or s3://. {run_name} is replaced."""
    training: TrainingConfig = Field(default_factory=TrainingConfig)
    autoresume: bool = True
    """Resume from the newest checkpoint in output_dir (a retry of the run finds it)."""
    f1_average: Literal["binary", "macro", "micro", "weighted"] | None = None
    """Default: binary with two labels, macro with more."""
    loggers: Annotated[dict[str, dict[str, Any]], _named("logger", TRACKERS)] = Field(default_factory=dict)

    @field_validator("variables", mode="before")
    @classmethod
    def _none_is_empty(cls, v: Any) -> Any:
        return {} if v is None else v

    @field_validator("output_dir")
    @classmethod
    def _output_dir(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be empty")
        if v.startswith("dbfs:/") and not v.startswith("dbfs:/Volumes/"):
            raise ValueError(
                "a dbfs:/ output_dir must be a Unity Catalog Volume: dbfs:/Volumes/<catalog>/<schema>/<volume>/..."
            )
        return v.strip()

    @model_validator(mode="after")
    def _task(self) -> HFConfig:
        if self.tokenizer is None and self.model.name_or_path is None:
            raise ValueError("tokenizer is required when the model is built from a config")
        return self


def load_hf_config(path: str | Path, overrides: Sequence[str] = (), env: Mapping[str, str] | None = None) -> HFConfig:
    """Read and validate; fill an empty data.path from DATA_REMOTE, and {run_name}."""
    from launcher.train.config import load_validated

    env = os.environ if env is None else env
    cfg, issue = load_validated(path, overrides, HFConfig, "model, data, output_dir")
    d = cfg.data
    if d.path is None and d.train_files is None:
        if env.get("DATA_REMOTE", "").strip():
            d.path = env["DATA_REMOTE"].strip()
        else:
            raise SpecError(
                [
                    issue(
                        ("data", "path"),
                        "is empty and DATA_REMOTE is not set: give data.remote in the "
                        "run spec, or data.path (or data.train_files) here",
                    )
                ]
            )
    if d.path is not None and d.train_files is not None:
        raise SpecError(
            [issue(("data", "train_files"), "give data.path (a prepared dataset) or data.train_files, not both")]
        )
    run_name = env.get("RUN_NAME") or cfg.run_name or "run"
    cfg.output_dir = cfg.output_dir.replace("{run_name}", run_name)
    return cfg
