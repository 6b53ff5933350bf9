#!/bin/bash
# Staged at the end of session 23 (.devcarry/lead24r2, git-ignored): HEAD c2d01c4 with
# bench/reference/lead23_h200/tma_queries.patch applied (the TMA attention's producer copies the
# queries too, CudaOptions::flash_tma_queries, INFERA_CUDA_FLASH_TMA_QUERIES=1). Compiled, never
# run. Binaries: slim test_cuda_backend, test_backend_ops, step_bench.
#   1. CudaWgmmaAttention* (the poisoned-cache test runs the queries-by-TMA variant, stages -3, and
#      asks tma_queries == 3), the harness's TMA targets (f32 queries there: the old staging, a
#      regression check), memcheck of the model test;
#   2. step_bench prefill A/B: default (q0) / INFERA_CUDA_FLASH_TMA_QUERIES=1 (q1), 3 rounds;
#      ncu of the 1x2048 attention both ways.
# Decision: turn flash_tma_queries on (and commit the patch) only if every test passes and q1 is
# faster at 1x2048 in every round.
# run(command="DEADLINE=300 bash .devcarry/lead24r2/run1.sh", carry=[".devcarry/lead24r2"]).
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-300}
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
timeout 90 $B/test_cuda_backend --gtest_filter='CudaWgmmaAttention*' > $R/wgmma.log 2>&1
verdict "CudaWgmmaAttention*" $R/wgmma.log "NMSE|tma_queries"
timeout 60 $B/test_backend_ops --gtest_filter='*Paged*/cuda_flash_tma*' > $R/harness.log 2>&1
verdict "harness paged attention, TMA targets" $R/harness.log "worst NMSE"
timeout 120 $SAN --tool memcheck $B/test_cuda_backend --gtest_filter='CudaWgmmaAttention*Tma*' > $R/memcheck.log 2>&1
verdict "memcheck TMA model test" $R/memcheck.log
A="--model $M --dummy-weights --device cuda --kv-dtype bf16"
for r in $(seq 1 $ROUNDS); do
  for v in q0 q1; do
    step "prefill $v round $r" 60 $L env INFERA_CUDA_FLASH_TMA_QUERIES=${v#q} $B/step_bench $A --prefill 2048 --prefill-batch 2x1024 --batch 1 --context 16 --decode-steps 4 --repeats 12 --json $R/json/${v}_$r.json
  done
done
python3 $REPO/bench/step_bench_ratios.py $R/json q0,q1 2>&1 | tee -a $L
MET=gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
for v in 0 1; do
  step "ncu queries=$v" 40 $L env INFERA_CUDA_FLASH_TMA_QUERIES=$v $NCU --kernel-name regex:"attention_tma_wgmma" --launch-count 4 --clock-control none --metrics $MET --csv --page raw --log-file $R/ncu_q$v.csv $B/step_bench $A --prefill 2048 --batch 1 --context 16 --decode-steps 1 --repeats 1
  python3 - $R/ncu_q$v.csv <<'PY' 2>&1 | tee -a $L
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
