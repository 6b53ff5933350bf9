#!/bin/bash
# cudag (issue 11, skinny tensor-core GEMM for decode batches): run 3 of 3 on the H200. GPU tests,
# op harness (default and every split setting), compute-sanitizer memcheck + racecheck of the
# skinny cases, step_bench decode with the skinny GEMM on / off (INFERA_CUDA_SKINNY, same binary)
# alternating 3 times, setting sweeps, ncu of one b64 decode step's GEMMs (skinny and cuBLAS).
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-280}
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
export PATH=/usr/local/cuda/bin:$PATH
T=$OUT/tests.log; B=$OUT/bench.log; S=$OUT/sanitizer.log; P=$OUT/ncu.log
left() { echo $((DEADLINE - SECONDS)); }
step() {
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 8 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" >> $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee -a $T
cd $HERE/../..
SK='*OpHarness.Matmul/cuda:*FusedOps.MatmulMultiAndSwiglu/cuda'
# (the qwen3-micro fixture is not carried: its three tests are left out)
step "test_cuda_backend" 50 $T $HERE/bin/test_cuda_backend --gtest_filter='-CudaBackendTest.GraphReplayEqualsEagerBitForBit:CudaBackendTest.StreamedStepsEqualStepsLaunchedAtFlush:CudaSamplingTest.GeneratorSamplesOnTheDeviceLikeTheHost'
step "op harness cuda+cuda_exact" 50 $T $HERE/bin/test_backend_ops --gtest_filter='*/cuda:*/cuda_exact'
for cfg in INFERA_CUDA_SKINNY=0 INFERA_CUDA_SKINNY_CTAS=0 INFERA_CUDA_SKINNY_CTAS=1 INFERA_CUDA_SKINNY_CTAS=8 INFERA_CUDA_SKINNY_WIDE_ROWS=256; do
  step "op harness skinny cases, $cfg" 20 $T env $cfg $HERE/bin/test_backend_ops --gtest_filter="$SK"
done
step "model tests cuda (qwen3-small-untied)" 25 $T env INFERA_TEST_DEVICE=cuda $HERE/bin/test_model --gtest_filter='Fixtures/*qwen3_small_untied'
M="--model $INFERA_SHARED_DIR/models/qwen3-0.6b --dummy-weights --device cuda --kv-dtype bf16"
for i in 1 2 3; do
  for v in 1 0; do
    step "step_bench skinny=$v #$i" 25 $B env INFERA_CUDA_SKINNY=$v $HERE/bin/step_bench $M --prefill 512 --batch 8,64,256 --context 512 --decode-steps 32 --repeats 3 --json $OUT/sb_skinny${v}_$i.json
  done
done
for cfg in INFERA_CUDA_SKINNY_CTAS=1 INFERA_CUDA_SKINNY_CTAS=4 INFERA_CUDA_SKINNY_CTAS=8 INFERA_CUDA_SKINNY_WIDE_ROWS=256 INFERA_CUDA_SKINNY_ROWS=128; do
  step "sweep $cfg" 15 $B env $cfg $HERE/bin/step_bench $M --prefill 16 --batch 64,256 --context 512 --decode-steps 32 --repeats 1
done
NM="--clock-control none --csv --page raw --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__cluster_dim_x,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg,gpc__cycles_elapsed.max"
SB="$HERE/bin/step_bench $M --prefill 16 --batch 64 --context 16 --decode-steps 2 --repeats 1"
step "ncu skinny b64 (layers + LM head)" 30 $P ncu $NM -k regex:skinny --launch-skip 108 --launch-count 9 $SB
step "ncu cublas b64" 30 $P env INFERA_CUDA_SKINNY=0 ncu $NM -k regex:'sm90|cutlass|xmma|gemmSN|gemvx|splitK|Kernel|nvjet' --launch-skip 420 --launch-count 10 $SB
step "ncu skinny b256" 30 $P ncu $NM -k regex:skinny --launch-skip 108 --launch-count 9 ${SB/--batch 64/--batch 256}
step "memcheck skinny cases" 35 $S compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter="$SK"
step "memcheck CudaSkinnyTest" 30 $S compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_cuda_backend --gtest_filter='CudaSkinnyTest.*'
step "racecheck skinny cases" 45 $S compute-sanitizer --tool racecheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter="$SK"
step "ncu skinny b64 details" 30 $P ncu --clock-control none --section SpeedOfLight --section WarpStateStats -k regex:skinny --launch-skip 112 --launch-count 4 $SB
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|NMSE" $T | tail -40
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^rc |^==" $S
grep -E "^(==|rc )|greedy ids" $B | head -80
grep -E "^(==|rc )" $P
