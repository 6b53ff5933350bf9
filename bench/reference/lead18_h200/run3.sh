#!/bin/bash
# Session 18 lead, run 3: the decode stack's gate rows loaded a phase early
# (CudaOptions::decode_stack_glu_early, INFERA_CUDA_DECODE_STACK_GLU_EARLY=1). Runs 1-2's traces
# put the barrier before the gate/up phase at ~3 us from the last arrival to the first departure
# (0.6-0.9 at the others): every block's 12.6 MB burst of gate and up loads is issued there, and
# the barrier's atomics and polls queue behind it. Here the gate rows go with the o rows (4 MB)
# one barrier earlier. The variants' bit-for-bit test (ring sizes and this), memcheck of it; then
# step_bench b1 alternating default / glu_early at contexts 512 and 2048, and a barrier trace of
# each. Staging as run1.sh (run 2 reran run1.sh itself); run `bash .devcarry/lead18r3/run3.sh` with carry [".devcarry/lead18r3"].
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
step "variants + stack tests" 150 $R/stack.log $B/test_cuda_backend --gtest_filter='CudaDecodeStackVariants.*:*DecodeStackTest*head_dim_128*:*DecodeStackTest*0_6b*'
verdict stack $R/stack.log "decode_stack kernels|vs registers"
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --batch 1 --decode-steps 64 --repeats 5"
for c in 512 2048; do
  for i in 1 2 3 4; do
    step "b1 ctx $c default #$i" 25 $L $B/step_bench $A --context $c --json $R/json/def$c\_$i.json
    step "b1 ctx $c glu_early #$i" 25 $L env INFERA_CUDA_DECODE_STACK_GLU_EARLY=1 $B/step_bench $A --context $c --json $R/json/glu$c\_$i.json
  done
  python3 $REPO/bench/reference/lead13_h200/ab_ratios.py $R/json def$c,glu$c | tee -a $L
done
step "trace default" 25 $L env INFERA_CUDA_DECODE_STACK_TRACE=$R/trace_def.bin $B/step_bench $A --context 512
step "trace glu_early" 25 $L env INFERA_CUDA_DECODE_STACK_GLU_EARLY=1 INFERA_CUDA_DECODE_STACK_TRACE=$R/trace_glu.bin $B/step_bench $A --context 512
for f in def glu; do echo "== trace $f" >> $L; python3 $REPO/bench/reference/lead12_h200/decode_stack_trace.py $R/trace_$f.bin 2>&1 | tail -25 >> $L; rm -f $R/trace_$f.bin; done
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
[ -n "$CS" ] && step "memcheck variants" 150 $R/memcheck.log $CS --tool memcheck --kernel-name kns=decode_stack --error-exitcode 3 $B/test_cuda_backend --gtest_filter='CudaDecodeStackVariants.*'
[ -n "$CS" ] && verdict memcheck $R/memcheck.log
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
