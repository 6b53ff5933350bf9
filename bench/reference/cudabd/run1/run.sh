#!/bin/bash
# cudabd run 1: ncu of one warm b64 and one warm b256 greedy decode step (main's kernels: this
# branch's step_bench with every new switch off), the decode GEMM probe, env-switch A/B on main's
# binary at b64/b256 plus the decode-attention bf16 shadow, and the shadow's tests.
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-225}
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log; P=$OUT/probe.log; N=$OUT/ncu.log; J=$OUT/json; mkdir -p $J
left() { echo $((DEADLINE - SECONDS)); }
step() {
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 5 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
cd $HERE/../..
export INFERA_SOURCE_DIR=$PWD
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt 2>&1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
MET=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread
for b in 64 256; do
  step "ncu b$b" 45 $N $NCU --clock-control none --cache-control none --profile-from-start off --metrics $MET --csv --page raw --log-file $OUT/ncu_b$b.csv $HERE/bin/step_bench --model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512 --repeats 1 --batch $b --context 512 --decode-steps 2 --profile-step
done
step "decode gemm probe" 30 $P $HERE/bin/cuda_decode_gemm_probe
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 7"
for i in 1 2 3; do
  step "sb main #$i" 20 $B $HERE/bin/step_bench_main $A --json $J/main_$i.json
  step "sb new shadow #$i" 20 $B env INFERA_CUDA_DECODE_SHADOW=1 $HERE/bin/step_bench $A --json $J/shadow_$i.json
  step "sb main CUBLASLT #$i" 20 $B env INFERA_CUDA_CUBLASLT=1 $HERE/bin/step_bench_main $A --json $J/lt_$i.json
  step "sb main FUSE_QK #$i" 20 $B env INFERA_CUDA_FUSE_QK=1 $HERE/bin/step_bench_main $A --json $J/fuseqk_$i.json
  step "sb main STAGES4 #$i" 20 $B env INFERA_CUDA_DECODE_STAGES=4 $HERE/bin/step_bench_main $A --json $J/stages4_$i.json
done
step "cuda shadow tests" 40 $T $HERE/bin/test_cuda_backend --gtest_filter='CudaShadowTest.*'
step "op harness attention+fused, cuda, cuda_b1" 40 $T $HERE/bin/test_backend_ops --gtest_filter='*Attention*/cuda:*Attention*/cuda_b1:*Fused*/cuda:*Fused*/cuda_b1'
for f in $OUT/ncu_b*.csv; do [ -f $f ] && xz -9 $f; done
cd $J && tar cJf $OUT/step_bench_json.tar.xz *.json; cd - >/dev/null; rm -rf $J
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|tests ran" $T | tail -20
grep -E "^(==|rc )|decode batch.*greedy" $B | tail -80
cat $P
