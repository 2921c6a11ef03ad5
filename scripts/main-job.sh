#!/usr/bin/env bash
# The main job, from a fresh clone: install, prepare data, train a tiny MPT on the
# local backend, and show its loss curve. Safe to run again (it reuses .venv and the data).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/launcher ] || ! .venv/bin/python -c "import composer, streaming" 2>/dev/null; then
    python3 -m venv .venv
    .venv/bin/pip install -q -e '.[train]'
fi
export PATH="$PWD/.venv/bin:$PATH"

data=out/number-say
if [ ! -f "$data/mds/val/index.json" ]; then
    echo "== preparing data in $data: synthetic number-say text, a BPE tokenizer, MDS shards"
    launcher data synthetic --kind number-say --samples 3000 --seed 0 --out "$data/train.jsonl"
    launcher data synthetic --kind number-say --samples 300 --seed 1 --out "$data/val.jsonl"
    launcher data tokenizer train "$data/train.jsonl" --vocab-size 512 --out "$data/tokenizer"
    for split in train val; do
        launcher data convert "$data/$split.jsonl" --out "$data/mds" --split "$split" \
            --tokenizer "$data/tokenizer" --concat-tokens 64 --overwrite
    done
fi

echo "== training the tiny MPT on the local backend"
launcher run -f runspecs/mpt-tiny-local.yaml --follow

echo "== the loss curve"
launcher metrics --plot
