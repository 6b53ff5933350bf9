#!/usr/bin/env bash
# One call on the lent GPU: train a few schedules of the same model one after another, keep the one
# with the lowest validation loss. Each run is given what is left of a fixed deadline; after each
# run the best model so far is copied to $OUT, so a run cut short still returns the best weights.
#   gpu_sweep.sh DATA_TARBALL OUT DEADLINE_SECONDS
# Runs (all: 8 layers, hidden 384, GQA 6/2 heads, head_dim 64, seed 12; they differ in length):
#   e8   1100 steps x 32 x 1024 tokens (about 8 epochs of the 4.46M training tokens)
#   e5    700 steps (about 5 epochs)
#   e12  1650 steps (about 12 epochs)
set -uo pipefail
data_tar=$1 out=$2 deadline=$3
here=$(cd "$(dirname "$0")" && pwd)
start=$(date +%s)
work=/tmp/demo_sweep
rm -rf "$work" && mkdir -p "$work/data" "$out"
tar -xJf "$data_tar" -C "$work/data"
nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv | tee "$work/gpu.txt"
best_loss=inf
for run in "e8 1100" "e5 700" "e12 1650"; do
  set -- $run
  name=$1 steps=$2
  left=$((deadline - ($(date +%s) - start)))
  if [ "$left" -lt 60 ]; then echo "skip $name: ${left}s left"; continue; fi
  PYTHONUNBUFFERED=1 python3 "$here/train.py" --data "$work/data" --out "$work/$name" \
    --steps "$steps" --time-budget $((left - 30)) --seed 12 ${TRAIN_EXTRA_ARGS:-} 2>&1 | tee "$work/$name.stdout" \
    | grep -v '"train_loss"' | cut -c1-400
  loss=$(python3 -c "import json,sys; print([json.loads(l) for l in open('$work/$name/train_log.jsonl') if '\"end\"' in l][-1]['best_val_loss'])" 2>/dev/null || echo inf)
  echo "run $name: best val loss $loss"
  if python3 -c "import sys; sys.exit(0 if float('$loss') < float('$best_loss') else 1)"; then
    best_loss=$loss
    rm -rf "$out/model" && cp -r "$work/$name/model" "$out/model" && echo "$name" > "$work/selected.txt"
  fi
  tar -C "$work" -czf "$out/logs.tar.gz" --exclude='*/model' --exclude='data' .
done
echo "selected: $(cat "$work/selected.txt" 2>/dev/null) (val loss $best_loss)"
ls -la "$out" "$out/model"
