"""Replace secret values with ****: one routine for every place logs pass.

Values shorter than MIN_MASK_LEN are never masked (masking "1" or "ab" would
shred every line); `secret create` warns about them. A multi-line value is
masked whole and line by line, since a program may print one line of a key.

`MaskingStream` masks output as it flows, chunk by chunk, holding back only the
end of a chunk that could be the start of a value, so a value is caught however
the writer or the pipe splits it, across lines included.
"""

from __future__ import annotations

from collections.abc import Iterable

MASK = "****"
# One threshold, used by every masker and by the warning at `secret create`.
MIN_MASK_LEN = 4


def mask_candidates(value: str) -> list[str]:
    """The strings to mask for one secret value: the value, its stripped form and,
    for a multi-line value, each of its lines."""
    out = [c for c in (value, value.strip()) if len(c) >= MIN_MASK_LEN]
    if "\n" in value or "\r" in value:
        out.extend(s for s in (line.strip() for line in value.splitlines()) if len(s) >= MIN_MASK_LEN)
    return out


def too_short_to_mask(value: str) -> bool:
    return len(value.strip()) < MIN_MASK_LEN


def _spans(data, values, derived=()) -> list[tuple[int, int]]:
    """Every occurrence of every value (overlaps included), merged, in order. A value in
    `derived` (value, contained, offset) is not searched for: it is checked where the
    value it contains was found, which saves a pass over the data per such value."""
    found = []
    for v in values:
        i = data.find(v)
        while i != -1:
            found.append((i, i + len(v)))
            i = data.find(v, i + 1)
    if not found:
        return found
    if derived:
        starts = {}
        for s, e in found:
            starts.setdefault(data[s:e], []).append(s)
        for v, inner, k in derived:
            for s in starts.get(inner, ()):
                if s >= k and data.startswith(v, s - k):
                    found.append((s - k, s - k + len(v)))
    found.sort()
    merged = [found[0]]
    for s, e in found[1:]:
        if s <= merged[-1][1]:
            if e > merged[-1][1]:
                merged[-1] = (merged[-1][0], e)
        else:
            merged.append((s, e))
    return merged


def _split(values: list) -> tuple[list, list]:
    """(values to search for, (value, a searched value inside it, its offset) for the rest)."""
    base = [v for v in values if not any(w != v and w in v for w in values)]
    derived = []
    for v in values:
        if v not in base:
            inner = next(w for w in base if w in v)
            derived.append((v, inner, v.find(inner)))
    return base, derived


def _replace(data, spans, mask):
    parts = []
    at = 0
    for s, e in spans:
        parts.append(data[at:s])
        parts.append(mask)
        at = e
    parts.append(data[at:])
    return data[:0].join(parts)


class Masker:
    def __init__(self, values: Iterable[str]):
        vals = sorted({v for v in values if v and len(v) >= MIN_MASK_LEN}, key=len, reverse=True)
        self.values = vals
        self._bytes = [v.encode("utf-8") for v in vals]
        self._search, self._derived = _split(vals)
        self._search_bytes, self._derived_bytes = _split(self._bytes)

    def __bool__(self) -> bool:
        return bool(self.values)

    def __add__(self, other: Masker) -> Masker:
        return Masker([*self.values, *other.values])

    def mask(self, text: str) -> str:
        if not self.values:
            return text
        spans = _spans(text, self._search, self._derived)
        return _replace(text, spans, MASK) if spans else text

    def mask_bytes(self, data: bytes) -> bytes:
        if not self._bytes:
            return data
        spans = _spans(data, self._search_bytes, self._derived_bytes)
        return _replace(data, spans, MASK.encode()) if spans else data

    def _partial_start(self, data: bytes, lo: int) -> int:
        """The first index >= lo from which the rest of `data` is a proper prefix of a
        value (so more bytes could complete it); len(data) if there is none."""
        n = len(data)
        best = n
        for v in self._bytes:
            i = data.find(v[:1], max(lo, n - len(v) + 1))
            while i != -1 and i < best:
                if v.startswith(data[i:]):
                    best = i
                    break
                i = data.find(v[:1], i + 1)
        return best


MAX_HOLD = 1 << 20


class MaskingStream:
    """Masks a byte stream fed in arbitrary chunks. `feed` returns what is safe to
    write now; `flush` returns the rest at the end of the stream."""

    def __init__(self, masker: Masker):
        self.masker = masker
        self._pending = b""

    def feed(self, chunk: bytes) -> bytes:
        m = self.masker
        if not m._bytes:
            return chunk
        data = self._pending + chunk if self._pending else chunk
        spans = _spans(data, m._search_bytes, m._derived_bytes)
        cut = m._partial_start(data, 0)
        while True:
            # Never cut through a value: hold back all of it (it may go on overlapping the
            # held-back start of another), unless that holds back too much.
            crossing = next(((s, e) for s, e in spans if s < cut < e), None)
            if crossing is None:
                break
            if len(data) - crossing[0] <= MAX_HOLD:
                cut = crossing[0]
            else:
                cut = m._partial_start(data, crossing[1])
        self._pending = data[cut:]
        head = data[:cut]
        spans = [(s, e) for s, e in spans if e <= cut]
        return _replace(head, spans, MASK.encode()) if spans else head

    def flush(self) -> bytes:
        rest, self._pending = self._pending, b""
        return self.masker.mask_bytes(rest)
