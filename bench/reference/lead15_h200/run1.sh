#!/bin/bash
# Session 15 lead, run 1 (staged, NOT run: device loans were paused): the decode stack's L2 prefetch of the rows ahead
# (INFERA_CUDA_DECODE_STACK_L2=1, registers path) on the H200. To stage (the checkout is ~54 MiB
# of the call's 64): cmake --preset release -B build/slim -DINFERA_CUDA_SLIM_FATBIN=ON
# -DINFERA_CUDA_LINEINFO=OFF; build test_cuda_backend and step_bench; scripts/device_stage.sh
# .devcarry/lead15r1 <them>; then replace its shared.tar.xz by one of shared/fixtures/
# qwen3-small-untied and shared/models/qwen3-0.6b only (tar -C .. -cJf ...), copy this script in,
# and run `bash .devcarry/lead15r1/run1.sh` with carry [".devcarry/lead15r1"]. Correctness first (the
# decode-stack tests incl. the new bit-for-bit L2 test, memcheck of it), then step_bench b1
# alternating L2 off / on in one binary (off = main's default path), then a barrier trace of each.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-420}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
B=$HERE/bin; R=$OUT/raw; mkdir -p $R/json
T=$OUT/tests.log; L=$OUT/bench.log
source "$HERE/../../scripts/device_run_lib.sh"  # left, step, verdict (run from .devcarry/NAME/)
export INFERA_SOURCE_DIR=$(cd $HERE/../.. && pwd)
REPO=$INFERA_SOURCE_DIR
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt 2>&1
timeout 150 $B/test_cuda_backend --gtest_filter='*DecodeStack*:-*qwen3_micro*' > $R/stack.log 2>&1; echo "rc $?" >> $R/stack.log
verdict stack $R/stack.log "decode_stack kernels"
timeout 120 compute-sanitizer --tool memcheck --kernel-name kns=decode_stack --error-exitcode 3 $B/test_cuda_backend --gtest_filter='CudaDecodeStackL2.*' > $R/memcheck.log 2>&1; echo "rc $?" >> $R/memcheck.log
grep -E "ERROR SUMMARY|^rc |PASSED|FAILED" $R/memcheck.log | head -5 >> $T
echo "correctness done t=${SECONDS}s" | tee -a $T
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --batch 1 --context 512 --decode-steps 64 --repeats 5"
A2="--model $M --dummy-weights --device cuda --kv-dtype bf16 --batch 1 --context 2048 --decode-steps 64 --repeats 5"
for i in 1 2 3 4; do
  step "b1 off #$i" 25 $L $B/step_bench $A --json $R/json/off_$i.json
  step "b1 l2 #$i" 25 $L env INFERA_CUDA_DECODE_STACK_L2=1 $B/step_bench $A --json $R/json/l2_$i.json
done
for i in 1 2; do
  step "b1 2k off #$i" 25 $L $B/step_bench $A2 --json $R/json/off2k_$i.json
  step "b1 2k l2 #$i" 25 $L env INFERA_CUDA_DECODE_STACK_L2=1 $B/step_bench $A2 --json $R/json/l22k_$i.json
done
python3 $REPO/bench/reference/lead13_h200/ab_ratios.py $R/json off,l2 | tee -a $L
python3 $REPO/bench/reference/lead13_h200/ab_ratios.py $R/json off2k,l22k | tee -a $L
step "trace off" 25 $L env INFERA_CUDA_DECODE_STACK_TRACE=$R/trace_off.bin $B/step_bench $A
step "trace l2" 25 $L env INFERA_CUDA_DECODE_STACK_L2=1 INFERA_CUDA_DECODE_STACK_TRACE=$R/trace_l2.bin $B/step_bench $A
for f in off l2; do echo "== trace $f" >> $L; python3 $REPO/bench/reference/lead12_h200/decode_stack_trace.py $R/trace_$f.bin 2>&1 | tail -25 >> $L; done
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
