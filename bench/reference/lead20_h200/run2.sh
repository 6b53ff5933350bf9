#!/bin/bash
# Session 20 lead, run 2 (staged, NOT run: no device started in session 20): the staged decode
# attention of staged_fewer_instructions.patch (one block-table entry a tile, read an issue ahead,
# constant copy offsets; no rescale of the accumulators where the running max held).
# Correctness (the op harness's paged attention cases on every CUDA target, a planted bug,
# test_cuda_backend, memcheck of the kernel), then step_bench b64/b256 old against new
# alternating (3 rounds), ncu of the kernel old and new, and ncu of one whole warm step (new
# binary) at b256, b64 and prefill 1x2048, and the patched binary's whole step_bench table
# (every issue-11 case). ~560 s.
# Stage (from the repository root):
#   1. main's binaries: ninja -C build/slim step_bench; cp build/slim/bench/step_bench /tmp/s/step_bench_old
#   2. git apply bench/reference/lead20_h200/staged_fewer_instructions.patch; plant the bug (the
#      fast path's value copy from `vp + 32 * r * V + ((row & 1) ? -D : D)`), ninja -C build/slim
#      test_backend_ops, cp it to /tmp/s/test_backend_ops_bug; undo the bug; ninja -C build/slim
#      step_bench test_backend_ops test_cuda_backend; cp them to /tmp/s (step_bench as step_bench_new)
#   3. cd /tmp/s && INFERA_SHARED_DIR=/work/shared scripts/device_stage.sh .devcarry/lead20r2
#      step_bench_old step_bench_new test_backend_ops test_backend_ops_bug test_cuda_backend, then
#      replace shared.tar.xz by one holding only shared/models/qwen3-0.6b/{config,generation_config}.json
#      (the tokenizer's 1.4 MB pushed the call over 64 MiB: the tree counts as ~58.5 MiB of tar)
#   4. copy this script in; run `bash .devcarry/lead20r2/run2.sh` with carry [".devcarry/lead20r2"].
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-560}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
B=$HERE/bin; R=$OUT/raw; mkdir -p $R/json
T=$OUT/tests.log; L=$OUT/bench.log
source "$HERE/../../scripts/device_run_lib.sh"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.txt 2>&1
H='*KvWriteAndPagedAttention/cuda*'
for i in 0 1 2 3; do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout 60 $B/test_backend_ops --gtest_filter="$H" > $R/shard_$i.log 2>&1 &
done
timeout 60 $B/test_backend_ops_bug --gtest_filter='*KvWriteAndPagedAttention/cuda' > $R/bug.log 2>&1 &
timeout 90 $B/test_cuda_backend > $R/cb.log 2>&1 &
timeout 90 $SAN --tool memcheck --kernel-name kns=attention_decode_staged --error-exitcode 3 $B/test_backend_ops --gtest_filter='*KvWriteAndPagedAttention/cuda' > $R/memcheck.log 2>&1 &
wait
for i in 0 1 2 3; do verdict "harness shard $i" $R/shard_$i.log; done
verdict "planted bug (expect FAILED)" $R/bug.log
verdict "test_cuda_backend" $R/cb.log
verdict "memcheck" $R/memcheck.log
echo "correctness done t=${SECONDS}s" | tee -a $T
A="--model $M --dummy-weights --device cuda --kv-dtype bf16"
for r in 1 2 3; do
  for v in old new; do
    step "ab $v round $r" 60 $L $B/step_bench_$v $A --prefill 16 --batch 64,256 --context 512 --decode-steps 32 --repeats 3 --json $R/json/ab_${v}_$r.json
  done
done
KM=gpu__time_duration.sum,dram__bytes_read.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active
for v in old new; do
  step "ncu attention $v" 60 $L $NCU --profile-from-start off --clock-control none -k regex:attention_decode --metrics $KM --csv --page raw --log-file $R/ncu_attn_$v.csv $B/step_bench_$v $A --prefill 16 --batch 64,256 --context 512 --decode-steps 4 --repeats 1 --profile-step
done
MET=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__block_size,sm__throughput.avg.pct_of_peak_sustained_elapsed
for b in 256 64; do
  step "ncu decode b$b" 70 $L $NCU --profile-from-start off --clock-control none --metrics $MET --csv --page raw --log-file $R/ncu_b$b.csv $B/step_bench_new $A --prefill 16 --batch $b --context 512 --decode-steps 4 --repeats 1 --profile-step
done
step "ncu prefill 2048" 70 $L $NCU --profile-from-start off --clock-control none --metrics $MET --csv --page raw --log-file $R/ncu_p2048.csv $B/step_bench_new $A --prefill 2048 --batch 1 --context 16 --decode-steps 2 --repeats 2 --profile-step
step "defaults table (new)" 120 $L $B/step_bench_new $A --prefill 512,2048 --prefill-batch 8x512 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 3 --json $R/json/defaults_new.json
echo "all done t=${SECONDS}s" | tee -a $T
