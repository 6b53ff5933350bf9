#!/bin/bash
# Session 13 lead, run 3 (binaries of run 2, f7e3599): ncu per-kernel tables of one step each of
# prefill 1x2048, decode b64 and b256 (context 512), and ncu --set full of the qk-norm kernel and
# the bf16-only norm at 8x512 (what limits them).
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
B=$HERE/bin; R=$OUT/raw; mkdir -p $R
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
MET=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed
P="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 2048 --batch 64,256 --context 512 --decode-steps 2 --repeats 1 --profile-step"
timeout 150 ncu --clock-control none --profile-from-start off --metrics $MET --csv --log-file $R/ncu_steps.csv $B/step_bench $P > $R/ncu_steps.log 2>&1; echo "rc $? t=${SECONDS}" | tee -a $R/ncu_steps.log
P2="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 64 --prefill-batch 8x512 --batch 1 --context 64 --decode-steps 1 --repeats 1 --profile-step"
timeout 120 ncu --clock-control none --profile-from-start off --set full -k regex:"qk_norm_rope|add_rmsnorm_rows" --launch-skip 91 --launch-count 3 $B/step_bench $P2 > $R/ncu_full_qk.txt 2>&1; echo "rc $? t=${SECONDS}" | tee -a $R/ncu_full_qk.txt
tail -3 $R/ncu_steps.log
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
