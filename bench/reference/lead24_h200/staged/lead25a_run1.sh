#!/bin/bash
# Staged at the end of session 24 (.devcarry/lead25a, git-ignored): slim builds at 8944cab (the
# TMA attention with queries by TMA and the persistent snake grid on).
#   1. cuda_gemm_probe --algos: every cuBLASLt heuristic algorithm of the decoder stack's GEMMs
#      (prefill 2048 / 8x512 / 512 rows, decode b256 / b64; o and down with beta 1): is the
#      heuristic's first the fastest? (o and down at 2048 rows run at 480-556 TFLOP/s in one wave
#      of 128x128 tiles, q/k/v and gate/up at 620-670: session 22's ncu.) Then the plain probe.
#   2. test_cuda_backend less the fixture tests (with TmaQueriesEqualStagedQueriesForEveryGroup:
#      the query boxes for groups 1, 4, 8, never run yet), the harness (every op on `cuda`, paged
#      attention on the TMA targets), memcheck of the TMA model tests;
#   3. the defaults table: step_bench (prefill 512 / 2048 / 8x512, decode b1 / b8 / b64 / b256 at
#      context 512) and encoder_bench (ModernBERT-large 1x93 / 50x93 / 10x512 / 64x512).
# run(command="DEADLINE=330 bash .devcarry/lead25a/run1.sh", carry=[".devcarry/lead25a"]).
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-330}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared CUDA_MODULE_LOADING=EAGER
B=$HERE/bin; R=$OUT/raw; mkdir -p $R/json
T=$OUT/tests.log; L=$OUT/bench.log
source "$HERE/../../scripts/device_run_lib.sh"
REPO=$(cd $HERE/../.. && pwd)
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "gpu: $GPU" | tee -a $T $L
step "gemm probe --algos" 60 $OUT/algos.txt $B/cuda_gemm_probe --algos
step "gemm probe" 30 $OUT/probe.txt $B/cuda_gemm_probe
FILTER='-*qwen3_micro*:*qwen3_small_untied*:CudaBackendTest.GraphReplay*:CudaBackendTest.Streamed*:CudaBackendTest.DecodeFollows*:CudaSamplingTest.Generator*:CudaDecodeStackL2.*'
timeout 120 $B/test_cuda_backend --gtest_filter="$FILTER" > $R/cuda_tests.log 2>&1
echo "rc $?" >> $R/cuda_tests.log
verdict "test_cuda_backend (no fixture tests)" $R/cuda_tests.log "TMA kernel"
timeout 120 $B/test_backend_ops --gtest_filter='*/cuda:*Paged*/cuda_flash_tma*' > $R/harness.log 2>&1
echo "rc $?" >> $R/harness.log
verdict "test_backend_ops: every op on cuda, paged attention on the TMA targets" $R/harness.log
timeout 90 $SAN --tool memcheck $B/test_cuda_backend --gtest_filter='CudaWgmmaAttention*Tma*' > $R/memcheck.log 2>&1
echo "rc $?" >> $R/memcheck.log
verdict "memcheck TMA model test" $R/memcheck.log
A="--model $M --dummy-weights --device cuda --kv-dtype bf16"
step "defaults table" 90 $L $B/step_bench $A --prefill 512,2048 --prefill-batch 8x512 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 12 --json $R/json/defaults.json
step "encoder defaults" 60 $L $B/encoder_bench --device cuda --config $REPO/bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 30 --attention-runs 0 --windowed-only --out $R/json/enc_defaults.json
grep -E "tok/s|forward .*median" $L | tail -30 >> $T
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
