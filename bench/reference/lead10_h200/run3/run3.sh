#!/bin/bash
# Session 10 lead, run 3: the final tree (lead10 + fa3b) on the H200: the CUDA suites, the op
# harness on every CUDA target as 8 shards, memcheck / racecheck (wgmma kernels only, cuBLAS's own
# reports filtered out) of the new attention targets, and step_bench against main's binary.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-170}
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
step "cuda backend tests" 30 $T $B/test_cuda_backend
step "model tests cuda" 20 $T env INFERA_TEST_DEVICE=cuda $B/test_model
step "engine tests cuda" 15 $T env INFERA_TEST_DEVICE=cuda $B/test_engine
step "decision tests cuda" 15 $T env INFERA_TEST_DEVICE=cuda $B/test_decision
step "op harness, every cuda target, 8 shards" 45 $T $HERE/shards.sh $B/test_backend_ops '*/cuda*'
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1,8 --context 512 --decode-steps 16 --repeats 5"
for i in 1 2; do
  step "sb main #$i" 12 $L $B/step_bench_main $A
  step "sb new #$i" 12 $L $B/step_bench $A
done
step "racecheck wgmma128" 25 $S compute-sanitizer --tool racecheck --kernel-name kns=wgmma --error-exitcode 3 $B/test_backend_ops --gtest_filter='*KvWriteAndPagedAttention/cuda_flash_wgmma128'
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|ERROR SUMMARY|RACECHECK SUMMARY" $T $S | tail -40
grep -E "^(==|rc )|prefill  |decode batch.*greedy" $L | tail -40
