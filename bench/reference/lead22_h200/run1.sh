#!/bin/bash
# Session 22 lead, run 1 (staged in .devcarry/lead22r1): the GEMM decoder stack's q/k/v as ONE
# cuBLAS GEMM (CudaOptions::gemm_stack_qkv_one; the Qwen3 loader places each layer's q/k/v
# weights one after another through Backend::prepare_weights), and, on an H200 only, session 20's
# fewer-instruction decode attention A/B (step_bench against step_bench_att: the same tree with
# bench/reference/lead20_h200/staged_fewer_instructions.patch applied).
# Correctness first, in parallel: test_cuda_backend (CudaGemmStackTest's new q/k/v-apart
# backend, PrepareWeightsPlacesWeightsOneAfterAnother), the op harness's cuda targets (4 shards),
# memcheck of the gemm-stack test's 0.6B-layer case. Then step_bench with the switch off / on
# alternating (prefill 1x2048, 8x512, decode b64, b256), the attention A/B where an H200, the
# kernel-time tables (INFERA_CUDA_PROFILE=1) of b64 / b256 / 1x2048 with the switch on and off,
# and the defaults table.
# Stage (repository root): build/slim at the commit, step_bench test_cuda_backend
# test_backend_ops stripped, and step_bench_att (the patch applied, built, reverted), packed
# `tar -cf - bin | xz -9e`; lib/ (libhwy); shared.tar.xz = the qwen3-0.6b configs only (the
# carry cap: test_cuda_backend's fixture tests fail for want of their models).
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-540}
ROUNDS=${ROUNDS:-5}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
B=$HERE/bin; R=$OUT/raw; mkdir -p $R/json
T=$OUT/tests.log; L=$OUT/bench.log
source "$HERE/../../scripts/device_run_lib.sh"
REPO=$(cd $HERE/../.. && pwd)
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.txt 2>&1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "gpu: $GPU" | tee -a $T $L
for i in 0 1 2 3; do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout 150 $B/test_backend_ops --gtest_filter='*/cuda*' > $R/shard_$i.log 2>&1 &
done
timeout 200 $B/test_cuda_backend > $R/cb.log 2>&1 &
timeout 200 $SAN --tool memcheck --error-exitcode 3 $B/test_cuda_backend --gtest_filter='*GemmStack*0_6b*:*PrepareWeights*' > $R/memcheck.log 2>&1 &
wait
for i in 0 1 2 3; do verdict "harness shard $i" $R/shard_$i.log; done
verdict "test_cuda_backend" $R/cb.log "q/k/v apart"
verdict "memcheck gemm stack" $R/memcheck.log
echo "correctness done t=${SECONDS}s" | tee -a $T
A="--model $M --dummy-weights --device cuda --kv-dtype bf16"
for r in $(seq 1 $ROUNDS); do
  for v in 0 1; do
    step "qkv one=$v round $r" 60 $L env INFERA_CUDA_GEMM_STACK_QKV_ONE=$v $B/step_bench $A --prefill 2048 --prefill-batch 8x512 --batch 64,256 --context 512 --decode-steps 32 --repeats 3 --json $R/json/qkv${v}_$r.json
  done
done
python3 $REPO/bench/reference/lead13_h200/ab_ratios.py $R/json qkv0,qkv1 2>&1 | tee -a $L
if echo "$GPU" | grep -q H200; then
  for r in $(seq 1 $ROUNDS); do
    for v in old new; do
      S=$B/step_bench; [ $v = new ] && S=$B/step_bench_att
      step "attention $v round $r" 60 $L $S $A --prefill 16 --batch 64,256 --context 512 --decode-steps 32 --repeats 3 --json $R/json/att_${v}_$r.json
    done
  done
  python3 $REPO/bench/reference/lead13_h200/ab_ratios.py $R/json att_old,att_new 2>&1 | tee -a $L
fi
for v in 1 0; do
  step "profile decode qkv one=$v" 90 $L env INFERA_CUDA_PROFILE=1 INFERA_CUDA_GEMM_STACK_QKV_ONE=$v $B/step_bench $A --prefill 16 --batch 64,256 --context 512 --decode-steps 16 --repeats 2
  step "profile prefill qkv one=$v" 90 $L env INFERA_CUDA_PROFILE=1 INFERA_CUDA_GEMM_STACK_QKV_ONE=$v $B/step_bench $A --prefill 2048 --prefill-batch 8x512 --batch 1 --context 16 --decode-steps 8 --repeats 4
done
step "defaults table" 120 $L $B/step_bench $A --prefill 512,2048 --prefill-batch 8x512 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 3 --json $R/json/defaults.json
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
