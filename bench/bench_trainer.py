"""The built-in trainer's speed against a plain PyTorch loop, for the tiny MPT on CPU.

    .venv/bin/python bench/bench_trainer.py [--batches 60] [--repeats 3] [--sequential]

Prepares number-say MDS data (synthetic text, a 512-token BPE, 64-token samples)
in a temporary directory, then compares
- the trainer: launcher.train.main.train(cfg.yaml), what `python -m launcher.train cfg.yaml`
  runs (Composer, our metrics logger, SpeedMonitor, LR monitor, scheduled GC; no eval, no
  checkpoints);
- a plain loop: the same MptForCausalLM, the same StreamingDataset and collate,
  the same optimizer (DecoupledAdamW, a torch.optim.Optimizer), forward/backward/step.

By default both run at once, each in a process of its own, in lockstep: one step of one,
then one step of the other, handed over through pipes, and the process whose turn it is not
is stopped (SIGSTOP), so each step has the machine to itself and a neighbour's burst on this
shared machine falls on both alike. (This machine's speed drifts by up to 20 % between runs
a minute apart, which sequential runs cannot tell from the trainer's cost: their paired
ratios spread 0.84-1.10. Without the stop, the idle process's spinning OpenMP threads and
polling streaming threads slowed the running one, both alike, which pulled the ratio toward
1: 0.94-0.97 where it is 0.93 with the stop.) Each process times its steps from the moment
it gets its turn to the end of the step (the trainer: batch end to batch end, so every
per-step event, the dataloader and the metric record are inside). Which one leads
alternates between runs. With --sequential, each runs alone in a fresh process instead,
one after the other.

Throughput is tokens/s over the steady-state steps (after a warm-up), from the whole window
and from the median step. Prints both loops' tokens/s per run, the median of the paired
ratios and the ratio of medians (goal >= 0.95), and the trainer's time from process start
to the end of its first step.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
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
START_TIMEOUT_S = 300  # a process's imports and set-up, to its first step
STEP_TIMEOUT_S = 120

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


def _sidecar(mds: str) -> dict:
    return json.loads((Path(mds) / "train" / "launcher_dataset.json").read_text())


def _rates(steps: list[float]) -> dict[str, float]:
    """Steady-state tokens/s from step durations (seconds): over the whole window after the
    warm-up, and from the median step (robust to other processes' bursts on a shared box)."""
    steady = steps[WARMUP:]
    return {
        "tokens_per_s": BATCH * SEQ * len(steady) / sum(steady),
        "median_tokens_per_s": BATCH * SEQ / statistics.median(steady),
    }


# ------------------------------------------------------------------ the two loops (child side)


class Turns:
    """A child's side of the lockstep: say "ready", wait for "go", time the step until the next
    "ready". Without pipes (--sequential) a step is simply the time between two step ends."""

    def __init__(self, fds: str | None):
        self.read_fd, self.write_fd = (int(x) for x in fds.split(",")) if fds else (None, None)
        self.steps: list[float] = []
        self.started: float | None = None
        self.ready_at: float | None = None  # wall clock of the first "ready" (set-up done)

    def wait(self) -> None:
        if self.ready_at is None:
            self.ready_at = time.time()
        if self.write_fd is not None:
            os.write(self.write_fd, b"r")
            if os.read(self.read_fd, 1) != b"g":
                sys.exit("bench: the lockstep pipe closed")
        self.started = time.perf_counter()

    def step_done(self) -> None:
        now = time.perf_counter()
        self.steps.append(now - self.started)
        self.started = now
        self.wait()


def plain_loop(mds: str, batches: int, turns: Turns) -> None:
    import torch
    from composer.optim import DecoupledAdamW
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
    opt = DecoupledAdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.0)
    ds = TokenDataset(dtype=_sidecar(mds)["dtype"], seq_len=SEQ, local=mds, split="train", shuffle=True, batch_size=BATCH)
    loader = DataLoader(ds, batch_size=BATCH, collate_fn=collate, drop_last=True)
    turns.wait()
    step = 0
    while step < batches:
        for batch in loader:
            out = model(input_ids=batch["input_ids"], labels=batch["labels"])
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            out.loss.item()
            step += 1
            turns.step_done()
            if step == batches:
                break


def trainer_loop(cfg: str, turns: Turns) -> None:
    from composer.core import Callback

    from launcher.train.main import train

    class TurnEachBatch(Callback):
        def fit_start(self, state, logger) -> None:
            turns.wait()

        def batch_end(self, state, logger) -> None:
            turns.step_done()

    train(cfg, extra_callbacks=[TurnEachBatch()])


def child(args: argparse.Namespace) -> None:
    turns = Turns(args.turn_fds)
    if args.child == "trainer":
        trainer_loop(args.cfg, turns)
    else:
        plain_loop(args.mds, args.batches, turns)
    Path(args.out).write_text(json.dumps({"steps": turns.steps, "ready_at": turns.ready_at}))


# ------------------------------------------------------------------ the referee (parent side)


class Child:
    def __init__(self, name: str, argv: list[str], root: Path, lockstep: bool):
        self.name = name
        self.out = root / f"{name}.json"
        self.log = root / f"{name}.log"
        self.stdout = root / f"{name}.stdout"
        extra, fds = [], ()
        if lockstep:
            go_r, self.go_w = os.pipe()
            self.ready_r, ready_w = os.pipe()
            extra, fds = ["--turn-fds", f"{go_r},{ready_w}"], (go_r, ready_w)
        self.spawned_at = time.time()
        with open(self.stdout, "w") as out, open(self.log, "w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, __file__, "--child", name, *argv, "--out", str(self.out), *extra],
                cwd=REPO, stdout=out, stderr=err, pass_fds=fds,
            )
        for fd in fds:
            os.close(fd)

    def go(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)
        os.write(self.go_w, b"g")

    def ready(self, timeout: float) -> None:
        """Wait for the end of its step, then stop the whole process (SIGSTOP) until its next
        turn: while the other one steps, nothing of this one runs (its OpenMP threads spin
        for a while after a step, and streaming's threads poll), so neither slows the other."""
        r, _, _ = select.select([self.ready_r], [], [], timeout)
        if not r or os.read(self.ready_r, 1) != b"r":
            self.fail("did not take its turn" if not r else "exited")
        os.kill(self.proc.pid, signal.SIGSTOP)

    def fail(self, why: str) -> None:
        self.proc.kill()
        self.proc.wait()
        sys.exit(f"{self.name} {why} (exit {self.proc.returncode}):\n{self.log.read_text()[-3000:]}")

    def result(self) -> dict:
        if self.proc.wait(timeout=START_TIMEOUT_S):
            self.fail("failed")
        return json.loads(self.out.read_text())

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()


def run_pair(root: Path, cfg: Path, mds: Path, batches: int, *, lead: str, lockstep: bool) -> dict[str, dict]:
    argvs = {
        "trainer": ["--cfg", str(cfg)],
        "plain": ["--mds", str(mds), "--batches", str(batches)],
    }
    order = [lead, "plain" if lead == "trainer" else "trainer"]
    children: dict[str, Child] = {}
    try:
        if lockstep:
            for name in order:
                children[name] = Child(name, argvs[name], root, lockstep=True)
            for c in children.values():
                c.ready(START_TIMEOUT_S)
            for _ in range(batches):
                for name in order:
                    children[name].go()
                    children[name].ready(STEP_TIMEOUT_S)
            for c in children.values():
                c.go()  # past the last step: finish and write the result
        else:
            for name in order:  # one at a time, each alone on the machine
                children[name] = Child(name, argvs[name], root, lockstep=False)
                children[name].result()
        results = {name: {**c.result(), "spawned_at": c.spawned_at} for name, c in children.items()}
    finally:
        for c in children.values():
            c.stop()
    records = _step_records(children["trainer"].stdout)
    if records != batches:
        sys.exit(f"the trainer printed {records} step records, expected {batches}")
    for name, r in results.items():
        if len(r["steps"]) != batches:
            sys.exit(f"{name} timed {len(r['steps'])} steps, expected {batches}")
    return results


def _step_records(stdout: Path) -> int:
    from launcher.metrics.records import parse_record

    steps = set()
    for line in stdout.read_text().splitlines():
        rec = parse_record(line)
        if rec and "loss/train/total" in rec.get("metrics", {}):
            steps.add(rec["step"])
    return len(steps)


def report(runs: list[dict[str, dict]], mode: str, batches: int) -> None:
    print(f"model: MPT d_model=128 n_layers=2 vocab={VOCAB} (~0.46M params), batch {BATCH} x {SEQ} tokens, "
          f"{batches} batches, steady state after {WARMUP}, {len(runs)} runs ({mode})")
    rates = [{name: _rates(r["steps"]) for name, r in run.items()} for run in runs]
    for key, label in (("tokens_per_s", "window"), ("median_tokens_per_s", "median step")):
        t = [r["trainer"][key] for r in rates]
        p = [r["plain"][key] for r in rates]
        pairs = statistics.median(a / b for a, b in zip(t, p))
        print(f"[{label}] trainer tokens/s {statistics.median(t):,.0f} (runs {', '.join(f'{x:,.0f}' for x in t)}); "
              f"plain loop {statistics.median(p):,.0f} (runs {', '.join(f'{x:,.0f}' for x in p)}); "
              f"median of paired ratios {pairs:.3f}, ratio of medians {statistics.median(t) / statistics.median(p):.3f} "
              f"(goal >= 0.95)")
    if mode.startswith("lockstep"):
        per_run = [step_pair_ratio(run) for run in runs]
        print(f"[step pairs] trainer speed / plain loop speed, median over each run's adjacent steps: "
              f"{', '.join(f'{x:.3f}' for x in per_run)}; median of runs {statistics.median(per_run):.3f} (goal >= 0.95)")
    first = statistics.median(
        r["trainer"]["ready_at"] - r["trainer"]["spawned_at"] + r["trainer"]["steps"][0] for r in runs
    )
    print(f"trainer process start -> first step done: {first:.1f}s")


def step_pair_ratio(run: dict[str, dict]) -> float:
    """In lockstep, step k of the trainer and step k of the plain loop ran one right after the
    other (~0.1 s apart): the median of their speed ratios is the least noisy figure."""
    pairs = zip(run["trainer"]["steps"][WARMUP:], run["plain"]["steps"][WARMUP:])
    return statistics.median(plain / ours for ours, plain in pairs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3, help="runs of the pair, alternating which leads (at least 3)")
    ap.add_argument("--sequential", action="store_true", help="one process at a time instead of lockstep")
    for hidden in ("--child", "--cfg", "--mds", "--out", "--turn-fds"):
        ap.add_argument(hidden, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    if args.repeats < 3:
        ap.error("--repeats must be at least 3: the result is a median over alternating runs")
    if args.batches <= WARMUP + 1:
        ap.error(f"--batches must be more than {WARMUP + 1}: the first {WARMUP} are warm-up")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.time()
        mds, tok = prepare(root)
        print(f"data prepared in {time.time() - t0:.1f}s ({_sidecar(str(mds))['samples']} samples of {SEQ} tokens)")
        cfg = root / "bench.yaml"
        cfg.write_text(CONFIG.format(seq=SEQ, vocab=VOCAB, tok=tok, mds=mds, batches=args.batches, batch=BATCH))
        os.environ.pop("LAUNCHER_ARTIFACTS_DIR", None)
        runs = []
        for i in range(args.repeats):
            lead = ("trainer", "plain")[i % 2]
            run = run_pair(root, cfg, mds, args.batches, lead=lead, lockstep=not args.sequential)
            r = {name: _rates(x["steps"]) for name, x in run.items()}
            print(f"  run {i + 1} ({lead} first): trainer {r['trainer']['median_tokens_per_s']:,.0f}, "
                  f"plain loop {r['plain']['median_tokens_per_s']:,.0f} tokens/s (median step)", flush=True)
            runs.append(run)
        report(runs, "sequential, each alone" if args.sequential else "lockstep, a step each in turn", args.batches)


if __name__ == "__main__":
    main()
