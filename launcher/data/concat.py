"""Tokenize documents in batches, join them with BOS/EOS, and cut fixed-length samples.

The remainder (fewer than seq_len tokens) is carried from one batch to the next, so no
document loses its tail: the seed's notebook function restarted its buffer at every
document and dropped those tokens. The local engine and the Spark UDF share this class.
"""

from __future__ import annotations

import numpy as np

from launcher.data.format import narrowest_dtype, numpy_dtype


def text_ids(tokenizer, text: str) -> list[int]:
    """Ids of a separator text; "<|endoftext|>" maps to its special token when the tokenizer has it."""
    if not text:
        return []
    # The backend's single encode: same ids as a batch, and no thread pool is started, so a
    # process may still fork workers safely afterwards.
    return list(tokenizer.backend_tokenizer.encode(text, add_special_tokens=False).ids)


def cut(stream: np.ndarray, seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """(samples of shape (n, seq_len), remainder) of a 1-D token stream."""
    n = len(stream) // seq_len
    return stream[: n * seq_len].reshape(n, seq_len), stream[n * seq_len :]


class TokenConcatenator:
    """Turns batches of documents into (n, seq_len) arrays of token ids, in order."""

    def __init__(self, tokenizer, seq_len: int, *, eos_text: str = "", bos_text: str = ""):
        if seq_len < 1:
            raise ValueError("seq_len must be at least 1")
        self.tokenizer = tokenizer
        self.seq_len = seq_len
        self.vocab_size = len(tokenizer)
        self.dtype = narrowest_dtype(self.vocab_size)
        self.np_dtype = numpy_dtype(self.dtype)
        self.bos = text_ids(tokenizer, bos_text)
        self.eos = text_ids(tokenizer, eos_text)
        self.buffer = np.empty(0, self.np_dtype)
        self.documents = 0
        self.tokens = 0  # every token of the stream, separators included

    def encode(self, texts: list[str]) -> np.ndarray:
        """The token stream of a batch: bos + ids + eos for each document, concatenated."""
        ids = self.tokenizer(
            texts,
            add_special_tokens=False,
            return_attention_mask=False,
            return_token_type_ids=False,
            verbose=False,
        )["input_ids"]
        flat: list[int] = []
        bos, eos = self.bos, self.eos
        for doc in ids:  # list.extend runs in C; one numpy conversion per batch
            flat += bos
            flat += doc
            flat += eos
        # numpy raises OverflowError if an id does not fit the dtype: never wrap silently.
        return np.array(flat, dtype=self.np_dtype)

    def feed(self, texts: list[str]) -> np.ndarray:
        stream = self.encode(texts)
        self.documents += len(texts)
        self.tokens += len(stream)
        samples, rest = cut(np.concatenate([self.buffer, stream]), self.seq_len)
        self.buffer = rest.copy()  # do not pin the whole batch in memory through a view
        return samples

    def take_remainder(self) -> np.ndarray:
        rest, self.buffer = self.buffer, np.empty(0, self.np_dtype)
        return rest
