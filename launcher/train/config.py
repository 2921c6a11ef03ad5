"""The training config (the run spec's `parameters`), llm-foundry style, as pydantic models.

`load_config` reads the YAML with positions, applies `key=value` overrides,
resolves `${variables.x}` references, validates, and fills an empty
`dataset.remote` from DATA_REMOTE. Every problem is a SpecIssue at
file:line:col, raised before torch is imported.

Fields that llm-foundry's own MPT has but Hugging Face's MptForCausalLM does
not implement (RoPE, learned position embeddings, biases, an MLP expansion
other than 4, ...) are accepted only at the value HF implements; any other value
is an error rather than a silently different model.
"""

from __future__ import annotations

import difflib
import os
import re
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

from launcher.errors import SpecError, SpecIssue
from launcher.spec.issues import validation_issues
from launcher.train.interp import InterpolationError, interpolate

OVERRIDE = "command line"

# Composer time strings: 100ba, 2ep, 1e6tok, 5000sp, 0.5dur.
_TIME = re.compile(r"^\s*[0-9]+(\.[0-9]*)?(e[0-9]+)?(ep|ba|sp|tok|dur)\s*$", re.IGNORECASE)


def _time(allow_dur: bool) -> Any:
    def check(v: Any) -> str:
        if isinstance(v, bool):
            raise ValueError(f"must be a time such as 100ba, 1ep or 1e6tok, got {v!r}")
        if isinstance(v, int):  # Composer reads a bare integer as epochs
            return f"{v}ep"
        if not isinstance(v, str) or not _TIME.match(v):
            raise ValueError(f"must be a time such as 100ba, 1ep or 1e6tok, got {v!r}")
        if v.strip().lower().endswith("dur") and not allow_dur:
            raise ValueError(f"must be an absolute time (ba, ep, sp or tok), got {v!r}")
        return v.strip()

    return BeforeValidator(check)


Time = Annotated[str, _time(allow_dur=True)]
AbsTime = Annotated[str, _time(allow_dur=False)]
PosInt = Annotated[int, Field(ge=1)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _only(value: Any, allowed: Any, why: str) -> Any:
    if value != allowed:
        raise ValueError(why)
    return value


class AttnConfig(_Model):
    attn_type: Literal["multihead_attention"] = "multihead_attention"
    attn_impl: Literal["torch", "flash", "triton"] = "torch"
    """HF MPT always computes attention in PyTorch; flash/triton are accepted for llm-foundry compatibility."""
    attn_pdrop: Annotated[float, Field(ge=0, lt=1)] = 0.0
    clip_qkv: Annotated[float, Field(gt=0)] | None = None
    softmax_scale: Annotated[float, Field(gt=0)] | None = None
    qk_ln: bool = False
    alibi: bool = True
    alibi_bias_max: int = 8
    rope: bool = False
    prefix_lm: bool = False
    attn_uses_sequence_id: bool = False

    @field_validator("rope")
    @classmethod
    def _rope(cls, v: bool) -> bool:
        return _only(
            v, False, "RoPE is not supported: Hugging Face's MptForCausalLM implements only ALiBi; set alibi: true"
        )

    @field_validator("alibi")
    @classmethod
    def _alibi(cls, v: bool) -> bool:
        return _only(
            v,
            True,
            "Hugging Face's MptForCausalLM always uses ALiBi (it has no other position encoding); set alibi: true",
        )

    @field_validator("alibi_bias_max")
    @classmethod
    def _bias_max(cls, v: int) -> int:
        return _only(v, 8, "Hugging Face's MptForCausalLM fixes alibi_bias_max at 8")

    @field_validator("qk_ln", "prefix_lm", "attn_uses_sequence_id")
    @classmethod
    def _unsupported(cls, v: bool, info: Any) -> bool:
        return _only(v, False, f"{info.field_name} is not implemented by Hugging Face's MptForCausalLM")


class ModelConfig(_Model):
    name: Literal["mpt_causal_lm"] = "mpt_causal_lm"
    d_model: PosInt
    n_heads: PosInt
    n_layers: PosInt
    expansion_ratio: int = 4
    max_seq_len: PosInt
    vocab_size: PosInt
    attn_config: AttnConfig = Field(default_factory=AttnConfig)
    no_bias: bool = True
    learned_pos_emb: bool = False
    resid_pdrop: float = 0.0
    emb_pdrop: float = 0.0
    layer_norm_epsilon: Annotated[float, Field(gt=0)] = 1e-5
    norm_type: Literal["low_precision_layernorm", "layernorm"] = "low_precision_layernorm"
    initializer_range: Annotated[float, Field(gt=0)] = 0.02
    init_device: Literal["cpu", "meta", "mixed"] = "cpu"
    logit_scale: None = None

    @field_validator("expansion_ratio")
    @classmethod
    def _expansion(cls, v: int) -> int:
        return _only(v, 4, f"Hugging Face's MptForCausalLM fixes the MLP expansion ratio at 4, got {v}")

    @field_validator("no_bias")
    @classmethod
    def _no_bias(cls, v: bool) -> bool:
        return _only(v, True, "Hugging Face's MptForCausalLM has no biases; set no_bias: true")

    @field_validator("learned_pos_emb")
    @classmethod
    def _pos_emb(cls, v: bool) -> bool:
        return _only(
            v,
            False,
            "Hugging Face's MptForCausalLM has no learned position embeddings (it uses ALiBi); set learned_pos_emb: false",
        )

    @field_validator("resid_pdrop", "emb_pdrop")
    @classmethod
    def _dropouts(cls, v: float, info: Any) -> float:
        return _only(
            v, 0.0, f"{info.field_name} is not implemented by Hugging Face's MptForCausalLM; use attn_config.attn_pdrop"
        )

    @model_validator(mode="after")
    def _heads(self) -> ModelConfig:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of n_heads ({self.n_heads})")
        return self


def _tokenizer(v: Any) -> Any:
    return {"name": v} if isinstance(v, str) else v


class TokenizerConfig(_Model):
    name: str
    """A Hugging Face hub name or a local directory / tokenizer.json."""
    kwargs: dict[str, Any] = Field(default_factory=dict)


class DatasetConfig(_Model):
    remote: str | None = None
    """Where the converted MDS lives (dbfs:/Volumes/..., s3://, a local path). Empty: DATA_REMOTE."""
    local: str | None = None
    """The local cache for a remote. Empty: DATA_LOCAL, else a directory chosen by streaming."""
    split: str = "train"
    shuffle: bool = False
    shuffle_seed: int = 9176
    shuffle_algo: str = "py1e"
    shuffle_block_size: PosInt | None = None
    predownload: PosInt | None = None
    num_canonical_nodes: PosInt | None = None
    download_retry: Annotated[int, Field(ge=1)] = 2
    """Attempts per file (streaming counts the first one)."""
    download_timeout: Annotated[float, Field(gt=0)] = 60.0
    cache_limit: str | int | None = None
    max_seq_len: PosInt | None = None
    """llm-foundry repeats the sequence length here; when given it must equal model.max_seq_len."""

    @field_validator("remote")
    @classmethod
    def _remote(cls, v: str | None) -> str | None:
        if v is None or not str(v).strip():
            return None
        from launcher.spec.models import check_remote

        return check_remote(v)

    @field_validator("local")
    @classmethod
    def _local(cls, v: str | None) -> str | None:
        return v if v is None or str(v).strip() else None


class LoaderConfig(_Model):
    name: Literal["text"] = "text"
    dataset: DatasetConfig
    drop_last: bool = True
    num_workers: Annotated[int, Field(ge=0)] = 0
    pin_memory: bool = False
    prefetch_factor: PosInt | None = None
    persistent_workers: bool = False
    timeout: Annotated[float, Field(ge=0)] = 0


class OptimizerConfig(_Model):
    name: Literal["decoupled_adamw", "decoupled_lionw"]
    lr: Annotated[float, Field(gt=0)]
    betas: tuple[Annotated[float, Field(ge=0, lt=1)], Annotated[float, Field(ge=0, lt=1)]] = (0.9, 0.95)
    eps: Annotated[float, Field(gt=0)] = 1e-8
    weight_decay: Annotated[float, Field(ge=0)] = 0.0

    @field_validator("name", mode="before")
    @classmethod
    def _alias(cls, v: Any) -> Any:
        return "decoupled_lionw" if v == "decoupled_lion" else v


class SchedulerConfig(_Model):
    name: Literal["cosine_with_warmup", "linear_decay_with_warmup", "linear", "constant_with_warmup"]
    t_warmup: Time = "0ba"
    t_max: Time = "1dur"
    alpha_i: Annotated[float, Field(ge=0)] = 1.0
    """linear only: the LR multiplier at the start."""
    alpha_f: Annotated[float, Field(ge=0)] = 0.0


class GradientClipping(_Model):
    clipping_type: Literal["norm", "value", "adaptive"] = "norm"
    clipping_threshold: Annotated[float, Field(gt=0)] = 1.0


class Algorithms(_Model):
    gradient_clipping: GradientClipping | None = None


CALLBACKS = ("speed_monitor", "lr_monitor", "memory_monitor", "runtime_estimator", "optimizer_monitor", "scheduled_gc")
LOGGERS = ("jsonl", "wandb", "mlflow", "tensorboard")


def _named(kind: str, names: Sequence[str]) -> Any:
    def check(v: Any) -> Any:
        if v is None:
            return {}
        if not isinstance(v, Mapping):
            return v  # pydantic reports the type
        for key, kwargs in v.items():
            if key not in names:
                guess = difflib.get_close_matches(str(key), names, n=1)
                hint = f" (did you mean {guess[0]!r}?)" if guess else ""
                raise ValueError(f"unknown {kind} {key!r}{hint}; known: {', '.join(names)}")
            if kwargs is not None and not isinstance(kwargs, Mapping):
                raise ValueError(f"{kind} {key!r} takes a mapping of options, got {kwargs!r}")
        return {k: dict(kw or {}) for k, kw in v.items()}

    return BeforeValidator(check)


class TrainConfig(_Model):
    variables: dict[str, Any] = Field(default_factory=dict)
    run_name: str | None = None
    seed: int = 17
    max_seq_len: PosInt | None = None
    model: ModelConfig
    tokenizer: Annotated[TokenizerConfig, BeforeValidator(_tokenizer)]
    train_loader: LoaderConfig
    eval_loader: LoaderConfig | None = None
    optimizer: OptimizerConfig
    scheduler: SchedulerConfig = Field(default_factory=lambda: SchedulerConfig(name="constant_with_warmup"))
    algorithms: Algorithms = Field(default_factory=Algorithms)
    max_duration: AbsTime
    eval_interval: Time | None = None
    """Default: evaluate once, at the end."""
    eval_first: bool = False
    eval_subset_num_batches: int = -1
    global_train_batch_size: PosInt
    device_train_microbatch_size: PosInt | Literal["auto"] | None = None
    device_eval_batch_size: PosInt | None = None
    precision: Literal["fp32", "amp_fp16", "amp_bf16", "amp_fp8"] | None = None
    """Default: amp_bf16 on GPUs, fp32 on CPU."""
    fsdp_config: dict[str, Any] | None = None
    dist_timeout: Annotated[float, Field(gt=0)] = 600.0
    save_folder: str | None = None
    save_interval: Time = "1000ba"
    save_num_checkpoints_to_keep: int = -1
    save_overwrite: bool = False
    save_weights_only: bool = False
    autoresume: bool = False
    load_path: str | None = None
    load_weights_only: bool = False
    callbacks: Annotated[dict[str, dict[str, Any]], _named("callback", CALLBACKS)] = Field(default_factory=dict)
    loggers: Annotated[dict[str, dict[str, Any]], _named("logger", LOGGERS)] = Field(default_factory=dict)
    progress_bar: bool = False
    log_to_console: bool = True
    console_log_interval: Time = "1ba"
    python_log_level: str | None = None

    @field_validator("callbacks", "loggers", "variables", mode="before")
    @classmethod
    def _none_is_empty(cls, v: Any) -> Any:
        return {} if v is None else v

    @field_validator("run_name", "save_folder", "load_path", mode="before")
    @classmethod
    def _blank_is_none(cls, v: Any) -> Any:
        return None if isinstance(v, str) and not v.strip() else v

    @model_validator(mode="after")
    def _consistent(self) -> TrainConfig:
        msl = self.model.max_seq_len
        if self.max_seq_len is not None and self.max_seq_len != msl:
            raise ValueError(f"max_seq_len ({self.max_seq_len}) differs from model.max_seq_len ({msl})")
        for name in ("train_loader", "eval_loader"):
            loader = getattr(self, name)
            if loader is not None and loader.dataset.max_seq_len not in (None, msl):
                raise ValueError(
                    f"{name}.dataset.max_seq_len ({loader.dataset.max_seq_len}) differs from model.max_seq_len ({msl})"
                )
        if self.autoresume and not self.save_folder:
            raise ValueError("autoresume: true needs save_folder (where the checkpoints to resume from are)")
        return self


# ---------------------------------------------------------------- loading


M = typing.TypeVar("M", bound=BaseModel)
Locate = Callable[..., SpecIssue]


def load_validated(path: str | Path, overrides: Sequence[str], model: type[M], needs: str) -> tuple[M, Locate]:
    """Read a trainer's YAML config with positions, apply `key=value` overrides, resolve
    `${variables.x}`, validate against `model`. Returns the model and a function that places
    a later issue (`issue(path, message)`) at its file:line or at the command line. `needs`
    lists the top-level keys for the message about an empty file."""
    from launcher.spec.yamlpos import load_located, read_file

    file = str(path)
    raw = read_file(path, "a training config")
    text = raw.decode("utf-8", errors="replace")
    if not any(line.strip() and not line.lstrip().startswith("#") for line in text.splitlines()):
        raise SpecError([SpecIssue(f"is empty: a training config needs {needs}, ...", file=file)])
    located = load_located(raw, file)
    if not isinstance(located.data, dict):
        raise SpecError([SpecIssue(f"the top level must be a mapping ({needs}, ...)", file=file, line=1, column=1)])

    data = located.data
    try:
        overridden = set(apply_overrides(data, overrides))
    except ValueError as e:
        raise SpecError([SpecIssue(str(e), file=OVERRIDE)]) from None

    def issue(path: tuple, message: str, *, key: bool = False, at: tuple | None = None) -> SpecIssue:
        dotted = ".".join(str(p) for p in path)
        if any(path[: len(o)] == o for o in overridden):
            return SpecIssue(message, field=dotted, file=OVERRIDE)
        line, col = located.where(path if at is None else at, key=key)
        return SpecIssue(message, field=dotted, file=file, line=line, column=col)

    try:
        resolved = interpolate(data)
    except InterpolationError as e:
        raise SpecError([issue(e.path, e.message)]) from None
    try:
        cfg = model.model_validate(resolved)
    except ValidationError as e:
        raise SpecError(
            validation_issues(
                e, model, resolved, lambda p, at, m, key: issue(p, m, key=key, at=at), what="the training config"
            )
        ) from None
    return cfg, issue


def load_config(
    path: str | Path,
    overrides: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> TrainConfig:
    """Read, interpolate and validate a training config; fill empty remotes from DATA_REMOTE."""
    env = os.environ if env is None else env
    cfg, issue = load_validated(path, overrides, TrainConfig, "model, tokenizer, train_loader, optimizer")
    problems = _fill_remotes(cfg, env)
    if problems:
        raise SpecError([issue(p, m) for p, m in problems])
    return cfg


def apply_overrides(data: dict, overrides: Sequence[str]) -> dict[tuple[str, ...], str]:
    """Apply the trainers' `path.to.key=VALUE` overrides (VALUE is YAML) to `data` in place.
    Returns each override by the path it set; a malformed one is a ValueError saying why."""
    applied: dict[tuple[str, ...], str] = {}
    for item in overrides:
        dotted, sep, value_text = item.partition("=")
        keys = tuple(dotted.split("."))
        if not sep or not all(keys):
            raise ValueError(f"an override is path.to.field=VALUE, got {item!r}")
        try:
            value = yaml.safe_load(value_text) if value_text.strip() else None
        except yaml.YAMLError as e:
            raise ValueError(f"the override {item!r} is not a YAML value: {str(e).splitlines()[0]}") from None
        _set(data, keys, value)
        applied[keys] = item
    return applied


def _set(data: dict, keys: tuple[str, ...], value: Any) -> None:
    node = data
    for k in keys[:-1]:
        if not isinstance(node.get(k), dict):
            node[k] = {}
        node = node[k]
    node[keys[-1]] = value


def _fill_remotes(cfg: TrainConfig, env: Mapping[str, str]) -> list[tuple[tuple, str]]:
    """An empty dataset.remote takes DATA_REMOTE (the run spec's data.remote); an empty
    local takes DATA_LOCAL. Local-only data (remote empty, local given) stays as is."""
    from launcher.spec.models import check_remote

    problems = []
    for name in ("train_loader", "eval_loader"):
        loader: LoaderConfig | None = getattr(cfg, name)
        if loader is None:
            continue
        ds = loader.dataset
        if ds.local is None and env.get("DATA_LOCAL", "").strip():
            ds.local = env["DATA_LOCAL"].strip()
        if ds.remote is None and env.get("DATA_REMOTE", "").strip():
            try:
                ds.remote = check_remote(env["DATA_REMOTE"])
            except ValueError as e:
                problems.append(((name, "dataset", "remote"), f"DATA_REMOTE {e}"))
        if ds.remote is None and ds.local is None:
            problems.append(
                (
                    (name, "dataset", "remote"),
                    "is empty and DATA_REMOTE is not set: give data.remote in the run spec or dataset.remote here",
                )
            )
    return problems
