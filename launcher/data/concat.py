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


class BatchEncoder:
    """Token ids of a batch of documents, exactly as the Hugging Face tokenizer's batch encode
    gives them with add_special_tokens=False, returned flat with each document's length.

    `backend` names what encodes: "tiktoken" where tiktoken reproduces the tokenizer exactly
    (launcher.data.tiktoken_bpe decides that from its definition: a GPT-2-style byte-level
    BPE, as train_tokenizer makes), several times faster; otherwise "tokenizers", the
    tokenizer's own Rust backend, and `fallback_reason` says why. Both encode on the calling
    thread only: workers are processes, one per core."""

    def __init__(self, tokenizer):
        from launcher.data.tiktoken_bpe import exact_tiktoken

        backend = tokenizer.backend_tokenizer
        # Set up as transformers' __call__ sets the backend for padding=False, truncation=False.
        if backend.truncation is not None:
            backend.no_truncation()
        if backend.padding is not None:
            backend.no_padding()
        split = bool(getattr(tokenizer, "split_special_tokens", False))
        if getattr(backend, "encode_special_tokens", split) != split:
            backend.encode_special_tokens = split
        exact = exact_tiktoken(backend, split)
        self.backend = "tiktoken" if exact.encoding is not None else "tokenizers"
        self.fallback_reason = exact.reason
        self._encoding = exact.encoding
        # The Rust batch encode, called directly rather than through transformers' __call__,
        # which builds a Python dict per document. encode_batch_fast (tokenizers >= 0.21)
        # skips the offsets, which nothing here reads.
        self._hf_encode_batch = getattr(backend, "encode_batch_fast", backend.encode_batch)

    def __call__(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(every id of the batch as one uint32 array, each document's number of ids)."""
        if self._encoding is not None:
            # "all": the tokenizer's special tokens inside text are its special ids, as the
            # tokenizers library splits them out (the Encoding holds none under
            # split_special_tokens). encode_to_numpy: no Python int per token; a loop, not
            # encode_batch, whose thread pool would take a second core.
            arrays = [self._encoding.encode_to_numpy(t, allowed_special="all") for t in texts]
            lengths = np.fromiter(map(len, arrays), np.int64, count=len(arrays))
            return (np.concatenate(arrays) if arrays else np.empty(0, np.uint32)), lengths
        ids = [e.ids for e in self._hf_encode_batch(texts, add_special_tokens=False)]
        lengths = np.fromiter(map(len, ids), np.int64, count=len(ids))
        return np.fromiter(itertools.chain.from_iterable(ids), np.uint32, count=int(lengths.sum())), lengths


def join_documents(flat: np.ndarray, lengths: np.ndarray, bos: list[int], eos: list[int], dtype) -> np.ndarray:
    """bos + doc + eos for each document, as one array of `dtype`, from every document's ids
    in one array (`flat`) and their `lengths`: the separators put in place by index, with no
    Python loop per token. Raises OverflowError for an id that does not fit the dtype: never wraps."""
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
        self.encoder = BatchEncoder(tokenizer)
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
        flat, lengths = self.encoder(texts)
        return join_documents(flat, lengths, self.bos, self.eos, self.np_dtype)

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
