#!/bin/bash
# cudab1 run 2 (commit 9c9628f's code): GEMV preload on by default; GPU tests (defaults and every
# switch on), memcheck + racecheck of the changed kernels' harness cases, b1 A/B of each switch
# against main's binary (alternating rounds), b8/b64/b256 + prefill A/B main vs new, ncu of a b1
# decode step (kernels filtered by name: the decode chain's).
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-228}
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log; N=$OUT/ncu.log; S=$OUT/sanitizer.log
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
ALL="INFERA_CUDA_PDL_EARLY=2 INFERA_CUDA_KV_PREFETCH=1 INFERA_CUDA_PARAMS_EARLY=1"
step "op harness cuda, cuda_exact, cuda_b1" 40 $T $HERE/bin/test_backend_ops --gtest_filter='*/cuda:*/cuda_exact:*/cuda_b1'
step "cuda backend tests (defaults)" 20 $T $HERE/bin/test_cuda_backend
step "cuda backend tests (every switch on)" 20 $T env $ALL $HERE/bin/test_cuda_backend
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
F='Backends/OpHarness.Matmul/cuda:Backends/OpHarness.Matmul/cuda_b1:Backends/OpHarness.KvWriteAndPagedAttention/cuda:Backends/OpHarness.KvWriteAndPagedAttention/cuda_b1:Backends/FusedOps.*/cuda:Backends/FusedOps.*/cuda_b1'
step "memcheck harness (gemv, attention, fused)" 40 $S $SAN --tool memcheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter="$F"
step "racecheck harness (attention, fused)" 40 $S $SAN --tool racecheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='Backends/OpHarness.KvWriteAndPagedAttention/cuda_b1:Backends/FusedOps.AddRmsNorm/cuda_b1:Backends/FusedOps.QkNormRopeKvWrite/cuda_b1:Backends/FusedOps.MatmulMultiAndSwiglu/cuda_b1'
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --batch 1 --context 512 --decode-steps 32 --repeats 1"
for i in 1 2; do
  step "b1 main #$i" 12 $B $HERE/bin/step_bench_main $A
  step "b1 new default #$i" 12 $B $HERE/bin/step_bench $A
  step "b1 new PRELOAD=0 #$i" 12 $B env INFERA_CUDA_GEMV_PRELOAD=0 $HERE/bin/step_bench $A
  step "b1 new EARLY=1 #$i" 12 $B env INFERA_CUDA_PDL_EARLY=1 $HERE/bin/step_bench $A
  step "b1 new KV_PREFETCH #$i" 12 $B env INFERA_CUDA_KV_PREFETCH=1 $HERE/bin/step_bench $A
  step "b1 new PARAMS_EARLY #$i" 12 $B env INFERA_CUDA_PARAMS_EARLY=1 $HERE/bin/step_bench $A
  step "b1 new EARLY=1+KV+PARAMS #$i" 12 $B env INFERA_CUDA_PDL_EARLY=1 INFERA_CUDA_KV_PREFETCH=1 INFERA_CUDA_PARAMS_EARLY=1 $HERE/bin/step_bench $A
  step "b1 new SPLITS=16 #$i" 12 $B env INFERA_CUDA_DECODE_SPLITS=16 $HERE/bin/step_bench $A
done
W="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --batch 8,64,256 --context 512 --decode-steps 32 --repeats 5"
for i in 1 2; do
  step "wide main #$i" 25 $B $HERE/bin/step_bench_main $W --json $OUT/wide_main_$i.json
  step "wide new #$i" 25 $B $HERE/bin/step_bench $W --json $OUT/wide_new_$i.json
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
NA="--model $M --dummy-weights --device cuda --kv-dtype bf16 --batch 1 --context 512 --decode-steps 1 --repeats 1"
MET=gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size,launch__registers_per_thread
K='regex:gemv|attention_decode|embedding|argmax|gather|rmsnorm|qk_norm|add_kernel'
step "ncu b1 main" 35 $N $NCU --clock-control none --cache-control none --metrics $MET --csv --page raw -k "$K" -c 900 --log-file $OUT/ncu_main.csv $HERE/bin/step_bench_main $NA
step "ncu b1 new" 35 $N $NCU --clock-control none --cache-control none --metrics $MET --csv --page raw -k "$K" -c 900 --log-file $OUT/ncu_new.csv $HERE/bin/step_bench $NA
cd $OUT && xz -9 ncu_main.csv ncu_new.csv 2>/dev/null; tar cJf wide_json.tar.xz wide_*.json 2>/dev/null && rm -f wide_*.json; cd - >/dev/null
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|tests ran" $T | tail -30
grep -E "^(==|rc )|ERROR SUMMARY|RACECHECK SUMMARY" $S
grep -E "^(==|rc )|greedy ids|prefill  " $B
