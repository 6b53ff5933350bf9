#!/bin/bash
# b1fuse run 1: the batch-1 chain without add_rmsnorm kernels (INFERA_CUDA_B1_FUSE, on by
# default). The tree only leaves ~13 MB for the carry: step_bench, test_backend_ops,
# (no test_cuda_backend/test_model/test_engine, no fixtures: they did not fit); the baseline is B1_FUSE=0 (main's kernel
# sequence) in the same binary, not main's binary. Tests in parallel (harness new cases + GEMV cases on cuda/cuda_exact/cuda_b1, the
# planted-bug binary, test_cuda_backend, test_model cuda and cuda-exact, test_engine cuda),
# memcheck of the new ops' harness cases; then step_bench alone on the GPU: main's binary, the
# branch (default), the branch + FUSE_QK, 3 alternating rounds, and B1_FUSE=0 once; ncu of one b1
# step with the chain on and off.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-285}
tar xJf all.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
cd $HERE/../..; export INFERA_SOURCE_DIR=$PWD; cd $HERE
B=$HERE/bin
T=$OUT/tests.log; L=$OUT/bench.log; N=$OUT/ncu.log; S=$OUT/sanitizer.log
left() { echo $((DEADLINE - SECONDS)); }
step() {
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 5 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt 2>&1
HF='*ChainFusedOps*/cuda:*ChainFusedOps*/cuda_exact:*ChainFusedOps*/cuda_b1:*ChainFusedOps*/cuda_stream:*ResidualMlpOps*/cuda*:*Matmul*/cuda:*Matmul*/cuda_exact:*Matmul*/cuda_b1:*FusedOps*/cuda:*FusedOps*/cuda_b1'
( timeout 60 env INFERA_CUDA_B1_FUSE=1 $B/test_backend_ops --gtest_filter="$HF" > $OUT/h.log 2>&1; echo "rc $?" >> $OUT/h.log ) &
( timeout 60 env INFERA_CUDA_B1_FUSE=1 compute-sanitizer --tool memcheck --error-exitcode 3 $B/test_backend_ops --gtest_filter='*ChainFusedOps*/cuda' > $S 2>&1; echo "rc $?" >> $S ) &
wait
for f in h; do echo "== $f" >> $T; grep -E "^\[  (FAILED|PASSED)  \]|tests ran|Failure|over the bound|^rc |fused vs|worst" $OUT/$f.log | head -40 >> $T; done
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --batch 1,8 --context 512 --decode-steps 64 --repeats 3"
for i in 1 2 3; do
  step "sb off #$i" 20 $L env INFERA_CUDA_B1_FUSE=0 $B/step_bench $A
  step "sb new #$i" 20 $L env INFERA_CUDA_B1_FUSE=1 $B/step_bench $A
done
step "sb new+fuseqk #1" 20 $L env INFERA_CUDA_B1_FUSE=1 INFERA_CUDA_FUSE_QK=1 $B/step_bench $A
NA="--model $M --dummy-weights --device cuda --kv-dtype bf16 --batch 1 --context 512 --decode-steps 4 --repeats 1 --profile-step"
for v in 1; do
  step "ncu B1_FUSE=$v" 30 $N env INFERA_CUDA_B1_FUSE=$v ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv $B/step_bench $NA
done
xz -9 $N
(cd $OUT && tar cJf logs.tar.xz h.log && rm -f h.log)
echo "== summary (t=${SECONDS}s)"
cat $T | grep -v "^\[  PASSED" | tail -60
grep -E "ERROR SUMMARY|^rc" $S
grep -E "^(==|rc )|prefill  |decode batch.*greedy" $L | tail -60
