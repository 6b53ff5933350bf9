#!/bin/bash
# Session 23, run 8: after the dedup (softmax_scores takes the TMA kernel's running values past 8
# column groups; warp_full_key_span shared by the flash, wgmma and TMA kernels): the attention
# kernels that changed, through the harness and the model tests, and one step_bench round.
# run(command="DEADLINE=200 bash .devcarry/lead23c/run8.sh", carry=[".devcarry/lead23c"]).
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-200}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared CUDA_MODULE_LOADING=EAGER
B=$HERE/bin; R=$OUT/raw; mkdir -p $R/json
T=$OUT/tests.log; L=$OUT/bench.log
source "$HERE/../../scripts/device_run_lib.sh"
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "gpu: $GPU" | tee -a $T $L
F='*Paged*/cuda:*Paged*/cuda_flash_split:*Paged*/cuda_interleaved:*Paged*/cuda_flash_wgmma:*Paged*/cuda_flash_wgmma128:*Paged*/cuda_flash_wgmma_pipe:*Paged*/cuda_flash_tma:*Paged*/cuda_flash_tma_pp:*Encoder*/cuda:*Encoder*/cuda_packed_wgmma128'
timeout 110 $B/test_backend_ops --gtest_filter="$F" > $R/harness.log 2>&1
verdict "harness attention targets" $R/harness.log "worst NMSE"
timeout 60 $B/test_cuda_backend --gtest_filter='CudaWgmma*:CudaEncoderStack*:CudaGemmStack*' > $R/cb.log 2>&1
verdict "test_cuda_backend wgmma / encoder / gemm stack" $R/cb.log "TMA kernel|vectors"
step "defaults prefill" 40 $L $B/step_bench --model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 16 --decode-steps 4 --repeats 12
grep -E "tok/s" $L >> $T
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
