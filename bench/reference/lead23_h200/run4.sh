#!/bin/bash
# Session 23, run 4: why the TMA attention is slow: ncu warp-state, scheduler and source-counter
# sections of one 1x2048 launch, TMA kernel (2 stages) and the wgmma kernel.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared CUDA_MODULE_LOADING=EAGER
B=$HERE/bin
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 2048 --batch 1 --context 16 --decode-steps 1 --repeats 1"
S="--section WarpStateStats --section SchedulerStats --section SourceCounters --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy --section ComputeWorkloadAnalysis"
for v in 1 0; do
  INFERA_CUDA_FLASH_TMA=$v timeout 120 $NCU --kernel-name regex:"attention_(tma|flash)_wgmma" --launch-skip 2 --launch-count 1 $S $B/step_bench $A > $OUT/ncu_tma$v.txt 2>&1
  echo "tma=$v rc $? t=${SECONDS}s"
done
