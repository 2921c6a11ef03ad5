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
DTYPES = ("uint8", "uint16", "uint32", "int64")


def narrowest_dtype(vocab_size: int) -> str:
    """The narrowest unsigned dtype that holds every id below vocab_size."""
    if vocab_size <= 1 << 8:
        return "uint8"
    if vocab_size <= 1 << 16:
        return "uint16"
    if vocab_size <= 1 << 32:
        return "uint32"
    return "int64"


def numpy_dtype(dtype: str):  # -> numpy.dtype; numpy is imported lazily to keep the CLI light
    """The little-endian numpy dtype for a sidecar dtype name."""
    import numpy as np

    if dtype not in DTYPES:
        raise ValueError(f"unsupported token dtype {dtype!r}")
    return np.dtype(dtype).newbyteorder("<")


def make_sidecar(
    *,
    dtype: str,
    seq_len: int,
    vocab_size: int,
    tokenizer: str,
    samples: int,
    tokens: int,
    documents: int,
    eos_text: str = "",
    bos_text: str = "",
    **extra: object,
) -> dict:
    """The sidecar written beside index.json. `tokens` counts the tokens stored in samples
    (samples * seq_len); extra keys (e.g. input_tokens) are kept for humans."""
    return {
        "format": FORMAT_ID,
        "dtype": dtype,
        "seq_len": seq_len,
        "vocab_size": vocab_size,
        "tokenizer": tokenizer,
        "eos_text": eos_text,
        "bos_text": bos_text,
        "samples": samples,
        "tokens": tokens,
        "documents": documents,
        **extra,
    }


def check_sidecar(data: object, where: str = SIDECAR_NAME) -> dict:
    """Validate a parsed sidecar; raises launcher.errors.InputError naming `where`."""
    from launcher.errors import InputError

    if not isinstance(data, dict):
        raise InputError(f"{where}: not a JSON object")
    missing = [k for k in SIDECAR_KEYS if k not in data]
    if missing:
        raise InputError(f"{where}: missing {', '.join(missing)}")
    if data["format"] != FORMAT_ID:
        raise InputError(f"{where}: format is {data['format']!r}, expected {FORMAT_ID!r}")
    if data["dtype"] not in DTYPES:
        raise InputError(f"{where}: unsupported dtype {data['dtype']!r}")
    for key in ("seq_len", "vocab_size", "samples", "tokens"):
        if not isinstance(data[key], int) or data[key] < 0 or (key == "seq_len" and data[key] == 0):
            raise InputError(f"{where}: {key} must be a positive integer, got {data[key]!r}")
    import numpy as np

    # A wider dtype than needed is wasteful but readable; a narrower one would lose ids.
    if np.iinfo(data["dtype"]).max < data["vocab_size"] - 1:
        raise InputError(f"{where}: dtype {data['dtype']} cannot hold vocab_size {data['vocab_size']}")
    return data
