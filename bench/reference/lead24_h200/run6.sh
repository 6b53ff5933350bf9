#!/bin/bash
# Session 24, run F (.devcarry/lead24d, the commit as built): on top of the persistent snake grid
# with the queries by TMA, are ping-pong (INFERA_CUDA_FLASH_TMA_PINGPONG=1) or 3 stages
# (INFERA_CUDA_FLASH_TMA_STAGES=3, one query buffer) faster? 3 rounds, default first; ncu 1x2048.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-120}
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
A="--model $M --dummy-weights --device cuda --kv-dtype bf16"
P="--prefill 1024,2048 --prefill-batch 8x512 --prefill-batch 4x1024 --prefill-batch 2x2048 --batch 1 --context 16 --decode-steps 2 --repeats 12"
for r in 1 2 3; do
  for v in n pp s3; do
    case $v in n) E="INFERA_CUDA_FLASH_TMA=1";; pp) E="INFERA_CUDA_FLASH_TMA_PINGPONG=1";; s3) E="INFERA_CUDA_FLASH_TMA_STAGES=3";; esac
    step "prefill $v round $r" 30 $L env $E $B/step_bench $A $P --json $R/json/${v}_$r.json
  done
done
python3 $REPO/bench/step_bench_ratios.py $R/json n,pp,s3 2>&1 | tee -a $L $T
MET=gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
for v in n pp; do
  case $v in n) E="INFERA_CUDA_FLASH_TMA=1";; pp) E="INFERA_CUDA_FLASH_TMA_PINGPONG=1";; esac
  step "ncu $v" 30 $L env $E $NCU --kernel-name regex:"attention_tma_wgmma" --launch-count 3 --clock-control none --metrics $MET --csv --page raw --log-file $R/ncu_$v.csv $B/step_bench $A --prefill 2048 --batch 1 --context 16 --decode-steps 1 --repeats 1
  python3 - $R/ncu_$v.csv <<'PY' 2>&1 | tee -a $L $T
import csv,sys
rows=[r for r in csv.reader(open(sys.argv[1])) if r]
h=None
for r in rows:
    if 'Kernel Name' in r: h=r; continue
    if h and len(r)==len(h) and r[0].isdigit():
        d=dict(zip(h,r)); print(d['Kernel Name'][:60], d.get('gpu__time_duration.sum'), d.get('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active'))
PY
done
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
