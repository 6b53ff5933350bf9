#!/bin/bash
# Session 21 lead, run 1 (staged in .devcarry/lead21r1): session 20's staged run (the decode
# attention of bench/reference/lead20_h200/staged_fewer_instructions.patch: one block-table entry
# a tile read an issue ahead, constant copy offsets, no rescale where the max held) together with
# the encoder stack's Wi + GeGLU as one stream GEMM launch (CudaOptions::
# encoder_stream_glu_max_rows, commit cedb61c, off by default).
# Correctness first, in parallel: the op harness's paged attention on every CUDA target (4
# shards), a planted-bug harness binary (the fast path's value rows swapped pairwise: expect
# FAILED), the whole test_cuda_backend (patched; its new StreamGegluFollowsCublasPairAndCpu),
# memcheck of the attention kernel and of the stream GeGLU. Then encoder_bench 1x93 / 1x128 with
# the stream GeGLU off / on, 3 alternating rounds; step_bench b64/b256 main's binary against the
# patched one, 3 alternating rounds; ncu of the attention kernel old and new; ncu of one warm b256
# step (new); the patched binary's whole step_bench table. ~560 s.
# Stage (from the repository root): bin.tar.xz = session 20's .devcarry/lead20r2 binaries
# (step_bench_old, step_bench_new, test_backend_ops, test_backend_ops_bug) with test_cuda_backend
# and encoder_bench rebuilt in build/slim from cedb61c with the patch applied, stripped, packed
# `tar -cf - bin | xz -9e` (the 64 MiB cap: the tree is ~58.6 MiB as tar); lib/ and a
# shared.tar.xz of shared/models/qwen3-0.6b/{config,generation_config}.json as in lead20r2.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-560}  # ROUNDS (default 3): A/B rounds of each comparison
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
B=$HERE/bin; R=$OUT/raw; mkdir -p $R/json
T=$OUT/tests.log; L=$OUT/bench.log
source "$HERE/../../scripts/device_run_lib.sh"
REPO=$(cd $HERE/../.. && pwd)
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.txt 2>&1
H='*KvWriteAndPagedAttention/cuda*'
for i in 0 1 2 3; do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout 60 $B/test_backend_ops --gtest_filter="$H" > $R/shard_$i.log 2>&1 &
done
timeout 60 $B/test_backend_ops_bug --gtest_filter='*KvWriteAndPagedAttention/cuda' > $R/bug.log 2>&1 &
timeout 120 $B/test_cuda_backend > $R/cb.log 2>&1 &
timeout 90 $SAN --tool memcheck --kernel-name kns=attention_decode_staged --error-exitcode 3 $B/test_backend_ops --gtest_filter='*KvWriteAndPagedAttention/cuda' > $R/memcheck.log 2>&1 &
timeout 120 $SAN --tool memcheck --kernel-name kns=stream_gemm --error-exitcode 3 $B/test_cuda_backend --gtest_filter='*StreamGeglu*' > $R/memcheck_glu.log 2>&1 &
wait
for i in 0 1 2 3; do verdict "harness shard $i" $R/shard_$i.log; done
verdict "planted bug (expect FAILED)" $R/bug.log
verdict "test_cuda_backend" $R/cb.log "NMSE vs the cuBLAS pair"
verdict "memcheck attention" $R/memcheck.log
verdict "memcheck stream geglu" $R/memcheck_glu.log
echo "correctness done t=${SECONDS}s" | tee -a $T
E="--device cuda --config $REPO/bench/configs/modernbert-large --batch 1x93 --batch 1x128 --runs 30 --attention-runs 0 --windowed-only"
for r in $(seq 1 ${ROUNDS:-3}); do
  step "enc glu off #$r" 40 $L env INFERA_CUDA_ENCODER_STREAM_GLU=0 $B/encoder_bench $E --out $R/json/enc_off_$r.json
  step "enc glu on #$r" 40 $L env INFERA_CUDA_ENCODER_STREAM_GLU=128 $B/encoder_bench $E --out $R/json/enc_on_$r.json
done
python3 $REPO/bench/reference/enc_h200/ratios.py $R/json off on | tee -a $L
A="--model $M --dummy-weights --device cuda --kv-dtype bf16"
for r in $(seq 1 ${ROUNDS:-3}); do
  for v in old new; do
    step "ab $v round $r" 60 $L $B/step_bench_$v $A --prefill 16 --batch 64,256 --context 512 --decode-steps 32 --repeats 3 --json $R/json/ab_${v}_$r.json
  done
done
python3 $REPO/bench/reference/lead13_h200/ab_ratios.py $R/json ab_old,ab_new 2>&1 | tee -a $L
KM=gpu__time_duration.sum,dram__bytes_read.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active
for v in old new; do
  step "ncu attention $v" 60 $L $NCU --profile-from-start off --clock-control none -k regex:attention_decode --metrics $KM --csv --page raw --log-file $R/ncu_attn_$v.csv $B/step_bench_$v $A --prefill 16 --batch 64,256 --context 512 --decode-steps 4 --repeats 1 --profile-step
done
MET=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__block_size,sm__throughput.avg.pct_of_peak_sustained_elapsed
step "ncu decode b256" 70 $L $NCU --profile-from-start off --clock-control none --metrics $MET --csv --page raw --log-file $R/ncu_b256.csv $B/step_bench_new $A --prefill 16 --batch 256 --context 512 --decode-steps 4 --repeats 1 --profile-step
step "defaults table (new)" 120 $L $B/step_bench_new $A --prefill 512,2048 --prefill-batch 8x512 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 3 --json $R/json/defaults_new.json
echo "all done t=${SECONDS}s" | tee -a $T
# (Added after the run: pack raw/ into one archive, since a call returns at most ~8 files.)
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
