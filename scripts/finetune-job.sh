#!/usr/bin/env bash
# The fine-tuning job, from a fresh clone: install, make a synthetic sentiment dataset with
# string labels, train a WordPiece tokenizer on it, prepare a tokenized Hugging Face dataset,
# fine-tune a tiny BERT-style classifier on the local backend with 2 processes, and show
# its eval metrics. Safe to run again (it reuses .venv and the data).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/launcher ] || ! .venv/bin/python -c "import transformers, datasets, accelerate" 2>/dev/null; then
    python3 -m venv .venv
    .venv/bin/pip install -q -e '.[train]'
fi
export PATH="$PWD/.venv/bin:$PATH"

data=out/sentiment
if [ ! -f "$data/prepared/dataset_dict.json" ]; then
    echo "== preparing data in $data: synthetic reviews, a WordPiece tokenizer, a tokenized dataset"
    launcher data synthetic --kind sentiment --samples 2000 --seed 0 --out "$data/reviews.jsonl"
    launcher data tokenizer train "$data/reviews.jsonl" --kind wordpiece --vocab-size 200 --out "$data/tokenizer"
    launcher data prepare "$data/reviews.jsonl" --tokenizer "$data/tokenizer" --out "$data/prepared" \
        --label-column label --test-size 0.2 --max-length 32 --overwrite
fi

echo "== fine-tuning on the local backend (2 processes)"
launcher run -f runspecs/hf-finetune-local.yaml --follow

echo "== eval metrics"
launcher metrics --metric metrics/eval/accuracy --metric metrics/eval/f1 --metric metrics/eval/loss
