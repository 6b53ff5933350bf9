#!/bin/bash
# fa3 run 4: the planted bug (test_backend_ops_bug: the wgmma kernel's causal mask lets row r0
# see one key past its range) must fail the harness; the final binaries (wgmma on by default) on
# the default `cuda` target, the mma.sync targets that now turn wgmma off, cuda_prefill_toggled,
# and the model-level/shadow tests.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar xJf bin.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
T=$OUT/tests.log
echo "== planted bug (expect FAILED)" >> $T
timeout 40 bin/test_backend_ops_bug --gtest_filter='*KvWriteAndPagedAttention/cuda_flash_wgmma' > $OUT/bug.log 2>&1; echo "rc $? (planted bug)" >> $T
grep -E "worst NMSE|over the bound|FAILED|PASSED" $OUT/bug.log | head -12 >> $T
i=0
for f in cuda cuda_flash_halves cuda_prefill_toggled cuda_flash_wide8_plain cuda_interleaved; do
  timeout 40 bin/test_backend_ops --gtest_filter="*KvWriteAndPagedAttention/$f" > $OUT/h_$f.log 2>&1 &
done
timeout 40 bin/test_cuda_backend --gtest_filter='*Wgmma*:*Shadow*' > $OUT/cb.log 2>&1; echo "rc $? (cuda backend wgmma+shadow, default on)" >> $T
wait
for f in $OUT/h_*.log; do echo "== $f" >> $T; grep -E "attention BF16|PASSED|FAILED" $f >> $T; done
grep -E "PASSED|FAILED" $OUT/cb.log >> $T
rm -f $OUT/h_*.log
cat $T
