#!/bin/bash
# cudab1 run 3 (final code): op harness with the new k > 2048 GEMV cases, model tests on
# qwen3-small-untied and the CPU-following decode test (the qwen3-micro tests ran in run 2 on the
# same kernels: the carry cannot hold both fixtures), racecheck of the changed kernels, and
# same-run A/B against main's binary in ABBA order (b1 with the switches, b8/b64/b256 + prefill).
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-232}
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log; S=$OUT/sanitizer.log
left() { echo $((DEADLINE - SECONDS)); }
step() {
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 5 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
cd $HERE/../..
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
ALL="INFERA_CUDA_PDL_EARLY=2 INFERA_CUDA_KV_PREFETCH=1 INFERA_CUDA_PARAMS_EARLY=1 INFERA_CUDA_FUSE_QK=1"
step "op harness cuda, cuda_exact, cuda_b1" 40 $T $HERE/bin/test_backend_ops --gtest_filter='*/cuda:*/cuda_exact:*/cuda_b1'
step "model tests cuda (defaults)" 20 $T env INFERA_TEST_DEVICE=cuda $HERE/bin/test_model --gtest_filter='*qwen3_small_untied*:Qwen3Weights.Float32CheckpointGivesTheSameLogits'
step "model tests cuda (FUSE_QK on)" 20 $T env INFERA_CUDA_FUSE_QK=1 INFERA_TEST_DEVICE=cuda $HERE/bin/test_model --gtest_filter='*qwen3_small_untied*:Qwen3Weights.Float32CheckpointGivesTheSameLogits'
step "model tests cuda (every switch on)" 20 $T env $ALL INFERA_TEST_DEVICE=cuda $HERE/bin/test_model --gtest_filter='*qwen3_small_untied*:Qwen3Weights.Float32CheckpointGivesTheSameLogits'
NOMICRO='-CudaBackendTest.GraphReplayEqualsEagerBitForBit:CudaBackendTest.StreamedStepsEqualStepsLaunchedAtFlush:CudaSamplingTest.GeneratorSamplesOnTheDeviceLikeTheHost'
step "cuda backend tests (defaults; not the qwen3-micro ones)" 20 $T $HERE/bin/test_cuda_backend --gtest_filter="$NOMICRO"
step "cuda backend tests (every switch on; not the qwen3-micro ones)" 20 $T env $ALL $HERE/bin/test_cuda_backend --gtest_filter="$NOMICRO"
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 16 --batch 1 --context 512 --decode-steps 64 --repeats 1"
for i in 1 2 3; do
  step "b1 main #$i.a" 12 $B $HERE/bin/step_bench_main $A
  step "b1 new #$i.a" 12 $B $HERE/bin/step_bench $A
  step "b1 new PRELOAD=0 #$i" 12 $B env INFERA_CUDA_GEMV_PRELOAD=0 $HERE/bin/step_bench $A
  step "b1 new FUSE_QK #$i.a" 12 $B env INFERA_CUDA_FUSE_QK=1 $HERE/bin/step_bench $A
  step "b1 new PARAMS_EARLY #$i" 12 $B env INFERA_CUDA_PARAMS_EARLY=1 $HERE/bin/step_bench $A
  step "b1 new EARLY=1+KV+PARAMS #$i" 12 $B env INFERA_CUDA_PDL_EARLY=1 INFERA_CUDA_KV_PREFETCH=1 INFERA_CUDA_PARAMS_EARLY=1 $HERE/bin/step_bench $A
  step "b1 new #$i.b" 12 $B $HERE/bin/step_bench $A
  step "b1 new FUSE_QK #$i.b" 12 $B env INFERA_CUDA_FUSE_QK=1 $HERE/bin/step_bench $A
  step "b1 main #$i.b" 12 $B $HERE/bin/step_bench_main $A
done
W="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --batch 8,64,256 --context 512 --decode-steps 32 --repeats 5"
step "wide main #1" 25 $B $HERE/bin/step_bench_main $W --json $OUT/wide_main_1.json
step "wide new #1" 25 $B $HERE/bin/step_bench $W --json $OUT/wide_new_1.json
step "wide new #2" 25 $B $HERE/bin/step_bench $W --json $OUT/wide_new_2.json
step "wide main #2" 25 $B $HERE/bin/step_bench_main $W --json $OUT/wide_main_2.json
step "wide new FUSE_QK" 25 $B env INFERA_CUDA_FUSE_QK=1 $HERE/bin/step_bench $W --json $OUT/wide_fuse.json
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
NA="--model $M --dummy-weights --device cuda --kv-dtype bf16 --batch 1 --context 512 --decode-steps 1 --repeats 1"
MET=gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size,launch__registers_per_thread
K='regex:gemv|attention_decode|embedding|argmax|gather|rmsnorm|qk_norm|add_kernel'
step "ncu b1 new FUSE_QK" 30 $OUT/ncu.log env INFERA_CUDA_FUSE_QK=1 $NCU --clock-control none --cache-control none --metrics $MET --csv --page raw -k "$K" -c 900 --log-file $OUT/ncu_fuse.csv $HERE/bin/step_bench $NA
xz -9 $OUT/ncu_fuse.csv 2>/dev/null
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
step "memcheck harness matmul (new cases)" 25 $S $SAN --tool memcheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='Backends/OpHarness.Matmul/cuda:Backends/FusedOps.MatmulMultiAndSwiglu/cuda'
step "racecheck fused add_rmsnorm + qk-norm (cuda_b1)" 25 $S $SAN --tool racecheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='Backends/FusedOps.AddRmsNorm/cuda_b1:Backends/FusedOps.QkNormRopeKvWrite/cuda_b1'
step "memcheck fused qk + decode attention (cuda_b1, cuda)" 25 $S $SAN --tool memcheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='Backends/FusedOps.QkNormRopeThenDecodeAttention/cuda_b1:Backends/FusedOps.QkNormRopeThenDecodeAttention/cuda'
step "racecheck fused qk + decode attention (cuda_b1)" 25 $S $SAN --tool racecheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='Backends/FusedOps.QkNormRopeThenDecodeAttention/cuda_b1:Backends/FusedOps.QkNormRopeThenDecodeAttention/cuda'
cd $OUT && tar cJf wide_json.tar.xz wide_*.json 2>/dev/null && rm -f wide_*.json; cd - >/dev/null
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|tests ran" $T | tail -30
grep -E "^(==|rc )|ERROR SUMMARY|RACECHECK SUMMARY" $S
grep -E "^(==|rc )|greedy ids|prefill  " $B
