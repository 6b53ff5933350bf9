#!/bin/bash
# cudafa run 1: op harness of the wide flash kernel (128-vector tiles) next to the 64-vector one,
# step_bench A/B (main 19117b3 vs wide 4 warps, wide 4 + split, wide 8 + split; 3 alternating
# rounds), ncu full sections of one warm 2048-token prefill attention launch (main, wide 4),
# ncu durations of every attention launch of one 2048 and one 8x512 step (main, wide 4).
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-225}
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log; N=$OUT/ncu.log
left() { echo $((DEADLINE - SECONDS)); }
step() {  # step NAME SECONDS LOG cmd...
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 5 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv | tee -a $T
cd $HERE/../..
export INFERA_SOURCE_DIR=$PWD
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
step "op harness attention: cuda, flash split/wide targets; encoder attention cuda" 50 $T $HERE/bin/test_backend_ops --gtest_filter='*KvWriteAndPagedAttention/cuda:*KvWriteAndPagedAttention/cuda_flash_*:*EncoderOps*Attention*/cuda'
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1,64 --context 512 --decode-steps 16 --repeats 7"
for i in 1 2 3; do
  step "sb main #$i" 20 $B $HERE/bin/step_bench_main $A
  step "sb wide4 #$i" 20 $B env INFERA_CUDA_FLASH_WIDE=4 $HERE/bin/step_bench $A
  step "sb wide4 split #$i" 20 $B env INFERA_CUDA_FLASH_WIDE=4 INFERA_CUDA_FLASH_SPLIT=1 $HERE/bin/step_bench $A
  step "sb wide8 split #$i" 20 $B env INFERA_CUDA_FLASH_WIDE=8 INFERA_CUDA_FLASH_SPLIT=1 $HERE/bin/step_bench $A
done
NCU="ncu --clock-control none --cache-control none"
P="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 2048 --batch 1 --context 64 --decode-steps 1 --repeats 1"
step "ncu full main 2048 (launch 41)" 35 $N $NCU --set full --csv --page details -k regex:attention_flash --launch-skip 40 --launch-count 1 --log-file $OUT/ncu_full_main.csv $HERE/bin/step_bench_main $P
step "ncu full wide4 2048 (launch 41)" 35 $N env INFERA_CUDA_FLASH_WIDE=4 $NCU --set full --csv --page details -k regex:attention_flash --launch-skip 40 --launch-count 1 --log-file $OUT/ncu_full_wide4.csv $HERE/bin/step_bench $P
D="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 2048 --prefill-batch 8x512 --batch 1 --context 64 --decode-steps 1 --repeats 1"
DUR="--metrics gpu__time_duration.sum --csv --page raw -k regex:attention_flash"
step "ncu durations main" 20 $N $NCU $DUR --log-file $OUT/ncu_dur_main.csv $HERE/bin/step_bench_main $D
step "ncu durations wide4" 20 $N env INFERA_CUDA_FLASH_WIDE=4 $NCU $DUR --log-file $OUT/ncu_dur_wide4.csv $HERE/bin/step_bench $D
for f in $OUT/ncu_*.csv; do [ -f "$f" ] && xz -9 "$f"; done
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|tests ran" $T | tail -30
grep -E "^(==|rc )|prefill  " $B | tail -80
