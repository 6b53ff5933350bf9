#!/bin/bash
# Session 24, run D (.devcarry/lead24d, git-ignored): the commit as built (run C's candidate with
# the TMA kernel's second way in narrowed to prompts of >= 512 rows whose work items fill every SM
# twice) against HEAD's step_bench: the CUDA test suite but the fixture tests, memcheck of the
# wgmma/TMA tests, step_bench A/B 2 rounds.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-200}
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
A="--model $M --dummy-weights --device cuda --kv-dtype bf16"
FILTER='-*qwen3_micro*:*qwen3_small_untied*:CudaBackendTest.GraphReplay*:CudaBackendTest.Streamed*:CudaBackendTest.DecodeFollows*:CudaSamplingTest.Generator*:CudaDecodeStackL2.*'
timeout 120 $B/test_cuda_backend --gtest_filter="$FILTER" > $R/cuda_tests.log 2>&1
echo "rc $?" >> $R/cuda_tests.log
verdict "test_cuda_backend (no fixture tests)" $R/cuda_tests.log "TMA kernel"
timeout 60 $SAN --tool memcheck $B/test_cuda_backend --gtest_filter='CudaWgmmaAttention*Tma*' > $R/memcheck.log 2>&1
echo "rc $?" >> $R/memcheck.log
verdict "memcheck TMA test" $R/memcheck.log
P="--prefill 512,2048 --prefill-batch 8x512 --prefill-batch 4x1024 --prefill-batch 2x512 --prefill-batch 4x256 --batch 1 --context 16 --decode-steps 4 --repeats 12"
for r in 1 2; do
  step "prefill h round $r" 40 $L $B/step_bench_head $A $P --json $R/json/h_$r.json
  step "prefill n round $r" 40 $L $B/step_bench $A $P --json $R/json/n_$r.json
done
python3 $REPO/bench/step_bench_ratios.py $R/json h,n 2>&1 | tee -a $L $T
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
