"""`launcher data`: synthetic text, offline tokenizers, and text -> MDS conversion.

Heavy libraries (transformers, streaming, pyarrow) are imported inside the commands.
"""

from __future__ import annotations

import click

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
@click.option("--out", required=True, help="Output root: a local directory, s3://..., or dbfs:/Volumes/<catalog>/<schema>/<volume>/...")
@click.option("--tokenizer", "tokenizer", required=True, metavar="NAME_OR_PATH", help="A tokenizer directory or a Hugging Face hub name.")
@click.option("--concat-tokens", type=int, required=True, metavar="N", help="Tokens per sample, e.g. 2048.")
@click.option("--text-column", default="text", show_default=True, help="Column (or JSON key) holding the text.")
@click.option("--eos-text", default=EOS_DEFAULT, show_default=True, help="Text appended to every document.")
@click.option("--bos-text", default="", help="Text prepended to every document.")
@click.option("--split", default="train", show_default=True, help="Split name: the data goes to OUT/<split>.")
@click.option("--compression", default="zstd", show_default=True, help="Shard compression (zstd, zstd:N, gz, br, snappy, bz2 or none).")
@click.option("--workers", type=int, default=1, show_default=True, help="Tokenizing processes, each writing its own partition.")
@click.option("--engine", type=click.Choice(["local", "spark"]), default="local", show_default=True, help="spark runs streaming's dataframe_to_mds (needs the spark extra).")
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
    from launcher.data.convert import convert as run_convert
    from launcher.data.progress import RichProgress
    from launcher.errors import InputError

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
        ("tokens/s", f"{summary.tokens_per_second:,.0f} ({f'{rate:.2f} MB/s of text, ' if rate else ''}{summary.seconds:.1f} s)"),
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
@click.option("--vocab-size", type=int, required=True, metavar="N", help="Tokens in the vocabulary, <|endoftext|> included.")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Directory for the Hugging Face tokenizer files.")
@click.option("--text-column", default="text", show_default=True, help="Column (or JSON key) holding the text.")
def tokenizer_train(inputs: tuple[str, ...], vocab_size: int, out: str, text_column: str) -> None:
    """Train a byte-level BPE on INPUT... and save it as a Hugging Face tokenizer directory."""
    from launcher.data.tokenizer import load_tokenizer, train_tokenizer

    path = train_tokenizer(list(inputs), vocab_size, out, text_column=text_column)
    size = len(load_tokenizer(str(path)))
    note = "" if size == vocab_size else f" (the text held no more merges than that; asked for {vocab_size:,})"
    click.echo(f"✔ Trained a byte-level BPE tokenizer with {size:,} tokens{note}")
    click.echo(f"  saved to {path}; use it with --tokenizer {path}")


@data.command()
@click.option("--kind", type=click.Choice(["number-say"]), default="number-say", show_default=True, help="What to generate.")
@click.option("--samples", type=click.IntRange(min=1), required=True, metavar="N", help="Documents to write.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="The JSON Lines file to write.")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
def synthetic(kind: str, samples: int, out: str, seed: int) -> None:
    """Write the seed tutorial's number-saying dataset as JSON Lines ("text" column)."""
    from launcher.data.synthetic import write_number_say

    count = write_number_say(out, samples, seed=seed)
    click.echo(f"✔ Wrote {count:,} {kind} documents to {out}")
