#!/bin/bash
# Staged at the end of session 23 for the next session (.devcarry/lead24r1, git-ignored): HEAD
# e989340's slim step_bench, encoder_bench, test_cuda_backend, test_backend_ops.
#   1. where the TMA prefill attention (attention_tma_wgmma.cu) now waits: ncu WarpStateStats,
#      SchedulerStats and SourceCounters (top stall locations) of one 1x2048 launch, as committed
#      (ping-pong off) and with INFERA_CUDA_FLASH_TMA_PINGPONG=1;
#   2. TMA kernel off / on at 1x1024, 1x2048, 2x1024, 4x1024 (2 rounds: is the row threshold right
#      for batches?);
#   3. the defaults table (step_bench, encoder_bench).
# run(command="DEADLINE=300 bash .devcarry/lead24r1/run1.sh", carry=[".devcarry/lead24r1"]).
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-300}
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
S="--section WarpStateStats --section SchedulerStats --section SourceCounters --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis"
for v in 0 1; do
  step "ncu sections, ping-pong $v" 60 $L env INFERA_CUDA_FLASH_TMA_PINGPONG=$v $NCU --kernel-name regex:"attention_tma_wgmma" --launch-skip 2 --launch-count 1 $S --log-file $OUT/ncu_tma_pp$v.txt $B/step_bench $A --prefill 2048 --batch 1 --context 16 --decode-steps 1 --repeats 1
done
# Is the 1,024-row threshold right for batches of several such prompts? TMA off (m0) / on (m1).
for r in 1 2; do
  for v in 0 1; do
    step "tma=$v round $r" 60 $L env INFERA_CUDA_FLASH_TMA=$v $B/step_bench $A --prefill 1024,2048 --prefill-batch 2x1024 --prefill-batch 4x1024 --batch 1 --context 16 --decode-steps 4 --repeats 12 --json $R/json/m${v}_$r.json
  done
done
python3 $REPO/bench/step_bench_ratios.py $R/json m0,m1 2>&1 | tee -a $L
step "defaults table" 90 $L $B/step_bench $A --prefill 512,2048 --prefill-batch 8x512 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 12 --json $R/json/defaults.json
step "encoder defaults" 60 $L $B/encoder_bench --device cuda --config $REPO/bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 30 --attention-runs 0 --windowed-only --out $R/json/enc_defaults.json
grep -E "tok/s|forward .*median" $L | tail -24 >> $T
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
