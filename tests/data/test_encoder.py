"""`data convert`'s encoder: tiktoken where it reproduces the tokenizer exactly, the tokenizer's
own backend otherwise, and the same ids as the Hugging Face tokenizer either way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import needs

needs("streaming", reason="needs the train extra")
needs("tiktoken", reason="needs the train extra")

from hypothesis import given, settings
from hypothesis import strategies as st

from .conftest import EOS, documents, write_jsonl

pytestmark = pytest.mark.train

SPECIALS_INSIDE = f"one document{EOS}another{EOS}{EOS} and {EOS[:-1]} an almost"
VARIED = [
    "",
    "Hello, world! It's a test; we'll see what they've done, I'm sure you'd agree, they're here.",
    "émoji 😀👍🏽🇫🇷 and CJK 中文字符 日本語のテキスト 한국어 and العربية, ελληνικά, кириллица",
    "whitespace   runs\t\tand\ttabs \u00a0nbsp\u2003em\u3000ideographic",
    "trailing spaces   ",
    "   leading spaces",
    "new\nlines\n\n\nand\r\nCRLF \n \n",
    "numbers 0 12 345 6789 3.14159 1,000,000 -42 1e10 ٣٤٥ ½",
    "contractions: don't DON'T it's IT'S y'all rock'n'roll ''quoted''",
    SPECIALS_INSIDE,
    "combining a\u0301e\u0308 and zero\u200bwidth, \x00 nul and \x7f del",
    "x" * 3000 + " " + "ab" * 1500,
]


def hf_ids(tokenizer, texts: list[str]) -> list[list[int]]:
    """What the Hugging Face tokenizer gives, through transformers' own API."""
    return tokenizer(texts, add_special_tokens=False)["input_ids"]


def encoded(encoder, texts: list[str]) -> list[list[int]]:
    flat, lengths = encoder(texts)
    ends = lengths.cumsum()
    return [flat[end - n : end].tolist() for n, end in zip(lengths.tolist(), ends.tolist())]


def concatenator(tokenizer):
    from launcher.data.concat import TokenConcatenator

    return TokenConcatenator(tokenizer, 16, eos_text=EOS)


def with_json(tokenizer_dir: Path, edit, **kwargs) -> object:
    """The tokenizer at tokenizer_dir with its tokenizer.json edited by `edit`; kwargs go to
    transformers, which sets some of the pipeline itself (add_prefix_space)."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    spec = json.loads((tokenizer_dir / "tokenizer.json").read_text())
    edit(spec)
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(spec)), eos_token=EOS, **kwargs)


CODE = "def f(x):\n    if x:\n        return  x  \n\n\n    return None\t# done\n  \n"


@pytest.fixture(scope="module")
def varied_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tokenizer train_tokenizer made from text with whitespace runs, indentation, newlines,
    numbers, contractions and non-Latin scripts, so that it has tokens for them: a pre-tokenizer
    that split those differently would change the ids."""
    from launcher.data.tokenizer import train_tokenizer

    root = tmp_path_factory.mktemp("varied")
    corpus = write_jsonl(root / "c.jsonl", documents(1500) + [CODE, *VARIED] * 40)
    return train_tokenizer([str(corpus)], 1200, root / "tok")


@pytest.fixture(scope="module")
def trained(varied_dir: Path):
    """(that tokenizer, loaded as convert loads it; its concatenator)."""
    from launcher.data.tokenizer import load_tokenizer

    tok = load_tokenizer(str(varied_dir))
    return tok, concatenator(tok)


def test_a_trained_tokenizer_is_encoded_by_tiktoken_with_its_own_ids(trained, varied_dir: Path) -> None:
    tok, concat = trained
    assert concat.encoder.backend == "tiktoken", concat.encoder.fallback_reason
    texts = [*VARIED, CODE, CODE.replace("    ", "\t"), *documents(300)]
    assert max(map(len, tok.convert_ids_to_tokens(hf_ids(tok, [CODE])[0]))) > 3  # runs of spaces are tokens
    assert encoded(concat.encoder, texts) == hf_ids(tok, texts)
    eos = tok.convert_tokens_to_ids(EOS)
    assert encoded(concat.encoder, [f"a{EOS}b"])[0].count(eos) == 1  # the special token, not its characters
    # The whole stream, separators included, as the tokenizers library gives it alone.
    from tokenizers import Tokenizer

    plain = Tokenizer.from_file(str(varied_dir / "tokenizer.json"))
    stream = concat.encode(texts).tolist()
    assert stream == [i for t in texts for i in [*plain.encode(t, add_special_tokens=False).ids, eos]]


def test_a_post_processor_that_adds_a_bos_only_on_request_keeps_tiktoken(varied_dir: Path) -> None:
    from tokenizers import processors

    tok = with_json(varied_dir, lambda spec: None)
    eos = tok.convert_tokens_to_ids(EOS)
    tok.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{EOS} $A", special_tokens=[(EOS, eos)]
    )
    assert tok("x")["input_ids"][0] == tok.convert_tokens_to_ids(EOS)  # it does add one when asked
    concat = concatenator(tok)
    assert concat.encoder.backend == "tiktoken", concat.encoder.fallback_reason
    assert encoded(concat.encoder, VARIED) == hf_ids(tok, VARIED)


def test_split_special_tokens_encodes_them_as_text_on_both_paths(varied_dir: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(varied_dir), split_special_tokens=True)
    concat = concatenator(tok)
    assert concat.encoder.backend == "tiktoken", concat.encoder.fallback_reason
    got = encoded(concat.encoder, VARIED)
    assert got == hf_ids(tok, VARIED)
    assert tok.convert_tokens_to_ids(EOS) not in got[VARIED.index(SPECIALS_INSIDE)]


def test_a_tokenizer_tiktoken_cannot_reproduce_falls_back_with_hf_ids(tmp_path: Path, tokenizer_dir: Path) -> None:
    from launcher.data.tokenizer import load_tokenizer, train_wordpiece

    corpus = write_jsonl(tmp_path / "c.jsonl", documents(400))
    wordpiece = load_tokenizer(str(train_wordpiece([str(corpus)], 300, tmp_path / "wp")))

    def prefix_space(spec):
        spec["pre_tokenizer"]["add_prefix_space"] = True

    def lowercase(spec):
        spec["normalizer"] = {"type": "Lowercase"}

    def not_special(spec):
        spec["added_tokens"][0]["special"] = False

    cases = {
        "WordPiece": (wordpiece, "model WordPiece"),
        "add_prefix_space": (with_json(tokenizer_dir, prefix_space, add_prefix_space=True), "add_prefix_space"),
        "a normalizer": (with_json(tokenizer_dir, lowercase), "normalizer"),
        "a non-special added token": (with_json(tokenizer_dir, not_special), "not special"),
    }
    for name, (tok, reason) in cases.items():
        concat = concatenator(tok)
        assert concat.encoder.backend == "tokenizers", name
        assert reason in concat.encoder.fallback_reason, (name, concat.encoder.fallback_reason)
        assert encoded(concat.encoder, VARIED) == hf_ids(tok, VARIED), name
    # What the prefix space changes, so that the case above tells the two paths apart.
    unedited = with_json(tokenizer_dir, lambda spec: None)
    assert hf_ids(cases["add_prefix_space"][0], ["Document"]) != hf_ids(unedited, ["Document"])


def test_merges_tiktoken_would_order_differently_fall_back(tmp_path: Path) -> None:
    """BPE merges ('b','c') before ('a','b') and then ('ab','c'): the tokenizers library never
    makes 'abc' from 'abc' (it has 'a','bc' and no merge of those), while tiktoken, ranking
    'abc' as a whole, would. So the check must refuse it, and the ids stay HF's."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {EOS: 0, **{ch: i + 1 for i, ch in enumerate(alphabet)}}
    for token in ("bc", "ab", "abc"):
        vocab[token] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[("b", "c"), ("a", "b"), ("ab", "c")]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.add_special_tokens([EOS])
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token=EOS)

    concat = concatenator(tok)
    assert concat.encoder.backend == "tokenizers"
    assert "split tiktoken's BPE reaches" in concat.encoder.fallback_reason
    assert encoded(concat.encoder, ["abc", "abcabc ab"]) == hf_ids(tok, ["abc", "abcabc ab"])
    assert hf_ids(tok, ["abc"]) == [[vocab["a"], vocab["bc"]]]


FRAGMENTS = [
    EOS,
    " ",
    "  ",
    "    ",
    "\n    ",
    "\n",
    "\n\n",
    "\t",
    "\r\n",
    "\u00a0",
    "'s",
    "'ll",
    "'RE",
    "don't",
    "123",
    "4567",
    "😀",
    "👍🏽",
    "中文",
    "한국어",
    "é",
    "e\u0301",
    "Document",
    " the",
    ".",
    "!?",
    "<|",
    "|>",
]


@given(
    st.lists(
        st.lists(
            st.one_of(st.sampled_from(FRAGMENTS), st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)),
            max_size=12,
        ).map("".join),
        min_size=1,
        max_size=8,
    )
)
@settings(max_examples=150, deadline=None)
def test_tiktoken_gives_hf_ids_on_any_text(trained, texts: list[str]) -> None:
    tok, concat = trained
    assert concat.encoder.backend == "tiktoken"
    assert encoded(concat.encoder, texts) == hf_ids(tok, texts)
