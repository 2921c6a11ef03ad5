"""The model: Hugging Face's MptForCausalLM in Composer's HuggingFaceModel.

HF's causal-LM loss shifts the labels itself (labels = input_ids); Composer's
LanguageCrossEntropy/LanguagePerplexity (eval) see shifted labels too (shift_labels).
On GPUs, `flops_per_batch` lets Composer's SpeedMonitor report FLOP/s and, where
it knows the GPU's peak, MFU. Not on CPU: SpeedMonitor sums it across ranks with an
all_reduce and a host sync every step, a per-step cost with no MFU to show for it.
"""

from __future__ import annotations

from typing import Any

from composer.metrics.nlp import LanguageCrossEntropy, LanguagePerplexity
from composer.models import HuggingFaceModel


def mpt_config(m: Any) -> Any:
    """An HF MptConfig from a ModelConfig (only fields HF MPT implements reach here)."""
    from transformers import MptConfig
    from transformers.models.mpt.configuration_mpt import MptAttentionConfig

    a = m.attn_config
    return MptConfig(
        d_model=m.d_model,
        n_heads=m.n_heads,
        n_layers=m.n_layers,
        expansion_ratio=m.expansion_ratio,
        max_seq_len=m.max_seq_len,
        vocab_size=m.vocab_size,
        layer_norm_epsilon=m.layer_norm_epsilon,
        learned_pos_emb=False,
        no_bias=True,
        initializer_range=m.initializer_range,
        use_cache=False,
        attn_config=MptAttentionConfig(
            attn_type=a.attn_type,
            attn_impl="torch",
            attn_pdrop=a.attn_pdrop,
            clip_qkv=a.clip_qkv,
            softmax_scale=a.softmax_scale,
            alibi=True,
            alibi_bias_max=a.alibi_bias_max,
        ),
    )


class ComposerMPT(HuggingFaceModel):
    def __init__(self, model: Any, tokenizer: Any = None):
        super().__init__(
            model,
            tokenizer=tokenizer,
            use_logits=True,
            # No train metrics: the loss already is the train cross-entropy, and computing it
            # twice per batch costs throughput.
            metrics=None,
            eval_metrics=[LanguageCrossEntropy(), LanguagePerplexity()],
            shift_labels=True,
        )
        cfg = model.config
        self._n_params = sum(p.numel() for p in model.parameters())
        self._n_layers = cfg.n_layers
        self._d_model = cfg.d_model


class ComposerMPTWithFlops(ComposerMPT):
    def flops_per_batch(self, batch: dict[str, Any]) -> float:
        # Forward + backward = 3x forward; forward = 2 FLOPs per parameter per token plus attention
        # (QK^T and AV: 2 matmuls of seq^2 * d_model per layer). As llm-foundry counts it.
        bs, seq = batch["input_ids"].shape[:2]
        params_flops = 2 * self._n_params * seq
        attn_flops = self._n_layers * 2 * 2 * self._d_model * seq * seq
        return float((params_flops + attn_flops) * 3 * bs)


def build_model(m: Any, tokenizer: Any = None, *, count_flops: bool = False) -> ComposerMPT:
    from transformers import MptForCausalLM

    cls = ComposerMPTWithFlops if count_flops else ComposerMPT
    return cls(MptForCausalLM(mpt_config(m)), tokenizer)
