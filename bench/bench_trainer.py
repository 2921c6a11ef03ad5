"""The built-in trainer's speed against a plain PyTorch loop, for the tiny MPT on CPU.

    .venv/bin/python bench/bench_trainer.py [--batches 60] [--repeats 2]

Prepares number-say MDS data (synthetic text, a 512-token BPE, 64-token samples)
in a temporary directory, then runs, each in a fresh process and alternating:
- the trainer: `python -m launcher.train cfg.yaml` (Composer, our metrics logger,
  SpeedMonitor, LR monitor; no eval, no checkpoints);
- a plain loop: the same MptForCausalLM, the same StreamingDataset and collate,
  the same optimizer (DecoupledAdamW, a torch.optim.Optimizer), forward/backward/step.
Throughput is measured over the same steady-state steps of both (after a warm-up)
from per-step wall-clock stamps. Prints tokens/s of each, their ratio (goal >= 0.95),
and the trainer's time from process start to the end of its first step.

With --same-process, both run alternately inside one process instead (the trainer built
as `python -m launcher.train` builds it, stamped at each batch end), which takes the
differences between processes (start-up, memory layout, a neighbour's burst on a shared
machine) out of the pairs; it measures the trainer's per-step cost alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SEQ = 64
BATCH = 16
VOCAB = 512
WARMUP = 10

CONFIG = """\
seed: 17
model: {{d_model: 128, n_heads: 4, n_layers: 2, max_seq_len: {seq}, vocab_size: {vocab}}}
tokenizer: {tok}
train_loader:
  dataset: {{remote: {mds}, split: train, shuffle: true}}
optimizer: {{name: decoupled_adamw, lr: 3.0e-3, weight_decay: 0.0}}
scheduler: {{name: constant_with_warmup, t_warmup: 0ba}}
max_duration: {batches}ba
global_train_batch_size: {batch}
precision: fp32
log_to_console: false
"""


def prepare(root: Path) -> tuple[Path, Path]:
    from launcher.data.convert import convert
    from launcher.data.synthetic import write_number_say
    from launcher.data.tokenizer import train_tokenizer

    raw = root / "raw.jsonl"
    write_number_say(raw, 20000, seed=0)
    tok = train_tokenizer([str(raw)], VOCAB, root / "tokenizer")
    convert([str(raw)], str(root / "mds"), str(tok), SEQ, split="train")
    return root / "mds", tok


def run_trainer(cfg: Path, batches: int) -> dict[str, float]:
    start = time.time()
    proc = subprocess.run(
        [sys.executable, "-m", "launcher.train", str(cfg)],
        cwd=REPO, capture_output=True, text=True, check=False,
    )
    if proc.returncode:
        sys.exit(f"trainer failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    from launcher.metrics.records import parse_record

    stamps = {}
    for line in proc.stdout.splitlines():
        rec = parse_record(line)
        if rec and "metrics" in rec and "loss/train/total" in rec["metrics"]:
            stamps[rec["step"]] = rec["time"]
    assert len(stamps) == batches, f"expected {batches} step records, got {len(stamps)}"
    return {**_rates([stamps[s] for s in range(1, batches + 1)]), "first_step_s": stamps[1] - start}


def _rates(stamps: list[float]) -> dict[str, float]:
    """Steady-state tokens/s from per-step end times: over the whole window after the
    warm-up, and from the median step (robust to other processes' bursts on a shared box)."""
    steps = [b - a for a, b in zip(stamps[WARMUP - 1 :], stamps[WARMUP:])]
    return {
        "tokens_per_s": BATCH * SEQ * len(steps) / sum(steps),
        "median_tokens_per_s": BATCH * SEQ / statistics.median(steps),
    }


def plain_loop(mds: str, batches: int) -> None:
    """Runs in its own process; prints one JSON line of per-step stamps."""
    import torch
    from torch.utils.data import DataLoader
    from transformers import MptForCausalLM

    from launcher.train.config import ModelConfig
    from launcher.train.data import TokenDataset, collate
    from launcher.train.model import mpt_config

    torch.manual_seed(17)
    m = ModelConfig(d_model=128, n_heads=4, n_layers=2, max_seq_len=SEQ, vocab_size=VOCAB)
    model = MptForCausalLM(mpt_config(m))
    model.train()
    # The optimizer the trainer's config names (decoupled_adamw), so that the comparison measures
    # the trainer's own cost, not a different optimizer's.
    from composer.optim import DecoupledAdamW

    opt = DecoupledAdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.0)
    ds = TokenDataset(dtype=_sidecar(mds)["dtype"], seq_len=SEQ, local=mds, split="train", shuffle=True, batch_size=BATCH)
    loader = DataLoader(ds, batch_size=BATCH, collate_fn=collate, drop_last=True)
    stamps = []
    step = 0
    while step < batches:
        for batch in loader:
            out = model(input_ids=batch["input_ids"], labels=batch["labels"])
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            out.loss.item()
            stamps.append(time.time())
            step += 1
            if step == batches:
                break
    print(json.dumps(stamps))


def _sidecar(mds: str) -> dict:
    return json.loads((Path(mds) / "train" / "launcher_dataset.json").read_text())


def run_plain(mds: Path, batches: int) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, __file__, "--plain", str(mds), "--batches", str(batches)],
        cwd=REPO, capture_output=True, text=True, check=False,
    )
    if proc.returncode:
        sys.exit(f"plain loop failed:\n{proc.stderr[-3000:]}")
    return _rates(json.loads(proc.stdout.strip().splitlines()[-1]))


def same_process(cfg: Path, mds: Path, batches: int, repeats: int) -> None:
    """Plain loop, then trainer, `repeats` times in this process; median step of each run."""
    import contextlib
    import io

    from composer.core import Callback

    from launcher.train.cache import assign_caches
    from launcher.train.config import load_config
    from launcher.train.main import build_trainer
    from launcher.train.preflight import preflight

    class Stamps(Callback):
        def __init__(self) -> None:
            self.times: list[float] = []

        def batch_end(self, state, logger) -> None:
            self.times.append(time.time())

    pairs = []
    for _ in range(repeats):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            plain_loop(str(mds), batches)
        plain = _rates(json.loads(out.getvalue().strip().splitlines()[-1]))
        config = load_config(str(cfg), [])
        assign_caches(config)
        stamps = Stamps()
        with contextlib.redirect_stdout(io.StringIO()):  # the trainer's metric records
            trainer = build_trainer(config, preflight(config))
            trainer.state.callbacks.append(stamps)
            try:
                trainer.fit()
            finally:
                trainer.close()
        ours = _rates(stamps.times)
        pairs.append((ours["median_tokens_per_s"], plain["median_tokens_per_s"]))
        print(f"  trainer {ours['median_tokens_per_s']:,.0f} tokens/s, plain loop {plain['median_tokens_per_s']:,.0f}",
              flush=True)
    ratio = statistics.median(a / b for a, b in pairs)
    print(f"[same process, median step] median of {repeats} paired ratios {ratio:.3f} (goal >= 0.95)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3, help="alternating runs of each (at least 3)")
    ap.add_argument("--same-process", action="store_true", help="alternate both inside this process")
    ap.add_argument("--plain", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.repeats < 3 and not args.plain:
        ap.error("--repeats must be at least 3: the result is a median over alternating runs")
    if args.plain:
        plain_loop(args.plain, args.batches)
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.time()
        mds, tok = prepare(root)
        print(f"data prepared in {time.time() - t0:.1f}s ({_sidecar(str(mds))['samples']} samples of {SEQ} tokens)")
        cfg = root / "bench.yaml"
        cfg.write_text(CONFIG.format(seq=SEQ, vocab=VOCAB, tok=tok, mds=mds, batches=args.batches, batch=BATCH))
        os.environ.pop("LAUNCHER_ARTIFACTS_DIR", None)
        if args.same_process:
            same_process(cfg, mds, args.batches, args.repeats)
            return
        trainer, plain = [], []
        for _ in range(args.repeats):
            trainer.append(run_trainer(cfg, args.batches))
            plain.append(run_plain(mds, args.batches))
        first = statistics.median(r["first_step_s"] for r in trainer)
        print(f"model: MPT d_model=128 n_layers=2 vocab={VOCAB} (~0.46M params), batch {BATCH} x {SEQ} tokens, "
              f"{args.batches} batches, steady state after {WARMUP}, median of {args.repeats} runs each")
        for key, label in (("tokens_per_s", "window"), ("median_tokens_per_s", "median step")):
            t = statistics.median(r[key] for r in trainer)
            p = statistics.median(r[key] for r in plain)
            runs_t = ", ".join(format(r[key], ",.0f") for r in trainer)
            runs_p = ", ".join(format(r[key], ",.0f") for r in plain)
            pairs = statistics.median(a[key] / b[key] for a, b in zip(trainer, plain))
            print(f"[{label}] trainer tokens/s {t:,.0f} (runs {runs_t}); plain loop {p:,.0f} (runs {runs_p}); "
                  f"ratio of medians {t / p:.3f}, median of paired ratios {pairs:.3f} (goal >= 0.95)")
        print(f"process start -> first step done: {first:.1f}s")


if __name__ == "__main__":
    main()
