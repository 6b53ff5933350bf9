#!/bin/bash
# Session 24, run A (.devcarry/lead24a, git-ignored): HEAD 65ebaea + tma_persistent.patch (which
# holds tma_queries.patch) with the producer back at 24 registers: session 23's staging asked for
# 32 + 2 x 128 x 240 = 64 K registers while the block holds 168 x 384 = 63 K, so setmaxnreg.inc
# waited forever (every launch hung: lead24r3 on session 24's first call).
#   0. hang check: one 1x2048 prefill default and persistent (25 s each); stop if either hangs;
#   1. harness TMA targets incl. persistent at 3 blocks; CudaWgmmaAttention* (persistent at 5
#      blocks, queries by TMA);
#   2. step_bench A/B, 3 rounds: d default / q queries / p persistent+queries / p3 the same at 3
#      stages / pp persistent+queries+ping-pong / p0 p from 0 rows / m0 TMA off;
#   3. ncu d and p 1x2048 launches; ncu stall sections of d; memcheck of the TMA model test.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-450}
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
envs() {
  case $1 in
    d) echo "INFERA_CUDA_FLASH_TMA=1";;
    q) echo "INFERA_CUDA_FLASH_TMA_QUERIES=1";;
    p) echo "INFERA_CUDA_FLASH_TMA_QUERIES=1 INFERA_CUDA_FLASH_TMA_PERSISTENT=1";;
    p3) echo "INFERA_CUDA_FLASH_TMA_QUERIES=1 INFERA_CUDA_FLASH_TMA_PERSISTENT=1 INFERA_CUDA_FLASH_TMA_STAGES=3";;
    pp) echo "INFERA_CUDA_FLASH_TMA_QUERIES=1 INFERA_CUDA_FLASH_TMA_PERSISTENT=1 INFERA_CUDA_FLASH_TMA_PINGPONG=1";;
    p0) echo "INFERA_CUDA_FLASH_TMA_QUERIES=1 INFERA_CUDA_FLASH_TMA_PERSISTENT=1 INFERA_CUDA_FLASH_TMA_MIN_ROWS=0";;
    m0) echo "INFERA_CUDA_FLASH_TMA=0";;
  esac
}
for v in d p; do
  step "hang check $v" 25 $L env $(envs $v) $B/step_bench $A --prefill 2048 --batch 1 --context 16 --decode-steps 1 --repeats 2
done
if grep -q "^rc 124" $L; then echo "HANG: stopping" | tee -a $T; tar czf $OUT/raw.tgz -C $OUT raw; exit 0; fi
timeout 90 $B/test_backend_ops --gtest_filter='*Paged*/cuda_flash_tma:*Paged*/cuda_flash_tma3:*Paged*/cuda_flash_tma_persist:*Paged*/cuda_flash_tma3_persist' > $R/harness.log 2>&1
echo "rc $?" >> $R/harness.log
verdict "harness paged attention, TMA and persistent targets" $R/harness.log "worst NMSE"
timeout 120 $B/test_cuda_backend --gtest_filter='CudaWgmmaAttention*' > $R/wgmma.log 2>&1
echo "rc $?" >> $R/wgmma.log
verdict "CudaWgmmaAttention*" $R/wgmma.log "NMSE"
VARS="d q p p3 pp p0 m0"
for r in $(seq 1 $ROUNDS); do
  for v in $VARS; do
    step "prefill $v round $r" 40 $L env $(envs $v) $B/step_bench $A --prefill 512,1024,2048 --prefill-batch 8x512 --prefill-batch 4x1024 --batch 1 --context 16 --decode-steps 4 --repeats 12 --json $R/json/${v}_$r.json
  done
done
python3 $REPO/bench/step_bench_ratios.py $R/json d,q,p,p3,pp,p0,m0 2>&1 | tee -a $L $T
MET=gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
for v in d p; do
  step "ncu $v 2048" 40 $L env $(envs $v) $NCU --kernel-name regex:"attention_tma_wgmma" --launch-count 4 --clock-control none --metrics $MET --csv --page raw --log-file $R/ncu_$v.csv $B/step_bench $A --prefill 2048 --batch 1 --context 16 --decode-steps 1 --repeats 1
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
S="--section WarpStateStats --section SchedulerStats --section SourceCounters --section ComputeWorkloadAnalysis"
step "ncu sections d" 60 $L env $(envs d) $NCU --kernel-name regex:"attention_tma_wgmma" --launch-skip 2 --launch-count 1 $S --log-file $OUT/ncu_sections_d.txt $B/step_bench $A --prefill 2048 --batch 1 --context 16 --decode-steps 1 --repeats 1
timeout $(( $(left) > 10 ? $(left) - 5 : 5 )) $SAN --tool memcheck $B/test_cuda_backend --gtest_filter='CudaWgmmaAttention*Tma*' > $R/memcheck.log 2>&1
echo "rc $?" >> $R/memcheck.log
verdict "memcheck TMA model test" $R/memcheck.log
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
