#!/bin/bash
# Session 9 lead, run 5: the op-harness suites run 4's 100 s step did not reach (FusedOps from
# QkNormRopeKvWrite on, QuantOps, ResidualMlpOps) on every CUDA target, as 8 gtest shards in
# parallel (the double-precision references are CPU-bound).
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
cd $HERE/../..
export INFERA_SOURCE_DIR=$PWD
F='Backends/FusedOps.*/cuda*:Backends/QuantOps.*/cuda*:Backends/ResidualMlpOps.*/cuda*'
for s in 0 1 2 3 4 5 6 7; do
  GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$s timeout 110 $HERE/bin/test_backend_ops --gtest_filter="$F" > $OUT/shard_$s.log 2>&1 &
done
wait
cat $OUT/shard_*.log > $OUT/harness.log; rm $OUT/shard_*.log
echo "== runs: $(grep -c '^\[ RUN' $OUT/harness.log), ok: $(grep -c '^\[       OK' $OUT/harness.log)"
grep -E "^\[  (FAILED|PASSED)  \]|Failure|over the bound" $OUT/harness.log | sort | uniq -c | head -20
