"""Tokenize documents in batches, join them with BOS/EOS, and cut fixed-length samples.

The remainder (fewer than seq_len tokens) is carried from one batch to the next, so no
document loses its tail: the seed's notebook function restarted its buffer at every
document and dropped those tokens. The local engine and the Spark UDF share this class.
"""

from __future__ import annotations

import itertools

import numpy as np

from launcher.data.format import narrowest_dtype, numpy_dtype


def text_ids(tokenizer, text: str) -> list[int]:
    """Ids of a separator text; "<|endoftext|>" maps to its special token when the tokenizer has it."""
    if not text:
        return []
    # The backend's single encode: same ids as a batch, and no thread pool is started, so a
    # process may still fork workers safely afterwards.
    return list(tokenizer.backend_tokenizer.encode(text, add_special_tokens=False).ids)


def batch_encoder(tokenizer):
    """The Rust tokenizer's batch encode, called directly rather than through transformers'
    __call__, which builds a Python dict per document. The backend is set up the way that
    __call__ sets it for padding=False, truncation=False, so the ids are the same.
    encode_batch_fast (tokenizers >= 0.21) skips the offsets, which nothing here reads."""
    backend = tokenizer.backend_tokenizer
    if backend.truncation is not None:
        backend.no_truncation()
    if backend.padding is not None:
        backend.no_padding()
    split = bool(getattr(tokenizer, "split_special_tokens", False))
    if getattr(backend, "encode_special_tokens", split) != split:
        backend.encode_special_tokens = split
    return getattr(backend, "encode_batch_fast", backend.encode_batch)


def join_documents(ids: list[list[int]], bos: list[int], eos: list[int], dtype) -> np.ndarray:
    """bos + doc + eos for each document's ids, as one array of `dtype`: one pass over the
    ids in C (np.fromiter), then the separators put in place by index, with no Python loop
    per token. Raises OverflowError for an id that does not fit the dtype: never wraps."""
    lengths = np.fromiter(map(len, ids), np.int64, count=len(ids))
    flat = np.fromiter(itertools.chain.from_iterable(ids), np.uint32, count=int(lengths.sum()))
    if flat.size and int(flat.max()) > np.iinfo(dtype).max:
        raise OverflowError(f"token id {int(flat.max())} does not fit {np.dtype(dtype).name}")
    if not bos and not eos:
        return flat.astype(dtype, copy=False)
    per_doc = lengths + len(bos) + len(eos)
    starts = np.cumsum(per_doc) - per_doc  # where each document's bos begins in the stream
    stream = np.empty(int(per_doc.sum()), dtype)
    is_text = np.ones(len(stream), bool)
    for offset, token in enumerate(bos):
        stream[starts + offset] = token
        is_text[starts + offset] = False
    ends = starts + len(bos) + lengths  # where each document's eos begins
    for offset, token in enumerate(eos):
        stream[ends + offset] = token
        is_text[ends + offset] = False
    stream[is_text] = flat
    return stream


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
        self._encode_batch = batch_encoder(tokenizer)
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
        ids = [e.ids for e in self._encode_batch(texts, add_special_tokens=False)]
        return join_documents(ids, self.bos, self.eos, self.np_dtype)

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
