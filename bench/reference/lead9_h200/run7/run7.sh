#!/bin/bash
# Session 9 lead, run 7: the review mends (SkinnyGemmArgs::glu rename, matmul_geglu alias check once)
# and cpudec's merge): the op harness's fused and encoder suites on every CUDA target (8 shards),
# test_cuda_backend, test_model and test_decision on CUDA, one encoder_bench pass.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
cd $HERE/../..
export INFERA_SOURCE_DIR=$PWD
F='Backends/OpHarness.*/cuda_skinny:Backends/FusedOps.*/cuda*:Backends/EncoderFusedOps.*/cuda*:Backends/EncoderOps.*/cuda*:Backends/ResidualMlpOps.*/cuda*'
for s in 0 1 2 3 4 5 6 7; do
  GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$s timeout 90 $HERE/bin/test_backend_ops --gtest_filter="$F" > $OUT/shard_$s.log 2>&1 &
done
wait
cat $OUT/shard_*.log > $OUT/harness.log; rm $OUT/shard_*.log
T=$OUT/tests.log
timeout 40 $HERE/bin/test_cuda_backend > $T 2>&1; echo "rc $? test_cuda_backend" >> $T
INFERA_TEST_DEVICE=cuda timeout 30 $HERE/bin/test_model >> $T 2>&1; echo "rc $? test_model cuda" >> $T
INFERA_TEST_DEVICE=cuda timeout 30 $HERE/bin/test_decision >> $T 2>&1; echo "rc $? test_decision cuda" >> $T
timeout 20 $HERE/bin/encoder_bench --device cuda --config bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 10 --attention-runs 0 --warmup 2 > $OUT/encoder.log 2>&1
echo "== harness runs: $(grep -c '^\[ RUN' $OUT/harness.log), ok: $(grep -c '^\[       OK' $OUT/harness.log)"
grep -E "^\[  (FAILED|PASSED)  \]|Failure|over the bound" $OUT/harness.log | sort | uniq -c | head
grep -E "^rc |^\[  (FAILED|PASSED)  \]" $T
grep -E "windowed min" $OUT/encoder.log
