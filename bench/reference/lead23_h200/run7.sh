#!/bin/bash
# Session 23, run 7: the TMA attention's consumer warpgroups taking turns (ping-pong,
# CudaOptions::flash_tma_pingpong), and the TMA kernel from 512 rows.
#   1. harness paged attention on cuda_flash_tma_pp; the model-level TMA tests (2, 3 stages and
#      ping-pong over a poisoned cache; graph replay);
#   2. step_bench prefill: default (t1) / ping-pong (tp) / min rows 512 (t5), 3 rounds; ncu 1x2048.
# run(command="DEADLINE=300 bash .devcarry/lead23c/run7.sh", carry=[".devcarry/lead23c"]).
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
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "gpu: $GPU" | tee -a $T $L
timeout 60 $B/test_backend_ops --gtest_filter='*Paged*/cuda_flash_tma_pp' > $R/harness.log 2>&1
verdict "harness paged attention, cuda_flash_tma_pp" $R/harness.log "cuda_flash_tma"
timeout 90 $B/test_cuda_backend --gtest_filter='CudaWgmmaAttention*Tma*:CudaWgmmaAttention*Graph*' > $R/wgmma.log 2>&1
verdict "CudaWgmmaAttention TMA tests" $R/wgmma.log "NMSE"
A="--model $M --dummy-weights --device cuda --kv-dtype bf16"
for r in $(seq 1 $ROUNDS); do
  for v in t1 tp t5; do
    case $v in t1) E="INFERA_CUDA_FLASH_TMA=1";; tp) E="INFERA_CUDA_FLASH_TMA_PINGPONG=1";; t5) E="INFERA_CUDA_FLASH_TMA_MIN_ROWS=512";; esac
    step "prefill $v round $r" 60 $L env $E $B/step_bench $A --prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 16 --decode-steps 4 --repeats 12 --json $R/json/${v}_$r.json
  done
done
python3 $REPO/bench/step_bench_ratios.py $R/json t1,tp,t5 2>&1 | tee -a $L
MET=gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
for v in t1 tp; do
  case $v in t1) E="INFERA_CUDA_FLASH_TMA=1";; tp) E="INFERA_CUDA_FLASH_TMA_PINGPONG=1";; esac
  step "ncu $v 2048" 40 $L env $E $NCU --kernel-name regex:"attention_(tma|flash)_wgmma" --launch-count 4 --clock-control none --metrics $MET --csv --page raw --log-file $R/ncu_${v}_2048.csv $B/step_bench $A --prefill 2048 --batch 1 --context 16 --decode-steps 1 --repeats 1
  python3 - $R/ncu_${v}_2048.csv <<'PY' 2>&1 | tee -a $L
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
