"""Throughput of `launcher data convert` on a generated corpus, per CPU core, for both engines.

Each repeat runs, interleaved: the yardstick (the tokenizer library convert encodes with, over the
same texts, one thread, nothing else: tiktoken where it reproduces the tokenizer exactly, as it
does the byte-level BPE trained here; the tokenizers library's Rust batch encode, the fallback,
is measured beside it), then every engine x worker count. Per core is MB of text
per CPU-second of every process of the conversion: this one, the local engine's workers,
Spark's JVM and its Python workers. Spark's session start-up and first conversion (its
Python workers importing streaming and the tokenizer) are reported apart, not counted.
Goal (issue 25): >= 5 MB/s of text per core; the seed's Spark notebook did about 0.72.

    .venv/bin/python bench/bench_data_convert.py [--mb 50] [--workers 1 2] [--engines local spark]
        [--repeat 3] [--vocab 32000] [--seq 2048] [--quick] [--rows FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


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


def _tree_cpu_seconds() -> float:
    """CPU-seconds of this process and every process under it, living (psutil: the Spark JVM
    and its Python workers) or reaped (getrusage's children: the local engine's workers)."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def _own_cpu_seconds() -> float:
    """CPU-seconds of this process and its reaped children (the yardstick's encoders), not
    of a Spark session's JVM and Python workers, which may still be finishing a conversion."""
    import resource

    return sum(t for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for t in resource.getrusage(who)[:2])


def encoder_of(tokenizer_dir: Path, library: str):
    """A function that encodes a list of texts with `library` alone, one thread: "tokenizers"
    (the Rust batch encode) or "tiktoken" (the Encoding convert builds for this tokenizer,
    encode_to_numpy per text, as convert calls it). Built here, outside the measured time."""
    if library == "tiktoken":
        from launcher.data.tiktoken_bpe import exact_tiktoken
        from launcher.data.tokenizer import load_tokenizer

        encoding = exact_tiktoken(load_tokenizer(str(tokenizer_dir)).backend_tokenizer, False).encoding
        return lambda batch: [encoding.encode_to_numpy(t, allowed_special="all") for t in batch]
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    encode = getattr(tok, "encode_batch_fast", tok.encode_batch)
    return lambda batch: encode(batch, add_special_tokens=False)


def _encode_all(encode, texts: list[str], batch: int = 1024) -> None:
    for i in range(0, len(texts), batch):
        encode(texts[i : i + batch])


def tokenizer_alone(encode, texts: list[str], processes: int = 1) -> float:
    """The yardstick: CPU-seconds of one tokenizer library's encode over the texts on one
    thread per process, and nothing else (no reading, no joining, no writing). With N processes
    each encodes 1/N of the texts at the same time, as N workers do: two busy processes on this
    machine's cores each run slower per CPU-second than one alone."""
    import multiprocessing as mp

    began = _own_cpu_seconds()
    if processes == 1:
        _encode_all(encode, texts)
        return _own_cpu_seconds() - began
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_encode_all, args=(encode, texts[i::processes])) for i in range(processes)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    return _own_cpu_seconds() - began


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from rows import Row, add_row_args, write_rows

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=50, help="MB of text to generate (default 50; --quick: 10)")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--engines", nargs="+", default=["local", "spark"], choices=["local", "spark"])
    ap.add_argument("--repeat", type=int, default=3, help="interleaved repeats (default 3; --quick: 2)")
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    add_row_args(ap)
    args = ap.parse_args()
    if args.quick:
        args.mb, args.repeat = min(args.mb, 10), min(args.repeat, 2)
    # Every number is per core: the tokenizer runs on one thread in each process.
    os.environ["TOKENIZERS_PARALLELISM"] = "false"

    from launcher.data.concat import BatchEncoder
    from launcher.data.convert import convert
    from launcher.data.spark import spark_session
    from launcher.data.tokenizer import load_tokenizer, train_tokenizer

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
        trained = time.monotonic() - t
        loaded = load_tokenizer(str(tok))
        cpu0 = time.process_time()
        encoder = BatchEncoder(loaded)
        print(f"tokenizer: byte-level BPE, vocab {args.vocab}, trained in {trained:.1f} s; "
              f"samples of {args.seq} tokens; cores: {os.cpu_count()}")
        print(f"convert encodes with {encoder.backend}" + (f" ({encoder.fallback_reason})" if encoder.fallback_reason else "")
              + f"; choosing took {time.process_time() - cpu0:.2f} CPU-s, once per process "
              "(the conversions below reuse the choice)")
        # The yardstick is the library convert encodes with; the tokenizers library alone
        # (the fallback, and the ceiling before tiktoken) is printed beside it.
        libraries = list(dict.fromkeys([encoder.backend, "tokenizers"]))
        encoders = {lib: encoder_of(tok, lib) for lib in libraries}
        with corpus.open() as f:
            texts = [json.loads(line)["text"] for line in f]

        configs = [(e, w) for e in args.engines for w in args.workers]
        spark = None
        if "spark" in args.engines:
            cpu0, t0 = _tree_cpu_seconds(), time.monotonic()
            spark = spark_session("bench-data-convert", max(args.workers))  # the session the command starts
            print(f"spark: local[{max(args.workers)}] session started in {time.monotonic() - t0:.1f} s "
                  f"({_tree_cpu_seconds() - cpu0:.1f} CPU-s); its first conversion (Python workers starting, "
                  "importing streaming and the tokenizer) is a warm-up, not counted")
            convert([str(sample)], str(root / "warm"), str(tok), args.seq, engine="spark", workers=max(args.workers))
            shutil.rmtree(root / "warm")
        # MB per CPU-second of each library alone, by worker count
        yards: dict[str, dict[int, list[float]]] = {lib: {w: [] for w in args.workers} for lib in libraries}
        yard = yards[encoder.backend]
        got: dict[tuple[str, int], list[tuple[float, float]]] = {c: [] for c in configs}  # (MB/CPU-s, MB/s)
        for r in range(args.repeat):
            for lib in libraries:
                for w in args.workers:
                    yards[lib][w].append(text_bytes / tokenizer_alone(encoders[lib], texts, w) / 1e6)
            for engine, workers in configs:
                out = root / f"out-{engine}-{workers}"
                cpu0, t0 = _tree_cpu_seconds(), time.monotonic()
                s = convert([str(corpus)], str(out), str(tok), args.seq, workers=workers, engine=engine)
                wall, cpu = time.monotonic() - t0, _tree_cpu_seconds() - cpu0
                got[(engine, workers)].append((text_bytes / cpu / 1e6, text_bytes / wall / 1e6))
                shutil.rmtree(out)
            print(f"  repeat {r + 1}/{args.repeat}: "
                  + "; ".join(f"{lib} alone " + ", ".join(f"x{w} {v[-1]:.2f}" for w, v in yards[lib].items())
                              for lib in libraries) + " MB/CPU-s; "
                  + "; ".join(f"{e} x{w} {v[-1][0]:.2f}" for (e, w), v in got.items()))
        if spark is not None:
            spark.stop()

        y = {w: statistics.median(v) for w, v in yard.items()}
        print(f"\n{args.repeat} interleaved repeats, medians [best]. Per core = MB of text / CPU-seconds of every "
              "process of the conversion (this one, its workers; Spark's JVM and Python workers).")
        for lib in libraries:
            for w, v in yards[lib].items():
                print(f"tokenizer alone, {lib}{' (what convert encodes with)' if lib == encoder.backend else ''}, "
                      f"one thread, in {w} process(es) at once: {statistics.median(v):.2f} MB/s per core [{max(v):.2f}]")
        header = f"{'engine':>6} {'workers':>7} {'MB/s/core':>10} {'best':>6} {'x its tokenizer alone, as many procs':>36} {'wall MB/s':>10}"
        print(header + "\n" + "-" * len(header))
        rows = []
        for (engine, workers), v in got.items():
            per_core = statistics.median(x[0] for x in v)
            ratio = statistics.median(x[0] / yd for x, yd in zip(v, yard[workers]))
            print(f"{engine:>6} {workers:>7} {per_core:>10.2f} {max(x[0] for x in v):>6.2f} {ratio:>36.2f} "
                  f"{statistics.median(x[1] for x in v):>10.2f}")
            rows.append(Row(f"`launcher data convert`, text per core, --engine {engine}, {workers} worker(s)",
                            f"the tokenizer alone ({encoder.backend}), {workers} process(es): {y[workers]:.2f} MB/s per core (same run)", f"{per_core:.2f} MB/s per core",
                            round(ratio, 2), ">= 5 MB/s per core", per_core >= 5))
        print(f"\n{s.tokens:,} tokens -> {s.samples:,} samples of {args.seq}; goal: >= 5 MB/s of text per core "
              "(the seed's Spark notebook: about 0.72)")
        write_rows(args, rows)
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
