"""Both built-in trainers on one GPU, for a fixed number of steps: tokens/s, samples/s and
MFU against the GPU's peak dense bf16 throughput.

    .venv/bin/python bench/bench_gpu.py [--which gate,mpt,hf] [--steps 60] [--warmup 10] [--peak-tflops N] [--quick] [--rows FILE]

- mpt: MPT-125M (d_model 768, 12 layers, 12 heads, vocab 50368), seq 2048, amp_bf16, FSDP
  off, through `python -m launcher.train` on synthetic MDS token data (random ids, made
  here: nothing is downloaded). llm-foundry publishes 44.8 % MFU for MPT-125M on an
  A100-80GB with its own MPT and fused attention; HF's MptForCausalLM computes attention
  by hand, so expect less.
- hf: the fine-tuning recipe (`python -m launcher.train.hf`), a BERT-base-sized classifier
  built from a config, seq 512, bf16, on a synthetic tokenized dataset.
- gate: the health gate before the command (launcher.entrypoint.preflight, resilience.preflight)
  as a one-node run's rank meets it: nvidia-smi, DCGM's short diagnostic where dcgmi is, a
  matmul and a device-memory check on each GPU, the gloo and NCCL all-reduces; under 30 s.
Throughput is taken from the trainers' own metric records after `--warmup` steps; MFU uses
6 x parameters x tokens plus the attention term (12 x layers x d_model x seq per token).
Without a GPU it says so and exits 2 (with --rows, after writing a row that says so).
--quick runs 30 steps, the throughput after 10.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
from rows import Row, add_row_args, write_rows  # noqa: E402

# Peak dense bf16 tensor throughput, TFLOP/s, by a substring of torch.cuda.get_device_name().
PEAK_BF16_TFLOPS = {
    "H200": 989.0,
    "H100": 989.0,
    "A100": 312.0,
    "L40S": 362.0,
    "A10G": 125.0,
    "L4": 121.0,
    "A10": 125.0,
}
MPT = {"d_model": 768, "n_heads": 12, "n_layers": 12, "max_seq_len": 2048, "vocab_size": 50368}
HF_SEQ = 512
BERT_BASE = {
    "model_type": "bert",
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "max_position_embeddings": HF_SEQ,
}


class NoGpu(Exception):
    pass


def gpu() -> tuple[str, float | None]:
    try:
        import torch
    except ImportError:
        raise NoGpu("bench_gpu.py needs the train extra: pip install -e '.[train]'") from None
    if not torch.cuda.is_available():
        raise NoGpu("no CUDA GPU here: bench_gpu.py measures GPU throughput; run it on a GPU machine")
    name = torch.cuda.get_device_name(0)
    peak = next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)
    return name, peak


def _tokenizer(root: Path) -> Path:
    from launcher.data.synthetic import write_number_say
    from launcher.data.tokenizer import train_tokenizer

    write_number_say(root / "tok.jsonl", 2000, seed=0)
    return train_tokenizer([str(root / "tok.jsonl")], 512, root / "tokenizer")


def mpt_data(root: Path, samples: int) -> Path:
    """Random-id samples of seq 2048 in our MDS format (launcher.data.format), with the sidecar."""
    import numpy as np
    from streaming import MDSWriter

    from launcher.data.format import MDS_COLUMNS, SIDECAR_NAME, TOKENS_COLUMN, make_sidecar

    out = root / "mds" / "train"
    rng = np.random.default_rng(0)
    with MDSWriter(out=str(out), columns=MDS_COLUMNS, compression=None) as w:
        for _ in range(samples):
            w.write({TOKENS_COLUMN: rng.integers(0, 512, MPT["max_seq_len"], dtype=np.uint16).tobytes()})
    sidecar = make_sidecar(
        dtype="uint16",
        seq_len=MPT["max_seq_len"],
        vocab_size=512,
        tokenizer="synthetic",
        samples=samples,
        tokens=samples * MPT["max_seq_len"],
        documents=samples,
        eos_text="",
        bos_text="",
        input_tokens=samples * MPT["max_seq_len"],
        dropped_tokens=0,
        text_bytes=0,
        workers=1,
        engine="local",
    )
    (out / SIDECAR_NAME).write_text(json.dumps(sidecar))
    return root / "mds"


def records_of(stdout: str) -> list[dict]:
    from launcher.metrics.records import parse_record

    return [r for r in map(parse_record, stdout.splitlines()) if r]


def run(cmd: list[str], env: dict[str, str]) -> list[dict]:
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    if proc.returncode:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return records_of(proc.stdout)


def step_rate(recs: list[dict], warmup: int) -> float:
    """Steps per second over the steps after the warm-up, from the records' time stamps."""
    stamps = {r["step"]: r["time"] for r in recs if "metrics" in r and "loss/train/total" in r["metrics"]}
    steps = sorted(stamps)
    after = [s for s in steps if s >= warmup]
    if len(after) < 2:
        sys.exit(f"too few steps after the warm-up ({len(after)}); raise --steps")
    return (after[-1] - after[0]) / (stamps[after[-1]] - stamps[after[0]])


def report(name: str, tokens_s: float, samples_s: float, flops_per_token: float, peak: float | None) -> Row:
    mfu = f"{100 * tokens_s * flops_per_token / (peak * 1e12):.1f} %" if peak else "n/a (pass --peak-tflops)"
    print(f"[{name}] tokens/s {tokens_s:,.0f}  samples/s {samples_s:,.2f}  MFU {mfu}")
    return Row(
        f"GPU: {name}",
        f"peak bf16 {peak:g} TFLOP/s" if peak else "peak unknown",
        f"{tokens_s:,.0f} tokens/s, MFU {mfu}",
        None,
        "recorded (issue 25)",
        None,
    )


def bench_mpt(root: Path, steps: int, warmup: int, batch: int, peak: float | None) -> Row:
    tok = _tokenizer(root)
    mds = mpt_data(root, batch * (steps + 2))
    cfg = root / "mpt.yaml"
    cfg.write_text(
        json.dumps(
            {
                "seed": 17,
                "model": MPT,
                "tokenizer": str(tok),
                "train_loader": {"dataset": {"remote": str(mds), "split": "train"}, "num_workers": 2},
                "optimizer": {"name": "decoupled_adamw", "lr": 6e-4, "betas": [0.9, 0.95], "weight_decay": 0.0},
                "max_duration": f"{steps}ba",
                "global_train_batch_size": batch,
                "device_train_microbatch_size": batch,
                "precision": "amp_bf16",
                "log_to_console": False,
            }
        )
    )
    recs = run([sys.executable, "-m", "launcher.train", str(cfg)], dict(os.environ))
    rate = step_rate(recs, warmup)
    d, n_layers, seq, vocab = MPT["d_model"], MPT["n_layers"], MPT["max_seq_len"], MPT["vocab_size"]
    params = 12 * n_layers * d * d + vocab * d  # blocks (attn 4d^2 + mlp 8d^2) + tied embedding
    flops_per_token = 6 * params + 12 * n_layers * d * seq
    return report(f"MPT-125M seq {seq} bf16 batch {batch}", rate * batch * seq, rate * batch, flops_per_token, peak)


def bench_hf(root: Path, steps: int, warmup: int, batch: int, peak: float | None) -> Row:
    import datasets
    import numpy as np

    tok = _tokenizer(root)
    rng = np.random.default_rng(0)
    n = batch * (steps + 2)

    def split(rows: int) -> datasets.Dataset:
        return datasets.Dataset.from_dict(
            {
                "input_ids": rng.integers(5, 512, (rows, HF_SEQ)).tolist(),
                "attention_mask": np.ones((rows, HF_SEQ), dtype=np.int64).tolist(),
                "labels": rng.integers(0, 2, rows).tolist(),
            }
        )

    datasets.DatasetDict({"train": split(n), "test": split(batch)}).save_to_disk(str(root / "hf"))
    cfg = root / "hf.yaml"
    cfg.write_text(
        json.dumps(
            {
                "model": {"config": BERT_BASE, "num_labels": 2},
                "tokenizer": str(tok),
                "data": {"path": str(root / "hf"), "max_length": HF_SEQ},
                "output_dir": str(root / "hf-out"),
                "training": {
                    "max_steps": steps,
                    "per_device_train_batch_size": batch,
                    "logging_steps": 1,
                    "eval_strategy": "no",
                    "save_strategy": "no",
                    "load_best_model_at_end": False,
                    "precision": "bf16",
                },
                "autoresume": False,
            }
        )
    )
    recs = run([sys.executable, "-m", "launcher.train.hf", str(cfg)], dict(os.environ))
    rate = step_rate(recs, warmup)
    d, layers = BERT_BASE["hidden_size"], BERT_BASE["num_hidden_layers"]
    params = 12 * layers * d * d + 512 * d
    return report(
        f"HF recipe BERT-base seq {HF_SEQ} bf16 batch {batch}",
        rate * batch * HF_SEQ,
        rate * batch,
        6 * params + 12 * layers * d * HF_SEQ,
        peak,
    )


def bench_gate(root: Path, steps: int, warmup: int, batch: int, peak: float | None) -> Row:
    """The health gate (resilience.preflight) as one rank of a one-node run meets it on this
    machine: nvidia-smi, `dcgmi diag -r 1` where dcgmi is, a matmul and a memory check on
    every GPU, then the gloo and the NCCL all-reduce (a world of one); its log shows each."""
    import socket
    import time

    from launcher.entrypoint.preflight import gate
    from launcher.pod import contract

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "NODE_RANK": "0", contract.NODES: "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    began = time.monotonic()
    failed = gate(env, str(root))
    spent = time.monotonic() - began
    verdict = "passed" if failed is None else f"failed: {failed[1]}"
    print(f"[health gate] {verdict} in {spent:.1f} s")
    return Row(
        "GPU: the health gate on one node (devices, matmul, memory, gloo + NCCL all-reduce)",
        "",
        f"{spent:.1f} s, {verdict}",
        None,
        "< 30 s (issue 38)",
        spent < 30 and failed is None,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--which", default="gate,mpt,hf", help="comma-separated: gate (the health gate), mpt, hf")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--mpt-batch", type=int, default=16)
    ap.add_argument("--hf-batch", type=int, default=32)
    ap.add_argument("--peak-tflops", type=float, help="the GPU's peak dense bf16 TFLOP/s, when not in the table")
    add_row_args(ap)
    args = ap.parse_args()
    if args.quick:
        args.steps, args.warmup = 30, 10
    try:
        name, peak = gpu()
    except NoGpu as e:
        print(f"✗ {e}", file=sys.stderr)
        write_rows(
            args,
            [
                Row(
                    "GPU: MPT-125M and the HF recipe, tokens/s and MFU",
                    "",
                    f"not run: {e}",
                    None,
                    "recorded where a GPU is lent",
                    None,
                )
            ],
        )
        sys.exit(2)
    peak = args.peak_tflops or peak
    print(f"GPU: {name}; peak bf16 {peak or '?'} TFLOP/s; {args.steps} steps, throughput after {args.warmup}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for which in args.which.split(","):
            rows.append(
                {"gate": bench_gate, "mpt": bench_mpt, "hf": bench_hf}[which.strip()](
                    Path(tmp) / which,
                    args.steps,
                    args.warmup,
                    args.mpt_batch if which.strip() == "mpt" else args.hf_batch,
                    peak,
                )
            )
    write_rows(args, rows)


if __name__ == "__main__":
    main()
