#!/bin/bash
# Session tooling (device run 1 of helper cudapf): main's step_bench (5c5bf24) only: Nsight Compute
# kernel tables of one 8x512 prefill step and one 1x2048 prefill step (the second, warm step each),
# baseline bench rounds, and same-binary switches that touch host recording (cuBLASLt plans, streaming).
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-200}
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
B=$OUT/bench.log; N=$OUT/ncu.log
left() { echo $((DEADLINE - SECONDS)); }
step() {
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 5 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee -a $B
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
SB=$HERE/bin/step_bench_main
NCU="ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --page raw"
step "ncu 8x512 (prefill 8 x2 steps, then 8x512 x2 steps)" 60 $N $NCU -c 1500 --log-file $OUT/ncu_8x512.csv $SB --model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 8 --prefill-batch 8x512 --batch 1 --context 64 --decode-steps 1 --repeats 1
step "ncu 2048 (2 steps)" 40 $N $NCU -c 800 --log-file $OUT/ncu_2048.csv $SB --model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 2048 --batch 1 --context 64 --decode-steps 1 --repeats 1
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1,64,256 --context 512 --decode-steps 32 --repeats 9"
for i in 1 2; do
  step "main #$i" 25 $B $SB $A
  step "main CUBLASLT=1 #$i" 25 $B env INFERA_CUDA_CUBLASLT=1 $SB $A
  step "main STREAM=0 #$i" 25 $B env INFERA_CUDA_STREAM=0 $SB $A
done
step "main PROFILE=1 (eager per-kernel events)" 30 $B env INFERA_CUDA_PROFILE=1 $SB --model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 2048 --prefill-batch 8x512 --batch 1 --context 64 --decode-steps 1 --repeats 2
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|prefill  |decode batch.*greedy|host recording" $B | head -80
