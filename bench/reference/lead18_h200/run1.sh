#!/bin/bash
# Session 18 lead, run 1: the decode stack's weight ring (CudaOptions::decode_stack_smem,
# INFERA_CUDA_DECODE_STACK_SMEM=1): every block's q/k/v, o, gate/up and down rows stream through a
# ring in shared memory, copied (TMA) by one thread as far ahead as the ring has room, instead of
# into registers one barrier ahead of their phase. Correctness first: the ring-vs-registers
# bit-for-bit test at several ring sizes and the dummy-weight decode-stack cases (no fixtures:
# the 64 MiB cap), memcheck and racecheck; then step_bench b1 alternating registers / ring at
# contexts 512 and 2048, ring sizes, and a barrier trace of each. Staging: slim build, ninja
# test_cuda_backend step_bench, scripts/device_stage.sh .devcarry/lead18r1 <them>,
# shared.tar.xz replaced by one of shared/models/qwen3-0.6b only, this script copied in; run
# `bash .devcarry/lead18r1/run1.sh` with carry [".devcarry/lead18r1"].
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-540}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
B=$HERE/bin; R=$OUT/raw; mkdir -p $R/json
T=$OUT/tests.log; L=$OUT/bench.log
source "$HERE/../../scripts/device_run_lib.sh"  # left, step, verdict (run from .devcarry/NAME/)
REPO=$(cd $HERE/../.. && pwd)
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.txt 2>&1
step "ring + stack tests" 150 $R/stack.log $B/test_cuda_backend --gtest_filter='CudaDecodeStackRing.*:*DecodeStackTest*head_dim_128*:*DecodeStackTest*0_6b*'
verdict stack $R/stack.log "decode_stack kernels|ring"
if grep -q "^rc 124" $R/stack.log; then echo "ring tests timed out: no benches" | tee -a $T; tar czf $OUT/raw.tgz -C $OUT raw; exit 0; fi
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --batch 1 --decode-steps 64 --repeats 5"
for c in 512 2048; do
  for i in 1 2 3 4; do
    step "b1 ctx $c registers #$i" 25 $L $B/step_bench $A --context $c --json $R/json/reg$c\_$i.json
    step "b1 ctx $c ring #$i" 25 $L env INFERA_CUDA_DECODE_STACK_SMEM=1 $B/step_bench $A --context $c --json $R/json/ring$c\_$i.json
  done
  python3 $REPO/bench/reference/lead13_h200/ab_ratios.py $R/json reg$c,ring$c | tee -a $L
done
for k in 104 128 160; do
  step "b1 ctx 512 ring ${k} KiB" 25 $L env INFERA_CUDA_DECODE_STACK_SMEM=1 INFERA_CUDA_DECODE_STACK_RING_KIB=$k $B/step_bench $A --context 512 --json $R/json/ringk$k.json
done
step "trace registers" 25 $L env INFERA_CUDA_DECODE_STACK_TRACE=$R/trace_reg.bin $B/step_bench $A --context 512
step "trace ring" 25 $L env INFERA_CUDA_DECODE_STACK_SMEM=1 INFERA_CUDA_DECODE_STACK_TRACE=$R/trace_ring.bin $B/step_bench $A --context 512
for f in reg ring; do echo "== trace $f" >> $L; python3 $REPO/bench/reference/lead12_h200/decode_stack_trace.py $R/trace_$f.bin 2>&1 | tail -25 >> $L; rm -f $R/trace_$f.bin; done
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
[ -n "$CS" ] && step "memcheck ring" 120 $R/memcheck.log $CS --tool memcheck --kernel-name kns=decode_stack --error-exitcode 3 $B/test_cuda_backend --gtest_filter='*DecodeStackTest*head_dim_128:*DecodeStackTest*qwen3_0_6b_layers'
[ -n "$CS" ] && verdict memcheck $R/memcheck.log
[ -n "$CS" ] && step "racecheck ring" 120 $R/racecheck.log $CS --tool racecheck --kernel-name kns=decode_stack --error-exitcode 3 $B/test_cuda_backend --gtest_filter='*DecodeStackTest*head_dim_128'
[ -n "$CS" ] && verdict racecheck $R/racecheck.log
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
