"""Throughput of `launcher data convert` on a generated corpus (>= 50 MB of text).

Prints, for 1 and 2 worker processes: wall time, MB/s of input text, tokens/s, tokens/s per
worker process, and MB/s per CPU-second (this process and its workers together), which is
the number to hold against the goal of >= 2 MB/s of text per core (the seed's Spark
notebook reached about 0.7 MB/s per core).

    .venv/bin/python bench/bench_data_convert.py [--mb 50] [--workers 1 2] [--vocab 32000]

Single-worker runs tokenize on one thread (TOKENIZERS_PARALLELISM=false), so that every
number is per process and per core.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def make_corpus(path: Path, megabytes: int, seed: int = 0) -> int:
    """Pseudo-English: 30k made-up words with Zipfian frequencies (so BPE merges and the
    tokenizer's word cache behave as on real text), sentences, numbers and punctuation."""
    import numpy as np

    rng = np.random.default_rng(seed)
    syllables = [c + v + e for c in "bcdfghjklmnprstvwz" for v in "aeiou" for e in ("", "n", "r", "s", "th")]
    lengths = rng.integers(1, 4, size=30_000)
    words = np.array(["".join(rng.choice(syllables, size=n)) for n in lengths])
    ranks = np.arange(1, len(words) + 1)
    p = 1.0 / ranks**1.07
    p /= p.sum()
    target = megabytes * 1_000_000
    written = 0
    with path.open("w", encoding="utf-8") as f:
        while written < target:
            ids = rng.choice(len(words), size=200_000, p=p)
            sentence_lengths = rng.integers(4, 26, size=20_000)
            pos = 0
            doc: list[str] = []
            doc_len = 0
            doc_target = int(rng.integers(800, 8000))
            for n in sentence_lengths:
                chunk = words[ids[pos : pos + n]]
                pos += n
                if len(chunk) < n:
                    break
                s = " ".join(chunk)
                if rng.random() < 0.15:
                    s += f" {int(rng.integers(0, 100000))}"
                s = s[0].upper() + s[1:] + (". " if rng.random() < 0.85 else "? ")
                doc.append(s)
                doc_len += len(s)
                if doc_len >= doc_target:
                    text = "".join(doc).strip()
                    f.write(json.dumps({"text": text}) + "\n")
                    written += len(text.encode())
                    doc, doc_len, doc_target = [], 0, int(rng.integers(800, 8000))
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=50, help="MB of text to generate (default 50)")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()

    from launcher.data.convert import convert
    from launcher.data.tokenizer import train_tokenizer

    root = Path(tempfile.mkdtemp(prefix="bench-data-"))
    try:
        corpus = root / "corpus.jsonl"
        t = time.monotonic()
        text_bytes = make_corpus(corpus, args.mb)
        print(f"corpus: {text_bytes / 1e6:.1f} MB of text in {corpus.stat().st_size / 1e6:.1f} MB of JSON Lines "
              f"({time.monotonic() - t:.1f} s to generate)")
        sample = root / "sample.jsonl"
        with corpus.open() as src, sample.open("w") as dst:
            for _, line in zip(range(2000), src, strict=False):
                dst.write(line)
        t = time.monotonic()
        tok = train_tokenizer([str(sample)], args.vocab, root / "tok")
        print(f"tokenizer: byte-level BPE, vocab {args.vocab}, trained in {time.monotonic() - t:.1f} s")
        print(f"cores: {os.cpu_count()}\n")
        header = f"{'workers':>7} {'wall s':>7} {'MB/s':>7} {'tokens/s':>11} {'tok/s/worker':>13} {'MB/s/worker':>12} {'MB/s/CPU-s':>11}"
        print(header)
        print("-" * len(header))
        for workers in args.workers:
            out = root / f"out-{workers}"
            if workers == 1:
                os.environ["TOKENIZERS_PARALLELISM"] = "false"
            cpu0, t0 = _cpu_seconds(), time.monotonic()
            s = convert([str(corpus)], str(out), str(tok), args.seq, workers=workers)
            wall, cpu = time.monotonic() - t0, _cpu_seconds() - cpu0
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
            mbps = s.text_bytes / wall / 1e6
            print(f"{workers:>7} {wall:>7.1f} {mbps:>7.2f} {s.tokens / wall:>11,.0f} {s.tokens / wall / workers:>13,.0f} "
                  f"{mbps / workers:>12.2f} {s.text_bytes / cpu / 1e6:>11.2f}")
            shutil.rmtree(out)
        print(f"\n{s.tokens:,} tokens -> {s.samples:,} samples of {args.seq}; goal: >= 2 MB/s of text per core")
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
