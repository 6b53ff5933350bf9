#!/bin/bash
# Session 24, run C (.devcarry/lead24c, git-ignored): the commit candidate (HEAD 65ebaea +
# tma_persistent.patch, producer at 24 registers, snake schedule, flash_tma_queries and
# flash_tma_persistent on, the row threshold on the step's prompt rows) against HEAD's step_bench
# (step_bench_head, staged in session 23 as lead24r1).
#   1. the CUDA test suite but the fixture tests (fixtures are not carried), memcheck of the
#      wgmma/TMA tests;
#   2. step_bench A/B, 3 rounds: h HEAD / n candidate / n0 candidate with TMA off (short prompts
#      of 1,024 rows together: is the TMA kernel right for them?);
#   3. ncu 1x2048 launches: no queries + a block an item / queries / queries + persistent;
#   4. the defaults table (step_bench).
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-400}
ROUNDS=${ROUNDS:-3}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared CUDA_MODULE_LOADING=EAGER
B=$HERE/bin; R=$OUT/raw; mkdir -p $R/json
T=$OUT/tests.log; L=$OUT/bench.log
source "$HERE/../../scripts/device_run_lib.sh"
REPO=$(cd $HERE/../.. && pwd)
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "gpu: $GPU" | tee -a $T $L
A="--model $M --dummy-weights --device cuda --kv-dtype bf16"
step "hang check" 25 $L $B/step_bench $A --prefill 2048 --prefill-batch 8x512 --batch 1 --context 16 --decode-steps 1 --repeats 2
if grep -q "^rc 124" $L; then echo "HANG: stopping" | tee -a $T; tar czf $OUT/raw.tgz -C $OUT raw; exit 0; fi
FILTER='-*qwen3_micro*:*qwen3_small_untied*:CudaBackendTest.GraphReplay*:CudaBackendTest.Streamed*:CudaBackendTest.DecodeFollows*:CudaSamplingTest.Generator*:CudaDecodeStackL2.*'
timeout 150 $B/test_cuda_backend --gtest_filter="$FILTER" > $R/cuda_tests.log 2>&1
echo "rc $?" >> $R/cuda_tests.log
verdict "test_cuda_backend (no fixture tests)" $R/cuda_tests.log "NMSE"
# (test_backend_ops left out: the carry limit; run B ran its TMA targets on this kernel code)
timeout 90 $SAN --tool memcheck $B/test_cuda_backend --gtest_filter='CudaWgmmaAttention*' > $R/memcheck.log 2>&1
echo "rc $?" >> $R/memcheck.log
verdict "memcheck CudaWgmmaAttention*" $R/memcheck.log
P="--prefill 512,1024,2048 --prefill-batch 8x512 --prefill-batch 4x1024 --prefill-batch 2x2048 --prefill-batch 2x512 --prefill-batch 4x256 --prefill-batch 16x128 --batch 1 --context 16 --decode-steps 4 --repeats 12"
for r in $(seq 1 $ROUNDS); do
  step "prefill h round $r" 40 $L $B/step_bench_head $A $P --json $R/json/h_$r.json
  step "prefill n round $r" 40 $L $B/step_bench $A $P --json $R/json/n_$r.json
  step "prefill n0 round $r" 40 $L env INFERA_CUDA_FLASH_TMA=0 $B/step_bench $A $P --json $R/json/n0_$r.json
done
python3 $REPO/bench/step_bench_ratios.py $R/json h,n,n0 2>&1 | tee -a $L $T
MET=gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
for v in d0 q p; do
  case $v in
    d0) E="INFERA_CUDA_FLASH_TMA_QUERIES=0 INFERA_CUDA_FLASH_TMA_PERSISTENT=0";;
    q) E="INFERA_CUDA_FLASH_TMA_QUERIES=1 INFERA_CUDA_FLASH_TMA_PERSISTENT=0";;
    p) E="INFERA_CUDA_FLASH_TMA_QUERIES=1 INFERA_CUDA_FLASH_TMA_PERSISTENT=1";;
  esac
  step "ncu $v 2048" 40 $L env $E $NCU --kernel-name regex:"attention_tma_wgmma" --launch-count 4 --clock-control none --metrics $MET --csv --page raw --log-file $R/ncu_$v.csv $B/step_bench $A --prefill 2048 --batch 1 --context 16 --decode-steps 1 --repeats 1
  echo "ncu $v:" | tee -a $L $T
  python3 - $R/ncu_$v.csv <<'PY' 2>&1 | tee -a $L $T
import csv,sys
rows=[r for r in csv.reader(open(sys.argv[1])) if r]
h=None
for r in rows:
    if 'Kernel Name' in r: h=r; continue
    if h and len(r)==len(h) and r[0].isdigit():
        d=dict(zip(h,r)); print(d['Kernel Name'][:60], d.get('gpu__time_duration.sum'), d.get('sm__throughput.avg.pct_of_peak_sustained_elapsed'), d.get('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active'))
PY
done
step "defaults table" 90 $L $B/step_bench $A --prefill 512,2048 --prefill-batch 8x512 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 12 --json $R/json/defaults.json
# (encoder_bench left out: the carry limit; the encoder path is unchanged)
grep -E "tok/s|forward .*median" $L | tail -30 >> $T
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
