"""Item 1, as a pure function: the masking stream catches a value however the output is
cut into chunks, across lines, next to or overlapping another value."""

from __future__ import annotations

import random

from launcher.secrets.mask import MIN_MASK_LEN, Masker, MaskingStream, mask_candidates

KEY = "-----BEGIN KEY-----\nMIIEv+/base64==\nline-two-of-key\n-----END KEY-----\n"
VALUES = [*mask_candidates(KEY), *mask_candidates("tok-abcdef"), *mask_candidates("abcdabcd"), "cd-x"]
TEXT = (f"start {KEY} middle tok-abcdef tok-abcde abcdabcdabcd-x partial abcdabc MIIEv+/base64==!"
        " line-two-of-key\n" * 4)


def masked_in_chunks(text: str, sizes) -> str:
    stream = MaskingStream(Masker(VALUES))
    data, out, i = text.encode(), b"", 0
    for n in sizes:
        out += stream.feed(data[i:i + n])
        i += n
        if i >= len(data):
            break
    out += stream.feed(data[i:]) + stream.flush()
    return out.decode()


def test_every_chunking_masks_like_the_whole_text():
    whole = Masker(VALUES).mask(TEXT)
    assert not any(v in whole for v in VALUES)
    assert "tok-abcde " in whole and "abcdabc " in whole  # near misses stay as they are
    rng = random.Random(12)
    for _ in range(300):
        sizes = [rng.choice([1, 2, 3, 7, 16, 64, 500]) for _ in range(len(TEXT))]
        assert masked_in_chunks(TEXT, sizes) == whole
    assert masked_in_chunks(TEXT, [1] * len(TEXT)) == whole


def test_a_value_split_at_the_end_is_held_back_until_it_is_known():
    stream = MaskingStream(Masker(["secret-value"]))
    assert stream.feed(b"line one\nsecret-") == b"line one\n"  # might be the start of the value
    assert stream.feed(b"val") == b""
    assert stream.feed(b"ue!\nsecret-v") == b"****!\n"
    assert stream.flush() == b"secret-v"  # the stream ended: it was not the value


def test_one_threshold_for_what_is_masked():
    assert mask_candidates("abc") == [] and mask_candidates("abcd") == ["abcd", "abcd"]
    assert "xy" not in mask_candidates("long-enough-line\nxy\n") and MIN_MASK_LEN == 4
