#!/bin/bash
# Session 17 lead, run 1: the encoders' packed attention on the wgmma kernel now on by default
# (CudaOptions::packed_wgmma; session 15's run 2, bench/reference/enc_h200/run2, measured it
# faster in every round and shape). The encoder / packed / wgmma CUDA tests with the new default (the stack test's fixed
# check: NMSE > 0 against mma.sync only for 64-vector tiles, the launch count exact), the op
# harness's encoder ops on every CUDA target (cuda_packed_mma keeps the mma.sync kernel tested),
# memcheck of the stack tests; then encoder_bench default against INFERA_CUDA_PACKED_WGMMA=0,
# 2 rounds; the decode stack's attention splits per kv head (INFERA_CUDA_DECODE_STACK_SPLITS
# 4 / 8 / default 16) at b1, contexts 512 and 2048, alternating; and step_bench's whole table
# with the defaults for bench/results. To stage: slim build (cmake --preset release -B build/slim
# -DINFERA_CUDA_SLIM_FATBIN=ON -DINFERA_CUDA_LINEINFO=OFF), ninja test_cuda_backend
# test_backend_ops encoder_bench step_bench, scripts/device_stage.sh .devcarry/lead17r1 <them>,
# shared.tar.xz replaced by one of shared/models/qwen3-0.6b only (the 64 MiB cap, the tracked tree ~55 MiB: no fixtures, so the CUDA suites that this change touches: encoder, packed, wgmma), this script copied in; run
# `bash .devcarry/lead17r1/run1.sh` with carry [".devcarry/lead17r1"].
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-540}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
B=$HERE/bin; R=$OUT/raw; mkdir -p $R/json
T=$OUT/tests.log; L=$OUT/bench.log
source "$HERE/../../scripts/device_run_lib.sh"  # left, step, verdict (run from .devcarry/NAME/)
REPO=$(cd $HERE/../.. && pwd)
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.txt 2>&1
step "test_cuda_backend" 150 $R/cuda.log $B/test_cuda_backend --gtest_filter='*Encoder*:*Wgmma*:*Packed*:CudaShadow*'
verdict cuda $R/cuda.log "NMSE vs .*vectors 128 batch"
step "harness encoder ops" 100 $R/harness.log $B/test_backend_ops --gtest_filter='*EncoderOps.*/cuda*'
verdict harness $R/harness.log
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
[ -n "$CS" ] && step "memcheck encoder stack" 90 $R/memcheck.log $CS --tool memcheck --error-exitcode 3 $B/test_cuda_backend --gtest_filter='*CudaEncoderStack*HiddenStates*'
[ -n "$CS" ] && verdict memcheck $R/memcheck.log
echo "correctness done t=${SECONDS}s" | tee -a $T
E="--device cuda --config $REPO/bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 20 --attention-runs 10 --windowed-only"
for i in 1 2; do
  step "enc default #$i" 40 $L $B/encoder_bench $E --out $R/json/enc_default_$i.json
  step "enc mma #$i" 40 $L env INFERA_CUDA_PACKED_WGMMA=0 $B/encoder_bench $E --out $R/json/enc_mma_$i.json
done
python3 $REPO/bench/reference/enc_h200/ratios.py $R/json mma default | tee -a $L
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --batch 1 --decode-steps 64 --repeats 5"
for c in 512 2048; do
  for i in 1 2 3; do
    for s in 16 8 4; do
      step "b1 ctx $c splits $s #$i" 25 $L env INFERA_CUDA_DECODE_STACK_SPLITS=$s $B/step_bench $A --context $c --json $R/json/s${s}c${c}_$i.json
    done
  done
  python3 $REPO/bench/reference/lead13_h200/ab_ratios.py $R/json s16c$c,s8c$c,s4c$c | tee -a $L
done
step "step_bench table" 90 $L $B/step_bench --model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1,8,64,256 --context 512 --decode-steps 64 --repeats 5 --json $R/json/step_bench_defaults.json
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
