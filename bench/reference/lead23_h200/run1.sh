#!/bin/bash
# Session 23, run 1: chunked replay (CudaOptions::replay_chunks, INFERA_CUDA_REPLAY_CHUNKS).
#   1. test_cuda_backend less its fixture tests (chunks on by default in this build), with the
#      new CudaReplayChunks test;
#   2. encoder_bench A/B, chunks 0 / 1 alternating, ROUNDS rounds (ModernBERT-large shape);
#   3. step_bench A/B, chunks 0 / 1 alternating, ROUNDS rounds (prefill with --repeats 12: also
#      the check of a770f4d's reused-cache prefill: "(N captured)"), and one --repeats 3 run.
# run(command="DEADLINE=470 bash .devcarry/lead23c/run1.sh", carry=[".devcarry/lead23c"]).
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-470}
ROUNDS=${ROUNDS:-3}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared CUDA_MODULE_LOADING=EAGER
B=$HERE/bin; R=$OUT/raw; mkdir -p $R/json
T=$OUT/tests.log; L=$OUT/bench.log
source "$HERE/../../scripts/device_run_lib.sh"
REPO=$(cd $HERE/../.. && pwd)
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.txt 2>&1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "gpu: $GPU" | tee -a $T $L
timeout 120 $B/test_cuda_backend --gtest_filter='CudaReplay*' > $R/chunks.log 2>&1
verdict "CudaReplayChunks" $R/chunks.log "whole steps|chunked"
timeout 170 $B/test_cuda_backend --gtest_filter='-CudaReplay*:*qwen3_micro*:*qwen3_small_untied*:CudaBackendTest.GraphReplay*:CudaBackendTest.Streamed*:CudaBackendTest.DecodeFollows*:CudaSamplingTest.Generator*:CudaDecodeStackL2.*' > $R/cb.log 2>&1
verdict "test_cuda_backend (less the fixture tests), chunks on" $R/cb.log
E="--device cuda --config $REPO/bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 30 --attention-runs 0 --windowed-only"
for r in $(seq 1 $ROUNDS); do
  for v in 0 1; do
    step "encoder chunks=$v round $r" 60 $L env INFERA_CUDA_REPLAY_CHUNKS=$v $B/encoder_bench $E --out $R/json/enc_c${v}_$r.json
  done
done
A="--model $M --dummy-weights --device cuda --kv-dtype bf16"
for r in $(seq 1 $ROUNDS); do
  for v in 0 1; do
    step "step chunks=$v round $r" 60 $L env INFERA_CUDA_REPLAY_CHUNKS=$v $B/step_bench $A --prefill 512,2048 --prefill-batch 8x512 --batch 1,64,256 --context 512 --decode-steps 32 --repeats 12 --json $R/json/c${v}_$r.json
  done
done
python3 $REPO/bench/step_bench_ratios.py $R/json c0,c1 2>&1 | tee -a $L
step "prefill repeats 3 (chunks on)" 60 $L $B/step_bench $A --prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 16 --decode-steps 4 --repeats 3 --json $R/json/prefill_r3.json
grep -E "prefill .*(tok/s|captured)|forward .*(median|host)" $L | tail -60 >> $T
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
