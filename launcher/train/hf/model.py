"""The HF recipe's model: pretrained (a hub name or a local directory, the real from_pretrained
path) or fresh from a config, with the data's label mapping for sequence classification."""

from __future__ import annotations

from typing import Any

from launcher.errors import InputError


def build_model(cfg: Any, data: Any) -> Any:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification

    m = cfg.model
    extra: dict[str, Any] = {}
    auto: type[AutoModelForCausalLM | AutoModelForSequenceClassification] = AutoModelForCausalLM
    if cfg.task == "sequence_classification":
        auto = AutoModelForSequenceClassification
        id2label = data.id2label or {i: f"LABEL_{i}" for i in range(data.num_labels)}
        if len(id2label) != data.num_labels:
            raise InputError(
                f"model.num_labels is {data.num_labels} but the data's label mapping has {len(id2label)} labels"
            )
        extra = {"num_labels": data.num_labels, "id2label": id2label, "label2id": {v: k for k, v in id2label.items()}}
    try:
        if m.name_or_path is not None:
            return auto.from_pretrained(m.name_or_path, **extra)
        config = dict(m.config)
        model_type = config.pop("model_type")
        # A fresh model fits the tokenizer unless told otherwise.
        config.setdefault("vocab_size", len(data.tokenizer))
        if data.tokenizer.pad_token_id is not None:
            config.setdefault("pad_token_id", data.tokenizer.pad_token_id)
        return auto.from_config(AutoConfig.for_model(model_type, **config, **extra))
    except (OSError, ValueError, KeyError) as e:
        raise InputError(f"model: {str(e).splitlines()[0]}") from None
