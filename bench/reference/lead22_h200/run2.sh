#!/bin/bash
# Session 22 lead, run 2 (staged in .devcarry/lead22r2): the GEMM stack's MLP on the stream GEMM
# (CudaOptions::gemm_stack_stream_mlp_max_rows: gate/up + SwiGLU in one launch, the down
# projection adding into the residual in its epilogue; off by default), a clean prefill A/B of
# run 1's q/k/v as one GEMM (eager module loading, 12 repeats), ncu of the first layers of one
# warm b64 step, and, on an H200 only, session 20's fewer-instruction decode attention A/B
# (step_bench with INFERA_CUDA_GEMM_STACK_QKV_ONE=0 against step_bench_att: run 1's tree, the
# patch applied).
# Stage (repository root): build/slim at the commit, step_bench test_cuda_backend
# test_backend_ops stripped, step_bench_att from .devcarry/lead22r1, `tar -cf - bin | xz -9e`;
# lib/ and shared.tar.xz (qwen3-0.6b configs) as run 1.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-540}
ROUNDS=${ROUNDS:-5}
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
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.txt 2>&1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "gpu: $GPU" | tee -a $T $L
for i in 0 1; do
  GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$i timeout 150 $B/test_backend_ops --gtest_filter='*Matmul*/cuda*:*Fused*/cuda*' > $R/shard_$i.log 2>&1 &
done
timeout 200 $B/test_cuda_backend --gtest_filter='-*qwen3_micro*:*qwen3_small_untied*:CudaBackendTest.GraphReplay*:CudaBackendTest.Streamed*:CudaBackendTest.DecodeFollows*:CudaSamplingTest.Generator*:CudaDecodeStackL2.*' > $R/cb.log 2>&1 &
timeout 200 $SAN --tool memcheck --error-exitcode 3 $B/test_cuda_backend --gtest_filter='*GemmStack*0_6b*' > $R/memcheck.log 2>&1 &
wait
for i in 0 1; do verdict "harness shard $i" $R/shard_$i.log; done
verdict "test_cuda_backend (less the fixture tests)" $R/cb.log "stream MLP"
verdict "memcheck gemm stack" $R/memcheck.log
echo "correctness done t=${SECONDS}s" | tee -a $T
A="--model $M --dummy-weights --device cuda --kv-dtype bf16"
for r in $(seq 1 $ROUNDS); do
  for v in 0 128; do
    step "stream mlp=$v round $r" 60 $L env INFERA_CUDA_GEMM_STACK_STREAM_MLP=$v $B/step_bench $A --prefill 16 --batch 64,128 --context 512 --decode-steps 32 --repeats 3 --json $R/json/mlp${v}_$r.json
  done
done
python3 $REPO/bench/reference/lead13_h200/ab_ratios.py $R/json mlp0,mlp128 2>&1 | tee -a $L
for r in $(seq 1 4); do
  for v in 0 1; do
    step "prefill qkv one=$v round $r" 60 $L env INFERA_CUDA_GEMM_STACK_QKV_ONE=$v $B/step_bench $A --prefill 2048 --prefill-batch 8x512 --batch 1 --context 16 --decode-steps 4 --repeats 12 --json $R/json/pqkv${v}_$r.json
  done
done
python3 $REPO/bench/reference/lead13_h200/ab_ratios.py $R/json pqkv0,pqkv1 2>&1 | tee -a $L
if echo "$GPU" | grep -q H200; then
  for r in $(seq 1 $ROUNDS); do
    for v in old new; do
      if [ $v = old ]; then S="env INFERA_CUDA_GEMM_STACK_QKV_ONE=0 $B/step_bench"; else S=$B/step_bench_att; fi
      step "attention $v round $r" 60 $L $S $A --prefill 16 --batch 64,256 --context 512 --decode-steps 32 --repeats 3 --json $R/json/att_${v}_$r.json
    done
  done
  python3 $REPO/bench/reference/lead13_h200/ab_ratios.py $R/json att_old,att_new 2>&1 | tee -a $L
fi
MET=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
for v in 0 128; do
  step "ncu b64 stream mlp=$v" 90 $L env INFERA_CUDA_GEMM_STACK_STREAM_MLP=$v $NCU --profile-from-start off --clock-control none --launch-count 80 --metrics $MET --csv --page raw --log-file $R/ncu_b64_mlp$v.csv $B/step_bench $A --prefill 16 --batch 64 --context 512 --decode-steps 4 --repeats 1 --profile-step
done
step "defaults table" 120 $L $B/step_bench $A --prefill 512,2048 --prefill-batch 8x512 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 3 --json $R/json/defaults.json
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
