"""`launcher data`: synthetic text, offline tokenizers, and text -> MDS conversion.

Heavy libraries (transformers, streaming, pyarrow) are imported inside the commands.
"""

from __future__ import annotations

import click

from launcher.data.prepare import prepare as run_prepare
from launcher.data.synthetic import write_number_say, write_sentiment
from launcher.data.tokenizer import load_tokenizer, train_tokenizer, train_wordpiece
from launcher.errors import InputError, file_boundary

EOS_DEFAULT = "<|endoftext|>"


@click.group()
def data() -> None:
    """Prepare training data: tokenizers, synthetic text, MDS conversion."""


def _human_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"


@data.command()
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option(
    "--out",
    required=True,
    help="Output root: a local directory, s3://..., or dbfs:/Volumes/<catalog>/<schema>/<volume>/...",
)
@click.option(
    "--tokenizer",
    "tokenizer",
    required=True,
    metavar="NAME_OR_PATH",
    help="A tokenizer directory or a Hugging Face hub name.",
)
@click.option("--concat-tokens", type=int, required=True, metavar="N", help="Tokens per sample, e.g. 2048.")
@click.option("--text-column", default="text", show_default=True, help="Column (or JSON key) holding the text.")
@click.option("--eos-text", default=EOS_DEFAULT, show_default=True, help="Text appended to every document.")
@click.option("--bos-text", default="", help="Text prepended to every document.")
@click.option("--split", default="train", show_default=True, help="Split name: the data goes to OUT/<split>.")
@click.option(
    "--compression",
    default="zstd",
    show_default=True,
    help="Shard compression (zstd, zstd:N, gz, br, snappy, bz2 or none).",
)
@click.option(
    "--workers", type=int, default=1, show_default=True, help="Tokenizing processes, each writing its own partition."
)
@click.option(
    "--engine",
    type=click.Choice(["local", "spark"]),
    default="local",
    show_default=True,
    help="spark runs streaming's dataframe_to_mds (needs the spark extra).",
)
@click.option("--shard-size", default="64mb", show_default=True, help="Raw bytes per shard before a new one starts.")
@click.option("--overwrite", is_flag=True, help="Replace a dataset already at OUT/<split>.")
def convert(
    inputs: tuple[str, ...],
    out: str,
    tokenizer: str,
    concat_tokens: int,
    text_column: str,
    eos_text: str,
    bos_text: str,
    split: str,
    compression: str,
    workers: int,
    engine: str,
    shard_size: str,
    overwrite: bool,
) -> None:
    """Tokenize text and write concatenated, fixed-length samples as MDS.

    INPUT: JSON Lines, Parquet, CSV, text files (one document per file) or a Hugging Face
    dataset saved with save_to_disk; local or remote (fsspec); globs expand.
    """
    from launcher.data.convert import check_workers
    from launcher.data.convert import convert as run_convert
    from launcher.data.progress import RichProgress

    check_workers(workers)  # before streaming's import, which takes seconds
    try:
        from streaming.base.util import bytes_to_int

        size = bytes_to_int(shard_size)
    except ImportError:
        size = 1 << 26  # convert() itself says that the train extra is missing
    except ValueError:
        raise InputError(f"--shard-size {shard_size!r} is not a size such as 64mb or 1048576") from None
    summary = run_convert(
        list(inputs),
        out,
        tokenizer,
        concat_tokens,
        text_column=text_column,
        eos_text=eos_text,
        bos_text=bos_text,
        split=split,
        compression=compression,
        workers=workers,
        engine=engine,
        overwrite=overwrite,
        shard_size=size,
        progress=RichProgress(f"converting ({workers} worker{'s' if workers > 1 else ''})"),
    )
    for note in summary.notes:
        click.echo(f"! {note}", err=True)
    rate = summary.text_bytes / summary.seconds / 1e6 if summary.seconds > 0 else 0.0
    rows = [
        ("documents", f"{summary.documents:,}"),
        ("tokens", f"{summary.tokens:,}"),
        ("samples", f"{summary.samples:,} x {summary.seq_len} tokens ({summary.dtype})"),
        ("shards", f"{summary.shards:,}"),
        ("bytes", f"{summary.bytes:,} ({_human_bytes(summary.bytes)})"),
        (
            "tokens/s",
            f"{summary.tokens_per_second:,.0f} ({f'{rate:.2f} MB/s of text, ' if rate else ''}{summary.seconds:.1f} s)",
        ),
        ("written to", summary.url),
    ]
    click.echo(f"✔ Converted {summary.documents:,} documents into {summary.samples:,} samples")
    for key, value in rows:
        click.echo(f"  {key:<11} {value}")
    click.echo("Paste into your run spec:")
    click.echo(f"  {summary.remote_line}")


@data.group()
def tokenizer() -> None:
    """Train a tokenizer offline."""


@tokenizer.command("train")
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option(
    "--vocab-size", type=int, required=True, metavar="N", help="Tokens in the vocabulary, special tokens included."
)
@click.option(
    "--out", required=True, type=click.Path(file_okay=False), help="Directory for the Hugging Face tokenizer files."
)
@click.option("--text-column", default="text", show_default=True, help="Column (or JSON key) holding the text.")
@click.option(
    "--kind",
    type=click.Choice(["bpe", "wordpiece"]),
    default="bpe",
    show_default=True,
    help="bpe: byte-level BPE for GPT-style models; wordpiece: BERT-style, for classifiers.",
)
def tokenizer_train(inputs: tuple[str, ...], vocab_size: int, out: str, text_column: str, kind: str) -> None:
    """Train a tokenizer on INPUT... and save it as a Hugging Face tokenizer directory."""
    train = train_wordpiece if kind == "wordpiece" else train_tokenizer
    path = train(list(inputs), vocab_size, out, text_column=text_column)
    size = len(load_tokenizer(str(path)))
    note = "" if size == vocab_size else f" (the text held no more than that; asked for {vocab_size:,})"
    what = "WordPiece" if kind == "wordpiece" else "byte-level BPE"
    click.echo(f"✔ Trained a {what} tokenizer with {size:,} tokens{note}")
    click.echo(f"  saved to {path}; use it with --tokenizer {path}")


@data.command()
@click.option(
    "--kind",
    type=click.Choice(["number-say", "sentiment"]),
    default="number-say",
    show_default=True,
    help="number-say: text for language models; sentiment: reviews with string labels, for classifiers.",
)
@click.option("--samples", type=click.IntRange(min=1), required=True, metavar="N", help="Documents to write.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="The JSON Lines file to write.")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
def synthetic(kind: str, samples: int, out: str, seed: int) -> None:
    """Write a synthetic dataset as JSON Lines: the seed tutorial's number-saying text
    ("text"), or learnable sentiment reviews ("text", "label": positive/negative)."""
    with file_boundary(out, "write"):
        count = (write_sentiment if kind == "sentiment" else write_number_say)(out, samples, seed=seed)
    click.echo(f"✔ Wrote {count:,} {kind} documents to {out}")


@data.command()
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option(
    "--out", required=True, help="Output directory: local, s3://..., or dbfs:/Volumes/<catalog>/<schema>/<volume>/..."
)
@click.option(
    "--tokenizer",
    "tokenizer",
    required=True,
    metavar="NAME_OR_PATH",
    help="A tokenizer directory or a Hugging Face hub name.",
)
@click.option("--text-column", default="text", show_default=True, help="Column holding the text.")
@click.option(
    "--label-column", default="label", show_default=True, help="Column holding the labels (strings become ids)."
)
@click.option("--no-labels", is_flag=True, help="Text only (causal LM fine-tuning).")
@click.option(
    "--test-size", type=float, default=0.2, show_default=True, help="Fraction of the rows for the test split."
)
@click.option("--max-length", type=int, default=128, show_default=True, help="Tokens per example (longer text is cut).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the train/test split.")
@click.option(
    "--engine",
    type=click.Choice(["local", "spark"]),
    default="local",
    show_default=True,
    help="spark reads the inputs as a Spark DataFrame and converts it with datasets.Dataset.from_spark.",
)
@click.option("--overwrite", is_flag=True, help="Replace what is at --out.")
def prepare(
    inputs: tuple[str, ...],
    out: str,
    tokenizer: str,
    text_column: str,
    label_column: str,
    no_labels: bool,
    test_size: float,
    max_length: int,
    seed: int,
    engine: str,
    overwrite: bool,
) -> None:
    """Tokenize Parquet, CSV or JSON Lines into a Hugging Face dataset (train and test
    splits, save_to_disk) for the fine-tuning recipe (python -m launcher.train.hf).

    String labels are mapped to ids in sorted order; the mapping is written beside the
    data as label_mapping.json, where the recipe reads id2label from.
    """

    summary = run_prepare(
        list(inputs),
        out,
        tokenizer,
        text_column=text_column,
        label_column=None if no_labels else label_column,
        test_size=test_size,
        max_length=max_length,
        seed=seed,
        engine=engine,
        overwrite=overwrite,
    )
    total = sum(summary.rows.values())
    click.echo(f"✔ Prepared {total:,} examples in {summary.seconds:.1f} s")
    for split, n in summary.rows.items():
        click.echo(f"  {split:<11} {n:,}")
    if summary.labels:
        click.echo(f"  {'labels':<11} " + ", ".join(f"{i}={name}" for i, name in summary.labels.items()))
    click.echo(f"  {'written to':<11} {summary.out}")
    click.echo("Paste into your run spec:")
    click.echo(f"  {summary.data_line}")
