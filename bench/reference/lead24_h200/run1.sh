#!/bin/bash
# Staged at the end of session 23 (.devcarry/lead24r3, git-ignored): HEAD with
# bench/reference/lead23_h200/tma_persistent.patch applied (it contains tma_queries.patch): the TMA
# attention walks work items in a loop (a 1D grid; CudaOptions::flash_tma_persistent: at most one
# block an SM, barrier phases running on across a block's items, two query buffers at 2 stages),
# and its producer copies the queries (flash_tma_queries). Compiled, never run.
#   1. harness paged attention on cuda_flash_tma, cuda_flash_tma_persist, cuda_flash_tma3_persist
#      (3 blocks: every block walks many items); the model tests (the poisoned cache with
#      persistent variants at 5 blocks); memcheck of the model tests. A hang shows as a timeout.
#   2. step_bench A/B, 3 rounds: default (d) / queries (q) / persistent + queries (p) /
#      persistent + queries from 0 rows (p0: 1x512 and 8x512 on the kernel too); ncu 1x2048.
# Decision: commit the patch with whatever is faster in every round and passes every test.
# run(command="DEADLINE=420 bash .devcarry/lead24r3/run1.sh", carry=[".devcarry/lead24r3"]).
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-420}
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
timeout 90 $B/test_backend_ops --gtest_filter='*Paged*/cuda_flash_tma:*Paged*/cuda_flash_tma_persist:*Paged*/cuda_flash_tma3_persist' > $R/harness.log 2>&1
verdict "harness paged attention, TMA and persistent targets" $R/harness.log "worst NMSE"
timeout 90 $B/test_cuda_backend --gtest_filter='CudaWgmmaAttention*' > $R/wgmma.log 2>&1
verdict "CudaWgmmaAttention*" $R/wgmma.log "NMSE"
timeout 150 $SAN --tool memcheck $B/test_cuda_backend --gtest_filter='CudaWgmmaAttention*Tma*' > $R/memcheck.log 2>&1
verdict "memcheck TMA model tests" $R/memcheck.log
A="--model $M --dummy-weights --device cuda --kv-dtype bf16"
for r in $(seq 1 $ROUNDS); do
  for v in d q p p0; do
    case $v in
      d) E="INFERA_CUDA_FLASH_TMA=1";;
      q) E="INFERA_CUDA_FLASH_TMA_QUERIES=1";;
      p) E="INFERA_CUDA_FLASH_TMA_QUERIES=1 INFERA_CUDA_FLASH_TMA_PERSISTENT=1";;
      p0) E="INFERA_CUDA_FLASH_TMA_QUERIES=1 INFERA_CUDA_FLASH_TMA_PERSISTENT=1 INFERA_CUDA_FLASH_TMA_MIN_ROWS=0";;
    esac
    step "prefill $v round $r" 60 $L env $E $B/step_bench $A --prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 16 --decode-steps 4 --repeats 12 --json $R/json/${v}_$r.json
  done
done
python3 $REPO/bench/step_bench_ratios.py $R/json d,q,p,p0 2>&1 | tee -a $L
MET=gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
for v in d p; do
  case $v in d) E="INFERA_CUDA_FLASH_TMA=1";; p) E="INFERA_CUDA_FLASH_TMA_QUERIES=1 INFERA_CUDA_FLASH_TMA_PERSISTENT=1";; esac
  step "ncu $v 2048" 40 $L env $E $NCU --kernel-name regex:"attention_tma_wgmma" --launch-count 4 --clock-control none --metrics $MET --csv --page raw --log-file $R/ncu_$v.csv $B/step_bench $A --prefill 2048 --batch 1 --context 16 --decode-steps 1 --repeats 1
  python3 - $R/ncu_$v.csv <<'PY' 2>&1 | tee -a $L
import csv,sys
rows=[r for r in csv.reader(open(sys.argv[1])) if r]
h=None
for r in rows:
    if 'Kernel Name' in r: h=r; continue
    if h and len(r)==len(h) and r[0].isdigit():
        d=dict(zip(h,r)); print(d['Kernel Name'][:60], d.get('gpu__time_duration.sum'), d.get('sm__throughput.avg.pct_of_peak_sustained_elapsed'), d.get('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active'))
PY
done
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
