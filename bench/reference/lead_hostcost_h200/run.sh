#!/bin/bash
# Session tooling: host time per CUDA step, eager message building (step_bench_timer) vs lazy
# (step_bench: INFERA_CUDA_EXPECT), interleaved in one run; plus the GPU tests of the lazy build.
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log
M="--model $INFERA_SHARED_DIR/models/qwen3-0.6b --dummy-weights --device cuda --kv-dtype bf16"
timeout 60 bin/test_backend_ops --gtest_filter='*/cuda:*/cuda_exact' > $T 2>&1; echo "rc $? op harness" | tee -a $T
timeout 25 bin/test_cuda_backend >> $T 2>&1; echo "rc $? cuda backend" | tee -a $T
timeout 40 env INFERA_TEST_DEVICE=cuda-exact bin/test_model --gtest_filter='Fixtures/*:*BatchParity*' >> $T 2>&1; echo "rc $? model cuda-exact" | tee -a $T
timeout 30 env INFERA_TEST_DEVICE=cuda-exact bin/test_engine --gtest_filter='*GeneratorTest*:*ForwardArgmax*' >> $T 2>&1; echo "rc $? engine cuda-exact" | tee -a $T
for i in 1 2 3; do
  for v in step_bench_timer step_bench; do
    echo "== $v #$i" >> $B
    timeout 40 bin/$v $M --prefill 512,2048 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 5 --json $OUT/${v}_$i.json >> $B 2>&1
    echo "rc $? $v #$i" >> $B
  done
done
grep -E "PASSED|FAILED|rc " $T
grep -E "^==|^rc|prefill .*tokens:|greedy ids|host recording" $B
