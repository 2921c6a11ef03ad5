"""The sidecar contract the trainer checks before building a model."""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy", reason="needs the train extra")

from launcher.data.format import FORMAT_ID, check_sidecar, make_sidecar, narrowest_dtype, numpy_dtype
from launcher.errors import InputError


@pytest.mark.parametrize(
    ("vocab", "dtype"),
    [(2, "uint8"), (256, "uint8"), (257, "uint16"), (65536, "uint16"), (65537, "uint32"), (1 << 33, "int64")],
)
def test_narrowest_dtype(vocab: int, dtype: str) -> None:
    assert narrowest_dtype(vocab) == dtype


def test_numpy_dtype_is_little_endian() -> None:
    assert np.frombuffer(b"\x01\x02", numpy_dtype("uint16"))[0] == 0x0201


def _good(**over) -> dict:
    return {
        **make_sidecar(
            dtype="uint16", seq_len=128, vocab_size=600, tokenizer="tok", samples=3, tokens=384, documents=9
        ),
        **over,
    }


def test_check_sidecar_accepts_what_convert_writes() -> None:
    assert check_sidecar(_good())["format"] == FORMAT_ID


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "not a JSON object"),
        ({"format": FORMAT_ID}, "missing dtype, seq_len, vocab_size, tokenizer, samples, tokens"),
        (_good(format="other"), "format is 'other'"),
        (_good(dtype="float32"), "unsupported dtype 'float32'"),
        (_good(seq_len=0), "seq_len must be a positive integer"),
        (_good(samples="3"), "samples must be a positive integer"),
        (_good(dtype="uint8"), "dtype uint8 cannot hold vocab_size 600"),
    ],
)
def test_check_sidecar_rejects(data, message: str) -> None:
    with pytest.raises(InputError, match=message):
        check_sidecar(data, "x/launcher_dataset.json")
