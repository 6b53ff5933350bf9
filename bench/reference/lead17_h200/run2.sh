#!/bin/bash
# Session 17 lead, run 2: the decode stack's attention splits merged by every block at phase C's
# start (CudaOptions::decode_stack_merge_in_c, INFERA_CUDA_DECODE_STACK_MERGE_C=1) instead of by
# the last split of each kv head after an atomic. Correctness first: the new bit-for-bit test and
# the dummy-weight decode-stack cases (no fixtures: the 64 MiB cap), memcheck of the new test;
# then step_bench b1 alternating default / merge_c at contexts 512 and 2048, and a barrier trace
# of each. Staging as run1.sh (slim build; test_cuda_backend and step_bench; shared.tar.xz of
# shared/models/qwen3-0.6b only); run `bash .devcarry/lead17r2/run2.sh`, carry
# [".devcarry/lead17r2"]. Measured slower (b1 x0.93-0.95 at 512, x0.94-0.96 at 2,048) and
# removed: the code is run2/merge_in_c.patch (apply to a47409f~1 to rerun).
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-400}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
B=$HERE/bin; R=$OUT/raw; mkdir -p $R/json
T=$OUT/tests.log; L=$OUT/bench.log
source "$HERE/../../scripts/device_run_lib.sh"  # left, step, verdict (run from .devcarry/NAME/)
REPO=$(cd $HERE/../.. && pwd)
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.txt 2>&1
step "merge_c + stack tests" 120 $R/stack.log $B/test_cuda_backend --gtest_filter='CudaDecodeStackMergeInC.*:*DecodeStackTest*head_dim_128*:*DecodeStackTest*0_6b*'
verdict stack $R/stack.log "decode_stack kernels"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
[ -n "$CS" ] && step "memcheck merge_c" 120 $R/memcheck.log $CS --tool memcheck --kernel-name kns=decode_stack --error-exitcode 3 $B/test_cuda_backend --gtest_filter='CudaDecodeStackMergeInC.*'
[ -n "$CS" ] && verdict memcheck $R/memcheck.log
echo "correctness done t=${SECONDS}s" | tee -a $T
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --batch 1 --decode-steps 64 --repeats 5"
for c in 512 2048; do
  for i in 1 2 3 4; do
    step "b1 ctx $c default #$i" 25 $L $B/step_bench $A --context $c --json $R/json/last$c\_$i.json
    step "b1 ctx $c merge_c #$i" 25 $L env INFERA_CUDA_DECODE_STACK_MERGE_C=1 $B/step_bench $A --context $c --json $R/json/mergec$c\_$i.json
  done
  python3 $REPO/bench/reference/lead13_h200/ab_ratios.py $R/json last$c,mergec$c | tee -a $L
done
step "trace default" 25 $L env INFERA_CUDA_DECODE_STACK_TRACE=$R/trace_last.bin $B/step_bench $A --context 512
step "trace merge_c" 25 $L env INFERA_CUDA_DECODE_STACK_MERGE_C=1 INFERA_CUDA_DECODE_STACK_TRACE=$R/trace_mergec.bin $B/step_bench $A --context 512
for f in last mergec; do echo "== trace $f" >> $L; python3 $REPO/bench/reference/lead12_h200/decode_stack_trace.py $R/trace_$f.bin 2>&1 | tail -25 >> $L; rm -f $R/trace_$f.bin; done
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
