#!/bin/bash
# Session tooling (not part of the repo): cuda3 device run 2 = correctness of the new kernels
# (flash attention, PDL), same-binary A/B of step_bench, per-kernel ncu times.
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-300}
for t in bin.tar.xz shared.tar.xz; do
  tar xJf $t 2>/dev/null || python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall()" $t
done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
NCU=/usr/local/cuda/bin/ncu
T=$OUT/tests.log; B=$OUT/bench.log; S=$OUT/sanitizer.log; P=$OUT/ncu.log
left() { echo $((DEADLINE - SECONDS)); }
step() {  # step NAME SECONDS LOG cmd...
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 10 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee -a $T
M="--model shared/models/qwen3-0.6b --dummy-weights --device cuda --kv-dtype bf16"
SB="bin/step_bench $M --prefill 512,2048 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 5"
step "attention+fused harness cuda" 60 $T bin/test_backend_ops --gtest_filter='*OpHarness.KvWriteAndPagedAttention/cuda*:*FusedOps.*/cuda*'
step "cuda backend tests" 20 $T bin/test_cuda_backend
for i in 1 2; do
  step "bench old (PDL=0 FLASH=0) #$i" 30 $B env INFERA_CUDA_PDL=0 INFERA_CUDA_FLASH=0 $SB --json $OUT/sb_old$i.json
  step "bench new #$i" 30 $B $SB --json $OUT/sb_new$i.json
done
step "bench PDL=0 (flash on)" 30 $B env INFERA_CUDA_PDL=0 $SB
for k in 32 64; do
  step "b1 split keys $k" 15 $B env INFERA_CUDA_DECODE_SPLIT_KEYS=$k bin/step_bench $M --prefill 16 --batch 1,8 --context 512 --decode-steps 32 --repeats 1
done
step "ncu times prefill2048+b1 (new)" 60 $P $NCU --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --page raw --log-file $OUT/ncu_times2.csv bin/step_bench $M --prefill 2048 --batch 1 --context 512 --decode-steps 1 --repeats 1
step "ncu decode attention b64" 40 $P $NCU --clock-control none --cache-control none -k regex:attention_decode --launch-count 28 --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv --page raw --log-file $OUT/ncu_att64.csv bin/step_bench $M --prefill 16 --batch 64 --context 512 --decode-steps 1 --repeats 1
step "ncu decode attention b256" 50 $P $NCU --clock-control none --cache-control none -k regex:attention_decode --launch-count 28 --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv --page raw --log-file $OUT/ncu_att256.csv bin/step_bench $M --prefill 16 --batch 256 --context 512 --decode-steps 1 --repeats 1
step "ncu gemm b64 step" 40 $P $NCU --clock-control none --cache-control none -k regex:'nvjet|gemm|convert|swiglu|qk_norm|add_rmsnorm' --launch-skip 1300 --launch-count 450 --metrics gpu__time_duration.sum --csv --page raw --log-file $OUT/ncu_b64.csv bin/step_bench $M --prefill 16 --batch 64 --context 16 --decode-steps 2 --repeats 1
step "memcheck flash+decode attention+fused" 60 $S compute-sanitizer --tool memcheck --error-exitcode 3 bin/test_backend_ops --gtest_filter='*FusedOps.*/cuda:*OpHarness.KvWriteAndPagedAttention/cuda'
step "racecheck flash+decode attention" 50 $S compute-sanitizer --tool racecheck --error-exitcode 3 bin/test_backend_ops --gtest_filter='*OpHarness.KvWriteAndPagedAttention/cuda'
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|Which is" $T | tail -30
grep -E "op harness\] cuda" $T | grep -E "attention" | head -8
grep -E "^(==|rc )|prefill|decode batch.*greedy" $B
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc " $S
grep -E "^(==|rc )" $P
ls -la $OUT
