"""The built-in trainer's speed against a plain PyTorch loop, an MPT on CPU, at two sizes.

    .venv/bin/python bench/bench_trainer.py [--size tiny|realistic|both] [--batches N] [--repeats 3]
                                            [--sequential] [--no-split] [--quick] [--rows FILE]

Sizes (--size, default both):
- tiny: d_model 128, 2 layers, batch 16 x 64 tokens (~30 ms a step here). The trainer's
  per-step Python (Composer's loop, events, our callbacks) is a large part of such a step: a
  floor, goal >= 0.92x.
- realistic: d_model 512, 8 layers, 8 heads, batch 2 x 512 tokens, vocab 4096 (27M
  parameters, ~1 s a step on this 2-core CPU), where the per-step overhead is as small
  beside compute as it is on a GPU: goal >= 0.97x.

Prepares number-say MDS data (synthetic text, a 512-token BPE, samples of each size's
sequence length) in a temporary directory, then compares
- the trainer: launcher.train.main.train(cfg.yaml), what `python -m launcher.train cfg.yaml`
  runs (Composer, our metrics logger, SpeedMonitor, LR monitor, scheduled GC; no eval, no
  checkpoints);
- a plain loop: the same MptForCausalLM, the same StreamingDataset and collate,
  the same optimizer (DecoupledAdamW, a torch.optim.Optimizer), forward/backward/step,
  with the trainer's torch.set_num_threads.

By default both run at once, each in a process of its own, in lockstep: one step of one,
then one step of the other, handed over through pipes, and the process whose turn it is not
is stopped (SIGSTOP), so each step has the machine to itself and a neighbour's burst on this
shared machine falls on both alike. (This machine's speed drifts by up to 20 % between runs
a minute apart, which sequential runs cannot tell from the trainer's cost: their paired
ratios spread 0.84-1.10. Without the stop, the idle process's spinning OpenMP threads and
polling streaming threads slowed the running one, both alike, which pulled the ratio toward
1: 0.94-0.97 where it is 0.93 with the stop.) Each process times its steps from the moment
it gets its turn to the end of the step (the trainer: batch end to batch end, so every
per-step event, the dataloader and the metric record are inside). Which one goes first
alternates from step to step, and which one leads alternates between runs. With
--sequential, each runs alone in a fresh process instead, one after the other.

Throughput is tokens/s over the steady-state steps (after a warm-up), from the whole window
and from the median step. Prints both loops' tokens/s per run, the median of the paired
ratios (each run's trainer over its own plain loop) and the ratio of medians, the median
of each run's adjacent step pairs (in lockstep the headline and the row's ratio: the least
noisy figure; the row's tokens/s are the median steps'), and the trainer's time from process start to
the end of its first step.

The step split (unless --no-split): where the trainer's steady-state step goes, each part's
median over the steps: data loading, forward, loss, backward, the optimizer's update,
Composer's engine running events, each callback and logger (ours flagged: goal < 1 % of a
realistic step each), and Composer's loop between them; the plain loop's data / forward /
backward / optimizer beside it. It is measured in extra steps of each run, after the ratio's
(the timers go in only then, so they are not in the ratios): Engine.run_event, each
callback's run_event, each logger's log_metrics and the optimizer's step are wrapped in
time.perf_counter timers in the benchmark's trainer process (nothing that is trained
changes; under 1 us for each of the ~130 timed calls a step, estimated and printed); the time
a process waits for its turn is taken out of every timer.

--quick (for bench/all.py): one run per size, fewer batches: under a minute on a quiet
machine. --rows FILE writes bench/rows.py rows: each size's ratio, and the largest share of
a realistic step that one of our callbacks takes.
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
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TOKENIZER_VOCAB = 512
START_TIMEOUT_S = 300  # a process's imports and set-up, to its first step
STEP_TIMEOUT_S = 120


@dataclass(frozen=True)
class Size:
    name: str
    d_model: int
    n_heads: int
    n_layers: int
    seq: int
    batch: int
    vocab: int
    warmup: int  # steps left out at the start (allocations, first-touch of the data)
    batches: int  # steps of a ratio run, the warm-up included
    quick_batches: int
    split_batches: int  # steps timed part by part, after the ratio's steps
    quick_split_batches: int
    goal: float

    @property
    def tokens(self) -> int:
        return self.batch * self.seq

    def describe(self) -> str:
        return (f"MPT d_model={self.d_model} n_layers={self.n_layers} n_heads={self.n_heads} vocab={self.vocab}, "
                f"batch {self.batch} x {self.seq} tokens")


SIZES = {
    "tiny": Size("tiny", d_model=128, n_heads=4, n_layers=2, seq=64, batch=16, vocab=512, warmup=10,
                 batches=60, quick_batches=30, split_batches=20, quick_split_batches=10, goal=0.92),
    "realistic": Size("realistic", d_model=512, n_heads=8, n_layers=8, seq=512, batch=2, vocab=4096, warmup=2,
                      batches=14, quick_batches=8, split_batches=4, quick_split_batches=3, goal=0.97),
}

CONFIG = """\
seed: 17
model: {{d_model: {s.d_model}, n_heads: {s.n_heads}, n_layers: {s.n_layers}, max_seq_len: {s.seq}, vocab_size: {s.vocab}}}
tokenizer: {tok}
train_loader:
  dataset: {{remote: {mds}, split: train, shuffle: true}}
optimizer: {{name: decoupled_adamw, lr: 3.0e-3, weight_decay: 0.0}}
scheduler: {{name: constant_with_warmup, t_warmup: 0ba}}
max_duration: {batches}ba
global_train_batch_size: {s.batch}
precision: fp32
log_to_console: false
"""


def prepare_tokenizer(root: Path) -> tuple[Path, Path]:
    from launcher.data.synthetic import write_number_say
    from launcher.data.tokenizer import train_tokenizer

    raw = root / "raw.jsonl"
    write_number_say(raw, 20000, seed=0)
    return raw, train_tokenizer([str(raw)], TOKENIZER_VOCAB, root / "tokenizer")


def prepare_data(root: Path, raw: Path, tok: Path, seq: int) -> Path:
    from launcher.data.convert import convert

    mds = root / f"mds-{seq}"
    convert([str(raw)], str(mds), str(tok), seq, split="train")
    return mds


def _sidecar(mds: str) -> dict:
    return json.loads((Path(mds) / "train" / "launcher_dataset.json").read_text())


def _rates(steps: list[float], size: Size) -> dict[str, float]:
    """Steady-state tokens/s from step durations (seconds): over the whole window after the
    warm-up, and from the median step (robust to other processes' bursts on a shared box)."""
    steady = steps[size.warmup:]
    return {
        "tokens_per_s": size.tokens * len(steady) / sum(steady),
        "median_tokens_per_s": size.tokens / statistics.median(steady),
    }


# ------------------------------------------------------------------ the two loops (child side)


class Turns:
    """A child's side of the lockstep: say "ready", wait for "go", time the step until the next
    "ready". Without pipes (--sequential) a step is simply the time between two step ends.
    `clock()` is perf_counter less the time spent waiting for a turn (for the step split)."""

    def __init__(self, fds: str | None):
        self.read_fd, self.write_fd = (int(x) for x in fds.split(",")) if fds else (None, None)
        self.steps: list[float] = []
        self.started: float | None = None
        self.ready_at: float | None = None  # wall clock of the first "ready" (set-up done)
        self.waited = 0.0

    def clock(self) -> float:
        return time.perf_counter() - self.waited

    def wait(self) -> None:
        if self.ready_at is None:
            self.ready_at = time.time()
        began = time.perf_counter()
        if self.write_fd is not None:
            os.write(self.write_fd, b"r")
            if os.read(self.read_fd, 1) != b"g":
                sys.exit("bench: the lockstep pipe closed")
        self.started = time.perf_counter()
        self.waited += self.started - began

    def step_done(self, then=None) -> None:
        """The step ends; `then()` runs before the wait, outside any step's time."""
        now = time.perf_counter()
        self.steps.append(now - self.started)
        if then is not None:
            then()
        self.wait()


def plain_loop(mds: str, size: Size, batches: int, split_from: int, turns: Turns) -> list[dict[str, float]]:
    """Trains `batches` steps; returns the seconds each part took in each step from
    `split_from` on (five perf_counter calls a step, always on)."""
    import torch
    from composer.optim import DecoupledAdamW
    from torch.utils.data import DataLoader
    from transformers import MptForCausalLM

    from launcher.train.config import ModelConfig
    from launcher.train.data import TokenDataset, collate
    from launcher.train.model import mpt_config

    torch.set_num_threads(max(1, os.cpu_count() or 1))  # as build_trainer does for one process
    torch.manual_seed(17)
    m = ModelConfig(d_model=size.d_model, n_heads=size.n_heads, n_layers=size.n_layers, max_seq_len=size.seq,
                    vocab_size=size.vocab)
    model = MptForCausalLM(mpt_config(m))
    model.train()
    # The optimizer the trainer's config names (decoupled_adamw), so that the comparison measures
    # the trainer's own cost, not a different optimizer's.
    opt = DecoupledAdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.0)
    ds = TokenDataset(dtype=_sidecar(mds)["dtype"], seq_len=size.seq, local=mds, split="train", shuffle=True,
                      batch_size=size.batch)
    loader = DataLoader(ds, batch_size=size.batch, collate_fn=collate, drop_last=True)
    split: list[dict[str, float]] = []
    clock = time.perf_counter
    turns.wait()
    step = 0
    while step < batches:
        batches_of_epoch = iter(loader)
        while step < batches:
            t0 = clock()
            batch = next(batches_of_epoch, None)
            if batch is None:
                break
            t1 = clock()
            out = model(input_ids=batch["input_ids"], labels=batch["labels"])
            t2 = clock()
            out.loss.backward()
            t3 = clock()
            opt.step()
            t4 = clock()
            opt.zero_grad(set_to_none=True)
            out.loss.item()
            t5 = clock()
            if step >= split_from:
                split.append({"data loading": t1 - t0, "forward (with the loss)": t2 - t1, "backward": t3 - t2,
                              "optimizer step": t4 - t3, "zero_grad, loss.item()": t5 - t4})
            step += 1
            turns.step_done()
    return split


ENGINE = "Composer's engine running events (callbacks not included)"
CLOSURE = "Composer's step closure, less forward/loss/backward (zero_grad, batch to device, loss bookkeeping)"
BENCH_HOOK = "bench: the lockstep turn (not in a user's run)"
TIMERS = "bench: the split's own timers (estimated; in the parts above, mostly the engine's)"


class StepSplit:
    """Exclusive time per part of the trainer's step, from timers wrapped around Composer's
    Engine.run_event, each callback's run_event, each logger's log_metrics and the optimizer's
    step (its closure, which runs the microbatches, is taken out of it). The stretches between
    an event pair (BEFORE_DATALOADER..AFTER_DATALOADER: data loading; the forward, the loss, the
    backward) are measured from the end of one event to the start of the other. The timers
    go in by `install`, from the step where the split begins: before that nothing is wrapped."""

    SPANS = {
        "after_dataloader": ("before_dataloader", "data loading"),
        "after_forward": ("before_forward", "forward (with the loss)"),
        "after_loss": ("before_loss", "loss (reads the forward's)"),
        "after_backward": ("before_backward", "backward"),
    }

    def __init__(self, clock):
        self.clock = clock
        self.parts: dict[str, float] = defaultdict(float)
        self.stack: list[list] = []  # [part, started, time of timed calls inside]
        self.event_ended: dict[str, float] = {}
        self.calls = 0
        self.steps: list[dict[str, float]] = []  # each step's parts
        self._so_far: dict[str, float] = {}

    def timed(self, part: str, fn):
        def timed_call(*args, **kwargs):
            self.calls += 1
            self.stack.append([part, self.clock(), 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                name, started, inner = self.stack.pop()
                took = self.clock() - started
                self.parts[name] += took - inner
                if self.stack:
                    self.stack[-1][2] += took

        return timed_call

    def install(self, state, bench_callbacks: tuple) -> None:
        from composer.core.engine import Engine
        from composer.loggers import LoggerDestination

        split = self
        run_event = Engine.run_event
        timed_run_event = self.timed(ENGINE, run_event)

        def run_event_timed(engine, event, *args, **kwargs):
            name = getattr(event, "value", event)
            span = split.SPANS.get(name)
            if span and span[0] in split.event_ended:
                split.parts[span[1]] += split.clock() - split.event_ended.pop(span[0])
            try:
                return timed_run_event(engine, event, *args, **kwargs)
            finally:
                split.event_ended[name] = split.clock()

        Engine.run_event = run_event_timed
        for cb in state.callbacks:
            ours = type(cb).__module__.startswith("launcher.")
            kind = "logger" if isinstance(cb, LoggerDestination) else "callback"
            label = BENCH_HOOK if cb in bench_callbacks else f"{kind} {type(cb).__name__}{' (ours)' if ours else ''}"
            cb.run_event = self.timed(label, cb.run_event)
            if isinstance(cb, LoggerDestination):
                cb.log_metrics = self.timed(f"{label}: log_metrics", cb.log_metrics)
        for opt in state.optimizers:
            step = opt.step

            def step_timed(closure=None, _step=step, **kwargs):
                if closure is not None:
                    closure = self.timed(CLOSURE, closure)
                return _step(closure=closure, **kwargs)

            opt.step = self.timed("optimizer step (its update)", step_timed)

    def result(self) -> dict[str, float]:
        """The parts; the closure's own time less the stretches measured inside it."""
        parts = dict(self.parts)
        if CLOSURE in parts:
            parts[CLOSURE] -= sum(parts.get(p, 0.0) for _, p in list(self.SPANS.values())[1:])
        return parts

    def step_done(self) -> None:
        """A step of the split ended: its parts are the totals' growth since the last one."""
        now = self.result()
        self.steps.append({p: v - self._so_far.get(p, 0.0) for p, v in now.items()})
        self._so_far = now

    def timer_cost(self) -> float:
        """Seconds the timers themselves took in all: their calls times the cost of one, timed
        here around nested no-op calls (the timers are in the parts that call timed calls,
        mostly the engine's)."""
        calls, n = self.calls, 20000
        probe = StepSplit(time.perf_counter)
        inner = probe.timed("inner", lambda: None)
        outer = probe.timed("outer", inner)
        began = time.perf_counter()
        for _ in range(n // 2):
            outer()
        return calls * (time.perf_counter() - began) / n


def trainer_loop(cfg: str, split_from: int | None, turns: Turns) -> list[dict[str, float]]:
    from composer.core import Callback

    from launcher.train.main import train

    split = StepSplit(turns.clock)

    class TurnEachBatch(Callback):
        def fit_start(self, state, logger) -> None:
            turns.wait()

        def batch_end(self, state, logger) -> None:
            if split_from is None or len(turns.steps) + 1 < split_from:
                turns.step_done()
            elif len(turns.steps) + 1 == split_from:
                turns.step_done(then=lambda: split.install(state, (self,)))
            else:
                turns.step_done(then=split.step_done)

    train(cfg, extra_callbacks=[TurnEachBatch()])
    if not split.steps:
        return []
    per_step = split.timer_cost() / len(split.steps)
    return [{**parts, TIMERS: per_step} for parts in split.steps]


def child(args: argparse.Namespace) -> None:
    turns = Turns(args.turn_fds)
    size = SIZES[args.size]
    split_from = args.split_from if args.split_from >= 0 else None
    if args.child == "trainer":
        split = trainer_loop(args.cfg, split_from, turns)
    else:
        split = plain_loop(args.mds, size, args.batches, args.batches if split_from is None else split_from, turns)
    Path(args.out).write_text(json.dumps({"steps": turns.steps, "ready_at": turns.ready_at, "split": split}))


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


def run_pair(root: Path, size: Size, cfg: Path, mds: Path, batches: int, split_batches: int, *, lead: str,
             lockstep: bool) -> dict[str, dict]:
    """One run of the pair: `batches` steps for the ratio, then `split_batches` more timed part
    by part. Each result's "steps" holds only the ratio's steps; "split_steps" the others."""
    total = batches + split_batches
    split_from = str(batches if split_batches else -1)
    argvs = {
        "trainer": ["--size", size.name, "--cfg", str(cfg), "--split-from", split_from],
        "plain": ["--size", size.name, "--mds", str(mds), "--batches", str(total), "--split-from", split_from],
    }
    order = [lead, "plain" if lead == "trainer" else "trainer"]
    children: dict[str, Child] = {}
    try:
        if lockstep:
            for name in order:
                children[name] = Child(name, argvs[name], root, lockstep=True)
            for c in children.values():
                c.ready(START_TIMEOUT_S)
            for k in range(total):
                for name in order if k % 2 == 0 else order[::-1]:  # who goes first alternates, too
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
    if records != total:
        sys.exit(f"the trainer printed {records} step records, expected {total}")
    for name, r in results.items():
        if len(r["steps"]) != total:
            sys.exit(f"{name} timed {len(r['steps'])} steps, expected {total}")
        r["steps"], r["split_steps"] = r["steps"][:batches], r["steps"][batches:]
    return results


def _step_records(stdout: Path) -> int:
    from launcher.metrics.records import parse_record

    steps = set()
    for line in stdout.read_text().splitlines():
        rec = parse_record(line)
        if rec and "loss/train/total" in rec.get("metrics", {}):
            steps.add(rec["step"])
    return len(steps)


@dataclass
class Outcome:
    ratio: float  # median over runs of the trainer's tokens/s over its own run's plain loop's (window)
    trainer_tokens_per_s: float
    plain_tokens_per_s: float
    callback_share: float | None  # the largest part of ours (callbacks, loggers) in a step, a fraction


def report(runs: list[dict[str, dict]], size: Size, mode: str, batches: int, goal: float) -> Outcome:
    load = os.getloadavg()[1]
    print(f"[{size.name}] {size.describe()}, {batches} batches, steady state after {size.warmup}, "
          f"{len(runs)} run(s) ({mode}); load average {load:.1f} over the last 5 minutes on {os.cpu_count()} cores"
          + (": the machine is busy, the figures are noise" if load > 1.5 * (os.cpu_count() or 1) else ""))
    rates = [{name: _rates(r["steps"], size) for name, r in run.items()} for run in runs]
    outcome = {}
    for key, label in (("tokens_per_s", "window"), ("median_tokens_per_s", "median step")):
        t = [r["trainer"][key] for r in rates]
        p = [r["plain"][key] for r in rates]
        pairs = statistics.median(a / b for a, b in zip(t, p))
        outcome[label] = Outcome(pairs, statistics.median(t), statistics.median(p), None)
        print(f"  [{label}] trainer tokens/s {statistics.median(t):,.0f} (runs {', '.join(f'{x:,.0f}' for x in t)}); "
              f"plain loop {statistics.median(p):,.0f} (runs {', '.join(f'{x:,.0f}' for x in p)}); "
              f"median of paired ratios {pairs:.3f}, ratio of medians {statistics.median(t) / statistics.median(p):.3f}")
    headline = outcome["window"]
    if mode.startswith("lockstep"):
        # The headline: a burst of other work on this shared machine falls on a few steps, which
        # the window's sums take in whole (one run of the quick mode read 2.6x); a median of
        # adjacent step pairs does not.
        per_run = [step_pair_ratio(run, size) for run in runs]
        headline = outcome["median step"]
        headline.ratio = statistics.median(per_run)
        print(f"  [step pairs] trainer speed / plain loop speed, median over each run's adjacent steps: "
              f"{', '.join(f'{x:.3f}' for x in per_run)}; median of runs {headline.ratio:.3f} (goal >= {goal})")
    first = statistics.median(
        r["trainer"]["ready_at"] - r["trainer"]["spawned_at"] + r["trainer"]["steps"][0] for r in runs
    )
    print(f"  trainer process start -> first step done: {first:.1f}s")
    if runs[0]["trainer"]["split_steps"]:
        headline.callback_share = print_split(runs, size)
    return headline


def print_split(runs: list[dict[str, dict]], size: Size) -> float:
    """Each part's median over a run's split steps (robust to a burst of other work on one
    step; so the parts need not add up to the median step), the median over runs; returns the
    largest share of a step that one of our callbacks or loggers takes."""
    share_of_ours = 0.0
    for name in ("trainer", "plain"):
        rest = "the rest: Composer's loop between events" if name == "trainer" else "the rest"
        per_run = []
        for run in runs:
            r = run[name]
            steps = [{**parts, rest: took - sum(v for p, v in parts.items() if p != TIMERS)}
                     for took, parts in zip(r["split_steps"], r["split"])]
            names = dict.fromkeys(p for parts in steps for p in parts)
            per_run.append((statistics.median(r["split_steps"]),
                            {p: statistics.median(parts.get(p, 0.0) for parts in steps) for p in names}))
        step_ms = statistics.median(s for s, _ in per_run) * 1e3
        n = len(runs[0][name]["split_steps"])
        print(f"  {name} step split: medians over {n} steps after the ratio's, median of {len(runs)} run(s); "
              f"median step {step_ms:.2f} ms")
        names = sorted(dict.fromkeys(p for _, parts in per_run for p in parts), key=_split_order)
        for part in names:
            ms = statistics.median(parts.get(part, 0.0) for _, parts in per_run) * 1e3
            share = statistics.median(parts.get(part, 0.0) / s for s, parts in per_run)
            if "(ours)" in part:
                share_of_ours = max(share_of_ours, share)
            print(f"    {part:<100} {ms:9.3f} ms {share * 100:6.2f} %")
    print(f"  largest part of ours: {share_of_ours * 100:.2f} % of a step" +
          (" (goal < 1 % at the realistic size)" if size.name == "realistic" else ""))
    return share_of_ours


def _split_order(part: str) -> tuple[int, str]:
    """Training's own parts first, then Composer's, the callbacks and loggers, the bench's."""
    first = ["data loading", "forward (with the loss)", "loss (reads the forward's)", "backward", "optimizer step",
             "optimizer step (its update)", "zero_grad, loss.item()", CLOSURE, ENGINE]
    if part in first:
        return first.index(part), ""
    if part.startswith(("callback ", "logger ")):
        return len(first), part
    return len(first) + 1 + [part.startswith("the rest"), part == BENCH_HOOK, part == TIMERS].index(True), part


def step_pair_ratio(run: dict[str, dict], size: Size) -> float:
    """In lockstep, step k of the trainer and step k of the plain loop ran one right after the
    other: the median of their speed ratios is the least noisy figure."""
    pairs = zip(run["trainer"]["steps"][size.warmup:], run["plain"]["steps"][size.warmup:])
    return statistics.median(plain / ours for ours, plain in pairs)


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from rows import Row, add_row_args, write_rows

    ap = argparse.ArgumentParser()
    ap.add_argument("--size", choices=[*SIZES, "both"], default="both")
    ap.add_argument("--batches", type=int, help="steps of a ratio run, the warm-up included (default: the size's)")
    ap.add_argument("--repeats", type=int, default=3, help="runs of the pair, alternating which leads (at least 3)")
    ap.add_argument("--sequential", action="store_true", help="one process at a time instead of lockstep")
    ap.add_argument("--no-split", action="store_true", help="no step split (no extra steps timed part by part)")
    add_row_args(ap)
    for hidden in ("--child", "--cfg", "--mds", "--out", "--turn-fds"):
        ap.add_argument(hidden, help=argparse.SUPPRESS)
    ap.add_argument("--split-from", type=int, default=-1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    sizes = list(SIZES.values()) if args.size == "both" else [SIZES[args.size]]
    if args.quick:
        args.repeats = 1  # each run pairs every step (and alternates who goes first): one run per size
    elif args.repeats < 3:
        ap.error("--repeats must be at least 3: the result is a median over alternating runs")
    for size in sizes:
        if args.batches is not None and args.batches <= size.warmup + 1:
            ap.error(f"--batches must be more than {size.warmup + 1} for {size.name}: the first {size.warmup} "
                     f"are warm-up")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ.pop("LAUNCHER_ARTIFACTS_DIR", None)
        t0 = time.time()
        raw, tok = prepare_tokenizer(root)
        for size in sizes:
            mds = prepare_data(root, raw, tok, size.seq)
            print(f"{size.name}: data prepared in {time.time() - t0:.1f}s "
                  f"({_sidecar(str(mds))['samples']} samples of {size.seq} tokens)", flush=True)
            batches = args.batches or (size.quick_batches if args.quick else size.batches)
            split_batches = 0 if args.no_split else (size.quick_split_batches if args.quick else size.split_batches)
            cfg = root / f"bench-{size.name}.yaml"
            cfg.write_text(CONFIG.format(s=size, tok=tok, mds=mds, batches=batches + split_batches))
            runs = []
            for i in range(args.repeats):
                lead = ("trainer", "plain")[i % 2]
                run = run_pair(root, size, cfg, mds, batches, split_batches, lead=lead, lockstep=not args.sequential)
                r = {name: _rates(x["steps"], size) for name, x in run.items()}
                print(f"  run {i + 1} ({lead} first): trainer {r['trainer']['median_tokens_per_s']:,.0f}, "
                      f"plain loop {r['plain']['median_tokens_per_s']:,.0f} tokens/s (median step)", flush=True)
                runs.append(run)
            mode = "sequential, each alone" if args.sequential else "lockstep, a step each in turn"
            out = report(runs, size, mode, batches, size.goal)
            rows.append(Row(f"trainer vs a plain PyTorch loop, {size.name} MPT on CPU ({size.describe()}), "
                            f"{'lockstep' if not args.sequential else 'sequential'}",
                            f"plain loop {out.plain_tokens_per_s:,.0f} tokens/s", f"{out.trainer_tokens_per_s:,.0f} tokens/s",
                            round(out.ratio, 3), f">= {size.goal}x", out.ratio >= size.goal))
            if size.name == "realistic" and out.callback_share is not None:
                rows.append(Row("the trainer's largest callback of ours, share of a realistic step", "",
                                f"{out.callback_share * 100:.2f} %", None, "< 1 %", out.callback_share < 0.01))
            t0 = time.time()
    write_rows(args, rows)


if __name__ == "__main__":
    main()
