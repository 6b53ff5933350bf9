#!/bin/bash
# cudabd run 2: same-run A/B of main's binary against this branch with the two new switches
# (INFERA_CUDA_DECODE_SHADOW, INFERA_CUDA_PAIRED_GEMM), 4 alternating rounds; the GPU suites with
# the switches off (defaults) and on; memcheck of the new paths; the decode GEMM probe timed in
# CUDA graphs; ncu --set full of the b64 GEMMs + decode attention and the b256 decode attention.
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-228}
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log; P=$OUT/probe.log; N=$OUT/ncu_full.log; S=$OUT/sanitizer.log; J=$OUT/json; mkdir -p $J
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
export INFERA_SOURCE_DIR=$PWD
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt 2>&1
ON="INFERA_CUDA_DECODE_SHADOW=1 INFERA_CUDA_PAIRED_GEMM=1"
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 7"
for i in 1 2 3 4; do
  step "sb main #$i" 20 $B $HERE/bin/step_bench_main $A --json $J/main_$i.json
  step "sb new both #$i" 20 $B env $ON $HERE/bin/step_bench $A --json $J/both_$i.json
  step "sb new paired #$i" 20 $B env INFERA_CUDA_PAIRED_GEMM=1 $HERE/bin/step_bench $A --json $J/paired_$i.json
done
step "op harness, cuda targets" 75 $T $HERE/bin/test_backend_ops --gtest_filter='*/cuda:*/cuda_exact:*/cuda_b1:*/cuda_unstaged:*/cuda_prefill_toggled'
step "cuda backend tests" 30 $T $HERE/bin/test_cuda_backend
step "model tests cuda" 20 $T env INFERA_TEST_DEVICE=cuda $HERE/bin/test_model --gtest_filter='Fixtures/*:*BatchParity*:*Qwen3Weights*'
step "model tests cuda, switches on" 20 $T env $ON INFERA_TEST_DEVICE=cuda $HERE/bin/test_model --gtest_filter='Fixtures/*:*BatchParity*:*Qwen3Weights*'
step "engine tests cuda" 20 $T env INFERA_TEST_DEVICE=cuda $HERE/bin/test_engine --gtest_filter='*GeneratorTest*:*ForwardArgmax*'
step "engine tests cuda, switches on" 20 $T env $ON INFERA_TEST_DEVICE=cuda $HERE/bin/test_engine --gtest_filter='*GeneratorTest*:*ForwardArgmax*'
step "memcheck decode shadow + pairs" 40 $S compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_cuda_backend --gtest_filter='CudaShadowTest.Qwen3Decode*'
step "memcheck harness fused+attention cuda_b1" 40 $S compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*FusedOps*/cuda_b1:*PagedAttention*/cuda_b1'
step "decode gemm probe (graphs)" 25 $P $HERE/bin/cuda_decode_gemm_probe
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
step "ncu full b64 q/k/v GEMMs + attention" 40 $N $NCU --clock-control none --cache-control none --profile-from-start off --set full -k 'regex:attention_decode|nvjet' -c 4 $HERE/bin/step_bench --model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512 --repeats 1 --batch 64 --context 512 --decode-steps 1 --profile-step
step "ncu full b256 attention" 40 $N $NCU --clock-control none --cache-control none --profile-from-start off --set full -k 'regex:attention_decode' -c 1 $HERE/bin/step_bench --model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512 --repeats 1 --batch 256 --context 512 --decode-steps 1 --profile-step
xz -9 $N 2>/dev/null
cd $J && tar cJf $OUT/step_bench_json.tar.xz *.json; cd - >/dev/null; rm -rf $J
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|tests ran|ERROR SUMMARY|paired gemm" $T $S | tail -50
grep -E "^(==|rc )|decode batch.*greedy" $B | tail -60
cat $P
