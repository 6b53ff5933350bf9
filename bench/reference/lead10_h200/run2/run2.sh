#!/bin/bash
# Session 10 lead, run 2: what run 1 could not run (decision suite without INFERA_SOURCE_DIR, the
# harness shards under `timeout`, racecheck through cuBLAS), and the b64 decode A/B by switch.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-200}
tar xJf bin.tar.xz; tar xJf ../shared.tar.xz
export LD_LIBRARY_PATH=$HERE/../lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
B=$HERE/lbin
T=$OUT/tests.log; L=$OUT/bench.log; S=$OUT/sanitizer.log
left() { echo $((DEADLINE - SECONDS)); }
step() {
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 5 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
cat > $HERE/shards.sh <<'EOS'
#!/bin/bash
# The op harness as 8 parallel gtest shards; prints each shard's verdict lines.
for i in 0 1 2 3 4 5 6 7; do
  GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i "$1" --gtest_filter="$2" > /tmp/shard_$i.log 2>&1 &
done
wait
rc=0
for i in 0 1 2 3 4 5 6 7; do
  grep -E "^\[  (FAILED|PASSED)  \]|tests ran|Failure|over the bound" /tmp/shard_$i.log
  grep -q "^\[  PASSED  \]" /tmp/shard_$i.log && ! grep -q "^\[  FAILED  \]" /tmp/shard_$i.log || rc=1
done
exit $rc
EOS
chmod +x $HERE/shards.sh
cd $HERE/../..
export INFERA_SOURCE_DIR=$PWD
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
step "decision tests cuda" 20 $T env INFERA_TEST_DEVICE=cuda $B/test_decision
step "op harness, every cuda target, 8 shards" 60 $T $HERE/shards.sh $B/test_backend_ops '*/cuda*'
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512 --batch 8,64 --context 512 --decode-steps 32 --repeats 5"
for i in 1 2 3; do
  step "b64 main #$i" 15 $L $B/step_bench_main $A
  step "b64 new #$i" 15 $L $B/step_bench $A
  step "b64 new stream off #$i" 15 $L env INFERA_CUDA_STREAM_GEMM=0 $B/step_bench $A
  step "b64 new wgmma off #$i" 15 $L env INFERA_CUDA_FLASH_WGMMA=0 $B/step_bench $A
done
step "racecheck wgmma kernels (harness case)" 50 $S compute-sanitizer --tool racecheck --kernel-name kns=wgmma --error-exitcode 3 $B/test_backend_ops --gtest_filter='*KvWriteAndPagedAttention/cuda_flash_wgmma'
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|ERROR SUMMARY|RACECHECK SUMMARY" $T $S | tail -40
grep -E "^(==|rc )|decode batch.*greedy" $L | tail -60
