#!/bin/bash
# Session tooling: verification of the shared mma_tile.cuh refactor (prefill attention kernels)
# on the final tree: every GPU test, memcheck + racecheck of the attention harness, step_bench
# with the flash kernel and with INFERA_CUDA_FLASH=0 (the mma kernel).
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log; S=$OUT/sanitizer.log
cd $HERE/../..
st() { local n=$1 s=$2 l=$3; shift 3; echo "== $n" >> $l; timeout $s "$@" >> $l 2>&1; echo "rc $? $n" | tee -a $l; }
st "op harness cuda+cuda_exact" 60 $T $HERE/bin/test_backend_ops --gtest_filter='*/cuda:*/cuda_exact'
st "cuda backend" 25 $T $HERE/bin/test_cuda_backend
for dev in cuda cuda-exact; do
  st "model $dev" 40 $T env INFERA_TEST_DEVICE=$dev $HERE/bin/test_model --gtest_filter='Fixtures/*:*BatchParity*:*Qwen3Weights*:*ModernBertMicro*'
  st "engine $dev" 30 $T env INFERA_TEST_DEVICE=$dev $HERE/bin/test_engine --gtest_filter='*GeneratorTest*:*ForwardArgmax*'
done
st "decision cuda-exact" 30 $T env INFERA_TEST_DEVICE=cuda-exact $HERE/bin/test_decision --gtest_filter='DecisionParity.*:DecisionQuant.*'
st "model cuda FLASH=0" 40 $T env INFERA_TEST_DEVICE=cuda INFERA_CUDA_FLASH=0 $HERE/bin/test_model --gtest_filter='Fixtures/*:*BatchParity*'
st "memcheck attention harness" 50 $S compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*OpHarness.KvWriteAndPagedAttention/cuda'
st "racecheck attention harness" 50 $S compute-sanitizer --tool racecheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*OpHarness.KvWriteAndPagedAttention/cuda'
M="--model $INFERA_SHARED_DIR/models/qwen3-0.6b --dummy-weights --device cuda --kv-dtype bf16"
st "step_bench" 40 $B $HERE/bin/step_bench $M --prefill 512,2048 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 5 --json $OUT/step_bench_final.json
st "step_bench FLASH=0 prefill" 30 $B env INFERA_CUDA_FLASH=0 $HERE/bin/step_bench $M --prefill 512,2048 --batch 1 --context 512 --decode-steps 8 --repeats 5
grep -E "PASSED|FAILED|^rc " $T
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^rc " $S
grep -E "^==|^rc|prefill .*tokens:|greedy ids|host recording" $B
