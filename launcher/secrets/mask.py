"""Replace secret values with ****: one routine for every place logs pass.

Values shorter than MIN_MASK_LEN are never masked (masking "1" or "ab" would
shred every line); `secret create` warns about them. A multi-line value is
masked whole and line by line, since a program may print one line of a key.
A structured value is masked by every value it holds as well (`mask_candidates`):
a program reads its credentials file and prints one field of it. Each of these strings is
masked in the forms programs print a string in (`printed_forms`): JSON-escaped, Python's
repr() and ascii(), quoted by a shell (`set -x`, `declare -p`, `printf %q`, shlex.quote),
URL-encoded, and (a whole value) base64. A value the program transforms otherwise (hashed,
split, reversed, base64 of a part of it) is not recognised: no masker can know it.

`MaskingStream` masks output as it flows, chunk by chunk, holding back only the
end of a chunk that could be the start of a value, so a value is caught however
the writer or the pipe splits it, across lines included.

Most chunks hold no secret at all: one Aho-Corasick pass (ahocorasick_rs, in Rust, with
a SIMD prefilter) over a chunk says so for every value at once, and such a chunk passes
through untouched; only a chunk where some value occurs is searched value by value for
every occurrence, overlaps included. Where ahocorasick_rs is not installed (an
interpreter the runtime bundle did not bring it to), every chunk takes the second path.
"""

from __future__ import annotations

import base64
import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from urllib.parse import quote, quote_plus

MASK = "****"
# One threshold, used by every masker and by the warning at `secret create`.
MIN_MASK_LEN = 4


def mask_candidates(value: str) -> list[str]:
    """The strings to mask for one secret value, whatever its kind: the value stripped
    and, for a multi-line value, each of its lines; then the same for every
    value it holds, read as what it looks like: each string of a JSON document (a GCP
    service-account key, a docker config), each field of a KEY=VALUE, INI (`=` or `:`),
    YAML or .env line (AWS credentials and config, a YAML config), the base64 body of a PEM
    block joined into one line, the password inside a docker "auth"; and each of these in
    the forms programs print a string in (printed_forms). One function for the host
    (`launcher logs`) and the entrypoint, which reads the same values from the run's
    environment and secret files, so both mask alike."""
    out: dict[str, None] = {}  # ordered, without repeats
    todo, done = [(value, 0)], set()
    while todo:
        text, depth = todo.pop()
        if text in done:
            continue
        done.add(text)
        whole = text.strip()
        for piece in _plain(text):
            out.update(dict.fromkeys(printed_forms(piece, whole=piece == whole)))
        if depth < MAX_DEPTH:
            todo.extend((inner, depth + 1) for inner in _held_values(text))
    return [c for c in out if len(c) >= MIN_MASK_LEN]


def printed_forms(text: str, *, whole: bool = True) -> list[str]:
    """`text` and the forms a program prints it in, without their quotes: as JSON writes it
    in a string (ASCII-only or not), as Python's repr() and ascii() do, as bash's `set -x`
    and shlex.quote write it in single quotes (a ' as '\\'' or '"'"'), as `declare -p` writes
    it in double quotes (\\ " $ ` escaped), as `printf %q` writes it (a backslash before
    each special character, or $'...' with octal escapes for control characters and, in
    the C locale, for every non-ASCII byte). A `whole` value (not one line of it) also
    URL-encoded (quote, quote_plus, JavaScript's encodeURIComponent; %XX in either case)
    and, from 6 characters on, base64 (standard and URL-safe, padded or not) of it alone,
    with or without the newline that ends a file, and of its first complete 3-byte groups,
    which every base64 of it starts with. A pure function: the same value always gives the same list."""
    forms = [
        text,
        json.dumps(text)[1:-1],
        json.dumps(text, ensure_ascii=False)[1:-1],
        repr(text)[1:-1],
        ascii(text)[1:-1],
        text.replace("'", "'\\''"),  # bash -x: 'it'\''s'
        text.replace("'", "'\"'\"'"),  # shlex.quote: 'it'"'"'s'
        re.sub(r'([\\"$`])', r"\\\1", text),  # declare -p, "..."
        _backslash_quoted(text),  # printf %q
        _ansi_c_quoted(text, utf8=True),  # printf %q, declare -p of a control character
        _ansi_c_quoted(text, utf8=False),  # the same in the C locale
    ]
    if whole:
        raw = _utf8(text)
        for encoded in (
            quote(raw, safe=""),
            quote(raw, safe="/"),
            quote_plus(raw, safe=""),
            quote(raw, safe="!~*'()"),  # encodeURIComponent
        ):
            forms += [encoded, re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), encoded)]
        if len(raw) >= BASE64_MIN:
            for b64 in (base64.b64encode, base64.urlsafe_b64encode):
                whole_b64, line_b64 = b64(raw).decode(), b64(raw + b"\n").decode()
                forms += [whole_b64, whole_b64.rstrip("="), line_b64, line_b64.rstrip("=")]
                forms.append(b64(raw[: len(raw) // 3 * 3]).decode())
    return [f for f in dict.fromkeys(forms) if len(f) >= MIN_MASK_LEN]


# Base64 of a shorter value is a few characters common in any base64 text.
BASE64_MIN = 6
# What bash's printf %q puts a backslash before (lib/sh/shquote.c, sh_backslash_quote);
# '#' and '~' only at the start.
_SHELL_SPECIAL = frozenset(" \t\n'\"\\|&;()<>!{}*[?]^$`")
_ANSI_C = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
           "\x1b": "\\E", "\\": "\\\\", "'": "\\'"}  # fmt: skip


def _backslash_quoted(text: str) -> str:
    out = [("\\" + c if c in _SHELL_SPECIAL else c) for c in text]
    if text[:1] in ("#", "~"):
        out[0] = "\\" + text[0]
    return "".join(out)


def _ansi_c_quoted(text: str, *, utf8: bool) -> str:
    """What bash writes between $' and ' for `text`: escapes for control characters, and
    octal bytes for the rest of what the locale cannot print."""
    out = []
    for c in text:
        if c in _ANSI_C:
            out.append(_ANSI_C[c])
        elif c.isprintable() and (utf8 or c.isascii()):
            out.append(c)
        else:
            out.extend(f"\\{b:03o}" for b in _utf8(c))
    return "".join(out)


def _utf8(text: str) -> bytes:
    """The bytes a program writes `text` as: a value read from the environment keeps the
    bytes it was given (surrogateescape); a lone surrogate elsewhere, as CESU would."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


# How deep values inside values are followed: a PEM key in a JSON string in an env value.
MAX_DEPTH = 3
# Values of these JSON fields are the same in every Google credentials file (its type,
# Google's public endpoints): masking them would only shred URLs in the run's logs.
PUBLIC_JSON_FIELDS = frozenset({"type", "auth_uri", "token_uri", "auth_provider_x509_cert_url", "universe_domain"})
# Settings of an AWS config file that are no secret and would mask common words ("json").
PUBLIC_INI_KEYS = frozenset({"region", "output"})
_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]+-----[ \t]*\r?\n(.*?)-----END [A-Z0-9 ]+-----", re.S)
# A field of an INI (`key = value`, `key: value`), .env (`export KEY="value"`) or YAML
# (`key: value`, `- key: 'value'`, `"key": value`) file: its key and its value as written.
# A `:` followed by `//` is a URL's (https://...), not a field's.
_FIELD = re.compile(
    r"""^[ \t]*(?:-[ \t]+)?(?:export[ \t]+)?(["']?)([A-Za-z_][A-Za-z0-9_.\- ]*?)\1[ \t]*(?:=|:(?!//))[ \t]*(.*?)[ \t\r]*$""",
    re.M,
)
# Field values too common to mask: a YAML/INI boolean or null, and a number of up to
# PUBLIC_DIGITS digits (a port, a count); masking them would shred every log line they are in.
PUBLIC_SCALARS = frozenset({"true", "false", "yes", "no", "on", "off", "null", "none", "~"})
PUBLIC_DIGITS = 5


def _plain(text: str) -> list[str]:
    """The text stripped (the newline that ends a file is left to the output: `cat` of a
    secret file then the next line is ****, newline, the line) and each of its lines,
    split at newlines and wherever str.splitlines splits."""
    out = [text.strip()]
    for line in [*text.split("\n"), *text.splitlines()]:
        if line.strip() not in out:
            out.append(line.strip())
    return [c for c in out if len(c) >= MIN_MASK_LEN]


def _held_values(text: str) -> Iterator[str]:
    """The values `text` holds: a JSON document's (and no more: its `"key": value` lines are
    its own, read as JSON), a PEM block's body, each field of its lines."""
    if text.lstrip()[:1] in ("{", "["):
        try:
            doc = json.loads(text)
        except ValueError:
            pass
        else:
            yield from _json_values(doc)
            return
    for m in _PEM.finditer(text):
        # The base64 body, less RFC 1421 headers (Proc-Type: ...), as one line: DER as base64.
        yield "".join(line.strip() for line in m.group(1).splitlines() if ":" not in line)
    if "=" in text or ":" in text:
        for m in _FIELD.finditer(text):
            key, written = m.group(2).strip(), m.group(3)
            if key.lower() not in PUBLIC_INI_KEYS:
                for v in _field_values(written):
                    if not _public_scalar(v):
                        yield v


def _field_values(written: str) -> list[str]:
    """What a program reads of a field's value as written: the text inside its quotes, with
    a double-quoted one's escapes (YAML's, .env's, JSON's) and a single-quoted YAML one's ''
    read; an unquoted one also without its ` # comment`."""
    if len(written) >= 2 and written[0] == written[-1] and written[0] in "'\"":
        inner = written[1:-1]
        if written[0] == "'":
            return [inner, inner.replace("''", "'")]
        try:
            read = json.loads(written)
        except ValueError:
            return [inner]
        return [inner, read] if isinstance(read, str) else [inner]
    return [written, written.split(" #", 1)[0].rstrip()]


def _public_scalar(value: str) -> bool:
    v = value.strip()
    return v.lower() in PUBLIC_SCALARS or (v.isdigit() and len(v) <= PUBLIC_DIGITS)


def _json_values(doc, key: str | None = None) -> Iterator[str]:
    if isinstance(doc, dict):
        for k, v in doc.items():
            if not (k in PUBLIC_JSON_FIELDS and isinstance(v, str)):
                yield from _json_values(v, k)
    elif isinstance(doc, list):
        for v in doc:
            yield from _json_values(v, key)
    elif isinstance(doc, str):
        yield doc
        if key == "auth":  # a docker config's base64 of "user:password"
            try:
                decoded = base64.b64decode(doc, validate=True).decode("utf-8")
            except ValueError:  # not base64 (binascii.Error), not ASCII, not UTF-8 inside
                return
            yield decoded
            yield decoded.partition(":")[2]
    elif isinstance(doc, (int, float)) and not isinstance(doc, bool) and not _public_scalar(json.dumps(doc)):
        yield json.dumps(doc)


def too_short_to_mask(value: str) -> bool:
    return len(value.strip()) < MIN_MASK_LEN


# The prefilter reads one BLOCK-byte block in every STRIDE of the data (memoryview "Q"
# items, every STRIDE // BLOCK-th), so it takes values that cannot miss one:
# STRIDE + BLOCK - 1 bytes or more; and it runs where enough of them would cost as many
# find() passes as it costs.
BLOCK = 8
STRIDE = 32
PREFILTER_MIN = 3


class _Prefilter:
    """Which of many long values may occur in some bytes, from one pass over them. An
    occurrence of a value of STRIDE + BLOCK - 1 bytes or more covers a whole block of the
    data starting at a multiple of STRIDE, and that block is the value's bytes at one of
    its first STRIDE offsets: one set intersection (in C) over those blocks stands for a
    find() pass per value, and find() is left for the values whose blocks are there. A
    PEM key's 26 lines cost one pass, not 26 (and find() steps a byte at a time where the
    data is full of a value's own characters)."""

    def __init__(self, values: list[bytes]):
        self.owners: dict[int, list[bytes]] = {}
        for v in values:
            for k in range(STRIDE):
                owners = self.owners.setdefault(int.from_bytes(v[k : k + BLOCK], sys.byteorder), [])
                if v not in owners:
                    owners.append(v)
        self.blocks = frozenset(self.owners)

    def present(self, data: bytes) -> list[bytes]:
        n = len(data) - len(data) % BLOCK
        if n == 0:
            return []
        hits = self.blocks.intersection(memoryview(data)[:n].cast("Q")[:: STRIDE // BLOCK])
        return list({v: None for h in hits for v in self.owners[h]})

    @staticmethod
    def split(values: list[bytes]) -> tuple[list[bytes], _Prefilter | None]:
        """(values for find(), a prefilter for the rest), when enough values are long."""
        long = [v for v in values if len(v) >= STRIDE + BLOCK - 1]
        if len(long) < PREFILTER_MIN:
            return values, None
        return [v for v in values if len(v) < STRIDE + BLOCK - 1], _Prefilter(long)


def _spans(data, values, derived=(), prefilter: _Prefilter | None = None) -> list[tuple[int, int]]:
    """Every occurrence of every value (overlaps included), merged, in order. A value in
    `derived` (value, contained, offset) is not searched for: it is checked where the
    value it contains was found, which saves a pass over the data per such value. The
    prefilter's values are searched for where it finds they may be."""
    if prefilter is not None:
        values = [*values, *prefilter.present(data)]
    found = []
    for v in values:
        i = data.find(v)
        while i != -1:
            found.append((i, i + len(v)))
            i = data.find(v, i + 1)
    if not found:
        return found
    if derived:
        starts: dict[str | bytes, list[int]] = {}  # by the value found (text or bytes, as `data`)
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


DETECT_PREFIX = 64


def _detector(values: list[bytes]) -> Callable[[bytes], bool] | None:
    """A function telling whether any of `values` occurs in some bytes, in one pass; None
    without ahocorasick_rs. Leftmost-longest matching without overlaps finds a match
    wherever any value occurs (the leftmost occurrence is always one), and it keeps the
    automaton's prefilter, which overlapping matching turns off (10-20x slower). A yes may
    be wrong (a value's start without the rest); a no never is."""
    if not values:
        return None
    try:
        import ahocorasick_rs
    except ImportError:
        return None
    # Where a value occurs, so does its start: the automaton holds each value's first
    # DETECT_PREFIX bytes, so a long value (a 128 KiB env secret) costs no more to build
    # than a short one (a DFA of the whole value took 100 s), and the contiguous NFA builds
    # 10x faster than the DFA for the same search speed here.
    prefixes = list(dict.fromkeys(v[:DETECT_PREFIX] for v in values))
    automaton = ahocorasick_rs.BytesAhoCorasick(
        prefixes,
        matchkind=ahocorasick_rs.MatchKind.LeftmostLongest,
        implementation=ahocorasick_rs.Implementation.ContiguousNFA,
    )
    return lambda data: bool(automaton.find_matches_as_indexes(data))


class Masker:
    def __init__(self, values: Iterable[str]):
        vals = sorted({v for v in values if v and len(v) >= MIN_MASK_LEN}, key=len, reverse=True)
        self.values = vals
        # surrogateescape: a value read from the environment keeps the bytes it was given.
        self._bytes = [v.encode("utf-8", "surrogateescape") for v in vals]
        self._search, self._derived = _split(vals)
        search_bytes, self._derived_bytes = _split(self._bytes)
        self._search_bytes, self._prefilter = _Prefilter.split(search_bytes)
        self._occurs = _detector(self._bytes)

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
        spans = self._spans_bytes(data)
        return _replace(data, spans, MASK.encode()) if spans else data

    def _spans_bytes(self, data: bytes) -> list[tuple[int, int]]:
        """Every occurrence of a value in `data`, merged (see _spans)."""
        if not self._bytes or (self._occurs is not None and not self._occurs(data)):
            return []
        return _spans(data, self._search_bytes, self._derived_bytes, self._prefilter)

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
        spans = m._spans_bytes(data)
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
