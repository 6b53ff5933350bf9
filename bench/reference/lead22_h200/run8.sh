#!/bin/bash
# Session 22 lead, run 8 (staged in .devcarry/lead22r8): add_rmsnorm a warp per row for 64 rows
# or more (CudaOptions::norm_warp_rows, INFERA_CUDA_NORM_WARP_ROWS; the same bits as the block
# kernel). Correctness (test_cuda_backend less its fixture tests, with CudaGemmStackTest's
# bit-for-bit check against the block kernel; the op harness's cuda targets; memcheck), then
# prefill 1x2048 / 8x512 (eager module loading, 12 repeats, 4 rounds) and decode b64 / b256
# (3 rounds) with it off / on alternating, and ncu of the norm kernels at 1x2048 both ways.
# Stage (repository root): build/slim at the commit, step_bench test_cuda_backend
# test_backend_ops stripped, `tar -cf - bin | xz -9e`; lib/ and shared.tar.xz as run 1.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-230}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared CUDA_MODULE_LOADING=EAGER
B=$HERE/bin; R=$OUT/raw; mkdir -p $R/json
T=$OUT/tests.log; L=$OUT/bench.log
source "$HERE/../../scripts/device_run_lib.sh"
REPO=$(cd $HERE/../.. && pwd)
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "gpu: $GPU" | tee -a $T $L
for i in 0 1 2; do
  GTEST_TOTAL_SHARDS=3 GTEST_SHARD_INDEX=$i timeout 100 $B/test_backend_ops --gtest_filter='*/cuda*' > $R/shard_$i.log 2>&1 &
done
timeout 120 $B/test_cuda_backend --gtest_filter='-*qwen3_micro*:*qwen3_small_untied*:CudaBackendTest.GraphReplay*:CudaBackendTest.Streamed*:CudaBackendTest.DecodeFollows*:CudaSamplingTest.Generator*:CudaDecodeStackL2.*' > $R/cb.log 2>&1 &
timeout 120 $SAN --tool memcheck --error-exitcode 3 $B/test_cuda_backend --gtest_filter='*GemmStack*0_6b*' > $R/memcheck.log 2>&1 &
wait
for i in 0 1 2; do verdict "harness shard $i" $R/shard_$i.log; done
verdict "test_cuda_backend (less the fixture tests)" $R/cb.log "stream MLP|q/k/v apart"
verdict "memcheck gemm stack" $R/memcheck.log
echo "correctness done t=${SECONDS}s" | tee -a $T
A="--model $M --dummy-weights --device cuda --kv-dtype bf16"
for r in 1 2 3 4; do
  for v in 0 1; do
    step "prefill norm warp rows=$v round $r" 40 $L env INFERA_CUDA_NORM_WARP_ROWS=$v $B/step_bench $A --prefill 2048 --prefill-batch 8x512 --batch 1 --context 16 --decode-steps 4 --repeats 12 --json $R/json/pn${v}_$r.json
  done
done
python3 $REPO/bench/reference/lead13_h200/ab_ratios.py $R/json pn0,pn1 2>&1 | tee -a $L
for r in 1 2 3; do
  for v in 0 1; do
    step "decode norm warp rows=$v round $r" 40 $L env INFERA_CUDA_NORM_WARP_ROWS=$v $B/step_bench $A --prefill 16 --batch 64,256 --context 512 --decode-steps 32 --repeats 3 --json $R/json/dn${v}_$r.json
  done
done
python3 $REPO/bench/reference/lead13_h200/ab_ratios.py $R/json dn0,dn1 2>&1 | tee -a $L
for v in 0 1; do
  step "ncu norms 1x2048 warp rows=$v" 40 $L env INFERA_CUDA_NORM_WARP_ROWS=$v $NCU --profile-from-start off --clock-control none -k regex:rmsnorm --launch-count 12 --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv --page raw --log-file $R/ncu_norm$v.csv $B/step_bench $A --prefill 2048 --batch 1 --context 16 --decode-steps 2 --repeats 1 --profile-step
done
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
