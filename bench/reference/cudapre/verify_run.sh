#!/bin/bash
# For the lead's verification run (not run by cudapre: its two runs were spent): the final tree
# against main's binary, prefill and decode (step_bench) and ModernBERT-large (encoder_bench),
# 3 alternating rounds. The BatchDesc::validate fix (host time, ~0.26-1 us a prompt token) was
# measured only on the host (validate_bench.txt); this is its end-to-end check. Carry like
# run2/run.sh (bin/step_bench, bin/step_bench_main, bin/encoder_bench, bin/encoder_bench_main,
# ab_table.py beside this script; /work/main/.devcarry/cudapre holds them, built from ffa464d).
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
cd $HERE/../..
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1,64,256 --context 512 --decode-steps 16 --repeats 9"
EB="--device cuda --config bench/configs/modernbert-large --batch 1x93 --batch 10x512 --batch 64x512 --runs 8 --attention-runs 0 --warmup 2"
for i in 1 2 3; do
  echo "== main #$i"; timeout 20 $HERE/bin/step_bench_main $A
  echo "== new #$i"; timeout 20 $HERE/bin/step_bench $A
  echo "== encoder main #$i"; timeout 20 $HERE/bin/encoder_bench_main $EB
  echo "== encoder new #$i"; timeout 20 $HERE/bin/encoder_bench $EB
done > $OUT/bench.log 2>&1
python3 $HERE/ab_table.py $OUT/bench.log | tee $OUT/ratios.txt
