"""Tokenizers that work offline: train a byte-level BPE here, or load one by directory or
Hugging Face hub name (the hub being often unreachable, that path fails with a clear message).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from launcher.errors import InputError

if TYPE_CHECKING:
    # Not `from transformers import ...`: to a type checker that name is transformers' dummy
    # class for when tokenizers is missing, which has none of the tokenizer's methods.
    from transformers.tokenization_utils_fast import PreTrainedTokenizerFast

EOS_TOKEN = "<|endoftext|>"
MIN_VOCAB = 256 + 1  # the byte alphabet plus <|endoftext|>
TRAIN_EXTRA = "needs the train extra: pip install 'launcher[train]'"


def _import_transformers():
    try:
        import transformers
    except ImportError as e:
        raise InputError(f"tokenizers {TRAIN_EXTRA} ({e.name} is missing)") from None
    transformers.logging.set_verbosity_error()  # keep library chatter out of our output
    return transformers


def train_tokenizer(
    inputs: list[str], vocab_size: int, out: str | Path, text_column: str = "text", *, split: str = "train"
) -> Path:
    """Train a byte-level BPE (GPT-2 style, `<|endoftext|>` as bos/eos/unk) on the inputs'
    documents and save it as a Hugging Face tokenizer directory; returns that directory."""
    from launcher.data.documents import expand_inputs, iter_batches

    if vocab_size < MIN_VOCAB:
        raise InputError(f"--vocab-size must be at least {MIN_VOCAB} (256 bytes + {EOS_TOKEN}), got {vocab_size}")
    files = expand_inputs(inputs)
    transformers = _import_transformers()
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    documents = 0

    def texts():
        nonlocal documents
        for batch in iter_batches(files, text_column, split=split):
            documents += len(batch.texts)
            yield from batch.texts

    tok.train_from_iterator(texts(), trainer=trainer)
    if documents == 0:
        raise InputError(f"no documents in {', '.join(inputs)}: nothing to train a tokenizer on")
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS_TOKEN,
        bos_token=EOS_TOKEN,
        unk_token=EOS_TOKEN,
        model_max_length=1 << 30,  # samples are cut by convert, never by the tokenizer
    )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(out))
    return out


WORDPIECE_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def train_wordpiece(
    inputs: list[str], vocab_size: int, out: str | Path, text_column: str = "text", *, split: str = "train"
) -> Path:
    """Train a BERT-style (lower-cased) WordPiece with [CLS]/[SEP]/[PAD]/[UNK]/[MASK], for
    encoder models; saved as a Hugging Face tokenizer directory."""
    from launcher.data.documents import expand_inputs, iter_batches

    if vocab_size < len(WORDPIECE_SPECIALS) + 26:
        raise InputError(
            f"--vocab-size must be at least {len(WORDPIECE_SPECIALS) + 26} for WordPiece, got {vocab_size}"
        )
    files = expand_inputs(inputs)
    transformers = _import_transformers()
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, special_tokens=list(WORDPIECE_SPECIALS), show_progress=False
    )
    texts = (t for batch in iter_batches(files, text_column, split=split) for t in batch.texts)
    tok.train_from_iterator(texts, trainer=trainer)
    if tok.get_vocab_size() <= len(WORDPIECE_SPECIALS):
        raise InputError(f"no documents in {', '.join(inputs)}: nothing to train a tokenizer on")
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=512,
    )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(out))
    return out


def _looks_like_path(name: str) -> bool:
    # Hub names are "name" or "org/name"; these can only be meant as paths.
    return name.startswith((".", "/", "~"))


def load_tokenizer(name_or_path: str) -> PreTrainedTokenizerFast:
    """A fast tokenizer from a local directory or a hub name; InputError when it cannot be had."""
    transformers = _import_transformers()
    from huggingface_hub.errors import HFValidationError

    local = Path(os.path.expanduser(name_or_path))
    if local.exists() and not local.is_dir():
        raise InputError(f"tokenizer {name_or_path!r} is a file; pass the tokenizer's directory")
    if not local.is_dir() and _looks_like_path(name_or_path):
        raise InputError(f"no tokenizer directory at {name_or_path}")
    source = str(local) if local.is_dir() else name_or_path
    try:
        tok = transformers.AutoTokenizer.from_pretrained(source, use_fast=True)
    except HFValidationError:
        raise InputError(f"unknown tokenizer {name_or_path!r}: not a directory and not a valid hub name") from None
    except (OSError, ValueError) as e:
        raise _load_error(name_or_path, local.is_dir(), e) from None
    if not getattr(tok, "is_fast", False):
        raise InputError(f"tokenizer {name_or_path!r} has no fast (Rust) implementation; convert needs one")
    return tok


def _load_error(name: str, is_dir: bool, e: Exception) -> InputError:
    text = str(e)
    if is_dir:
        return InputError(f"{name} is not a Hugging Face tokenizer directory: {text.splitlines()[0]}")
    if "couldn't connect" in text or "offline" in text.lower():
        return InputError(
            f"cannot load tokenizer {name!r}: the Hugging Face hub is unreachable and it is not in the local cache",
            hint="train one offline with `launcher data tokenizer train INPUT --vocab-size N --out DIR` "
            "and pass --tokenizer DIR",
        )
    if "not a valid model identifier" in text or "does not appear to have" in text:
        return InputError(
            f"unknown tokenizer {name!r}: not a local directory and not a tokenizer on the Hugging Face hub"
        )
    return InputError(f"cannot load tokenizer {name!r}: {text.splitlines()[0]}")


def vocab_size(tok) -> int:
    """Every id the tokenizer can emit, added tokens included."""
    return len(tok)
