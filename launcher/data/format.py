"""The on-disk contract between `launcher data convert` and the trainer.

A converted split is a directory holding an MDS dataset (`index.json` + shards)
whose only column is `tokens` (MDS encoding `bytes`): the little-endian token ids
of one sample, exactly `seq_len` of them, in `dtype`. Beside `index.json` lies
`launcher_dataset.json`, the sidecar below, which the trainer reads before any
weight is built: it never guesses the dtype or the sequence length.

    OUT/<split>/index.json
    OUT/<split>/shard.00000.mds.zstd ...
    OUT/<split>/launcher_dataset.json
"""

from __future__ import annotations

SIDECAR_NAME = "launcher_dataset.json"
FORMAT_ID = "launcher.tokens.v1"
TOKENS_COLUMN = "tokens"
MDS_COLUMNS = {TOKENS_COLUMN: "bytes"}

# Sidecar keys: format, dtype ("uint8"|"uint16"|"uint32"|"int64"), seq_len, vocab_size,
# tokenizer, eos_text, bos_text, samples, tokens, documents.
SIDECAR_KEYS = ("format", "dtype", "seq_len", "vocab_size", "tokenizer", "samples", "tokens")


def narrowest_dtype(vocab_size: int) -> str:
    """The narrowest unsigned dtype that holds every id below vocab_size."""
    if vocab_size <= 1 << 8:
        return "uint8"
    if vocab_size <= 1 << 16:
        return "uint16"
    if vocab_size <= 1 << 32:
        return "uint32"
    return "int64"
