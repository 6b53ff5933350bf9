#!/bin/bash
# Session 22 lead, run 4 (staged in .devcarry/lead22r3): the staged decode attention's rows by
# bulk copies (CudaOptions::decode_bulk, INFERA_CUDA_DECODE_BULK=1; off by default): correctness
# (the op harness's paged attention on every CUDA target and every op on cuda_decode_bulk,
# memcheck), then step_bench b64 / b256 with it off / on alternating, ncu of the kernel both ways.
# Stage (repository root): build/slim at the commit, step_bench and test_backend_ops stripped,
# `tar -cf - bin | xz -9e`; lib/ and shared.tar.xz (qwen3-0.6b configs) as run 1.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-400}
ROUNDS=${ROUNDS:-5}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
B=$HERE/bin; R=$OUT/raw; mkdir -p $R/json
T=$OUT/tests.log; L=$OUT/bench.log
source "$HERE/../../scripts/device_run_lib.sh"
REPO=$(cd $HERE/../.. && pwd)
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.txt 2>&1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "gpu: $GPU" | tee -a $T $L
timeout 150 $B/test_backend_ops --gtest_filter='*KvWriteAndPagedAttention/cuda*' > $R/paged.log 2>&1 &
timeout 150 $B/test_backend_ops --gtest_filter='*/cuda_decode_bulk' > $R/bulk_all.log 2>&1 &
timeout 150 $SAN --tool memcheck --error-exitcode 3 $B/test_backend_ops --gtest_filter='*KvWriteAndPagedAttention/cuda_decode_bulk' > $R/memcheck.log 2>&1 &
timeout 150 $SAN --tool racecheck --error-exitcode 3 $B/test_backend_ops --gtest_filter='*KvWriteAndPagedAttention/cuda_decode_bulk' > $R/racecheck.log 2>&1 &
wait
verdict "paged attention, every cuda target" $R/paged.log
verdict "every op on cuda_decode_bulk" $R/bulk_all.log
verdict "memcheck bulk" $R/memcheck.log
verdict "racecheck bulk" $R/racecheck.log
echo "correctness done t=${SECONDS}s" | tee -a $T
A="--model $M --dummy-weights --device cuda --kv-dtype bf16"
for r in $(seq 1 $ROUNDS); do
  for v in 0 1; do
    step "bulk=$v round $r" 60 $L env INFERA_CUDA_DECODE_BULK=$v $B/step_bench $A --prefill 16 --batch 8,64,256 --context 512 --decode-steps 32 --repeats 3 --json $R/json/bulk${v}_$r.json
  done
done
python3 $REPO/bench/reference/lead13_h200/ab_ratios.py $R/json bulk0,bulk1 2>&1 | tee -a $L
KM=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active
for v in 0 1; do
  step "ncu attention bulk=$v" 60 $L env INFERA_CUDA_DECODE_BULK=$v $NCU --profile-from-start off --clock-control none -k regex:attention_decode --metrics $KM --csv --page raw --log-file $R/ncu_attn_bulk$v.csv $B/step_bench $A --prefill 16 --batch 64,256 --context 512 --decode-steps 4 --repeats 1 --profile-step
done
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
