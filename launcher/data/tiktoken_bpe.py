"""A tiktoken Encoding that gives exactly the ids of a Hugging Face byte-level BPE, or the reason
there is none. tiktoken's BPE is several times faster than the tokenizers library's.

Exactness is decided from the tokenizer's definition, never by sampling text:
- the same pre-tokenizer: ByteLevel with GPT-2's regex (tiktoken's r50k pattern is the same
  one) and no prefix space, no normalizer, and a post-processor that adds nothing when asked
  for no special tokens;
- the same model: every byte has a token; ranks are the token ids; and each merged token has
  exactly one merge, (left, right), which is the split tiktoken's BPE reaches on the token's
  bytes when it may only merge ranks below the token's own (how transformers' TikTokenConverter
  and tiktoken's educational `bpe_encode` relate ranks and merges), with the merges in the
  order of their tokens' ranks. Then both algorithms merge the same pair at every step, so
  they agree on every word;
- the same added tokens: each one special, matched as it is written (no lstrip, rstrip or
  single_word), and none a prefix of another (tiktoken takes the first alternative where the
  tokenizers library takes the longest match).
"""

from __future__ import annotations

import functools
import gc
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # an optional dependency, imported where an encoding is built
    import tiktoken

# What the model may hold beyond vocab and merges for the two BPEs to agree.
_MODEL_DEFAULTS = {
    "dropout": None,
    "continuing_subword_prefix": None,
    "end_of_word_suffix": None,
    "byte_fallback": False,
}
# Post-processors that add ids only for add_special_tokens=True (the others touch offsets).
_QUIET_POST_PROCESSORS = ("ByteLevel", "TemplateProcessing", "RobertaProcessing", "BertProcessing")


@dataclass(frozen=True)
class Exactness:
    """The tiktoken Encoding for a tokenizer, or None and why not."""

    encoding: tiktoken.Encoding | None
    reason: str  # why there is no encoding; "" when there is one


def exact_tiktoken(backend, split_special_tokens: bool) -> Exactness:
    """The tiktoken Encoding that encodes as `backend` (a tokenizers.Tokenizer) does with
    add_special_tokens=False and encode_special_tokens=split_special_tokens."""
    return _exact_tiktoken(backend.to_str(), split_special_tokens)


# The check takes ~0.4 s for a 32k vocabulary: once per process and tokenizer (a Spark
# Python worker converts partition after partition; the bench converts again and again).
@functools.lru_cache(maxsize=4)
def _exact_tiktoken(tokenizer_json: str, split_special_tokens: bool) -> Exactness:
    try:
        import tiktoken
        from tiktoken_ext.openai_public import r50k_pat_str
        from transformers.models.gpt2.tokenization_gpt2 import bytes_to_unicode
    except ImportError as e:
        return Exactness(None, f"{e.name} is not installed")
    # The check builds ~100k small objects; with transformers loaded, the collections they
    # would set off scan a large heap, and took most of the check's time.
    collecting = gc.isenabled()
    gc.disable()
    try:
        spec = json.loads(tokenizer_json)
        reason = _pipeline_difference(spec) or _added_tokens_difference(spec, split_special_tokens)
        if reason:
            return Exactness(None, reason)
        ranks: dict[bytes, int] = {}
        reason = _ranks(spec, {ch: b for b, ch in bytes_to_unicode().items()}, ranks)
        if reason:
            return Exactness(None, reason)
        specials = {} if split_special_tokens else {t["content"]: t["id"] for t in spec.get("added_tokens", [])}
        encoding = tiktoken.Encoding(
            f"exact-{len(ranks)}", pat_str=r50k_pat_str, mergeable_ranks=ranks, special_tokens=specials
        )
    finally:
        if collecting:
            gc.enable()
    return Exactness(encoding, "")


def _pipeline_difference(spec: dict) -> str:
    model = spec["model"]
    if model.get("type") != "BPE":
        return f"model {model.get('type')}, not BPE"
    if spec.get("normalizer") is not None:
        return f"a normalizer ({spec['normalizer'].get('type')})"
    pre = spec.get("pre_tokenizer") or {}
    if pre.get("type") != "ByteLevel" or not pre.get("use_regex", True):
        return f"pre-tokenizer {pre.get('type')}, not byte-level with GPT-2's regex"
    if pre.get("add_prefix_space"):
        return "add_prefix_space"
    post = spec.get("post_processor") or {}
    posts = (post.get("processors", []) if post.get("type") == "Sequence" else [post]) if post else []
    if any(p.get("type") not in _QUIET_POST_PROCESSORS for p in posts):
        return f"post-processor {post.get('type')}"
    for key, value in _MODEL_DEFAULTS.items():
        if model.get(key, value) != value:
            return f"BPE {key} is {model[key]!r}"
    return ""


def _added_tokens_difference(spec: dict, split_special_tokens: bool) -> str:
    added = spec.get("added_tokens", [])
    for t in added:
        if not t.get("special"):  # split out of the text even with split_special_tokens
            return f"added token {t['content']!r} is not special"
        for flag in ("lstrip", "rstrip", "single_word"):
            if t.get(flag):
                return f"added token {t['content']!r} has {flag}"
    contents = [] if split_special_tokens else [t["content"] for t in added]
    for a in contents:
        for b in contents:
            if a != b and b.startswith(a):
                return f"added token {a!r} is a prefix of {b!r}"
    model = spec["model"]
    if model.get("ignore_merges") and any(t["content"] in model["vocab"] for t in added):
        return "ignore_merges can give an added token's id to a word"
    return ""


def _ranks(spec: dict, byte_of: dict[str, int], ranks: dict[bytes, int]) -> str:
    """Fill `ranks` (bytes -> id) from the model's vocab and check its merges against them;
    the difference found, or ""."""
    model = spec["model"]
    added_ids = {t["id"] for t in spec.get("added_tokens", [])}
    alphabet = set(byte_of)
    # byte-level text -> the bytes it stands for, in C: each alphabet character -> chr(byte)
    to_latin1 = str.maketrans({ch: chr(b) for ch, b in byte_of.items()})
    vocab = {token: rank for token, rank in model["vocab"].items() if rank not in added_ids}
    # (added tokens, e.g. BpeTrainer's special tokens, sit in the vocab but no merge makes them)
    stray = set("".join(vocab)) - alphabet
    if stray:
        return f"vocab characters outside the byte-level alphabet: {''.join(sorted(stray))[:20]!r}"
    for token, rank in vocab.items():
        ranks[token.translate(to_latin1).encode("latin-1")] = rank
    if len(set(ranks.values())) != len(ranks):
        return "two vocab entries share an id"
    if sum(len(b) == 1 for b in ranks) != 256:
        return "not every byte has a token"

    merged: dict[bytes, tuple[bytes, bytes]] = {}
    previous = -1
    for merge in model["merges"]:
        left, right = merge.split(" ") if isinstance(merge, str) else merge
        if left not in vocab or right not in vocab:
            return f"merge {left!r} {right!r} is not of two vocab entries"
        pair = (left.translate(to_latin1).encode("latin-1"), right.translate(to_latin1).encode("latin-1"))
        token = pair[0] + pair[1]
        rank = ranks.get(token)
        if rank is None:
            return f"merge {left!r} {right!r} makes no vocab entry"
        if token in merged:
            return f"two merges make {left + right!r}"
        if rank <= previous:
            return "the merges are not in the order of their tokens' ids"
        previous = rank
        merged[token] = pair
    for token, rank in ranks.items():
        if len(token) == 1:
            continue
        made_by = merged.get(token)
        if made_by is None:
            return f"vocab entry {token!r} is made by no merge"
        # (two bytes have one split only)
        if len(token) > 2 and _bpe_split(ranks, token, rank) != list(made_by):
            return f"the merge that makes {token!r} is not the split tiktoken's BPE reaches"
    return ""


def _bpe_split(ranks: dict[bytes, int], token: bytes, max_rank: int) -> list[bytes]:
    """tiktoken's BPE on `token`, merging only ranks below max_rank: tiktoken's educational
    bpe_encode with a bound, as transformers' TikTokenConverter.bpe has it. Like tiktoken's
    own loop, it looks up only the two pairs a merge changes, and takes the leftmost lowest."""
    parts = [token[i : i + 1] for i in range(len(token))]
    pair_ranks = [ranks.get(token[i : i + 2], max_rank) for i in range(len(token) - 1)]
    while pair_ranks:
        lowest = min(pair_ranks)
        if lowest >= max_rank:
            break
        i = pair_ranks.index(lowest)
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
        del pair_ranks[i]
        if i > 0:
            pair_ranks[i - 1] = ranks.get(parts[i - 1] + parts[i], max_rank)
        if i < len(pair_ranks):
            pair_ranks[i] = ranks.get(parts[i] + parts[i + 1], max_rank)
    return parts
