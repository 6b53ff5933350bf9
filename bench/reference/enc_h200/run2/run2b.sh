#!/bin/bash
# Issue 11 enc, run 2b (speed; run 2a has the tests): encoder_bench, windowed schedule only,
# ModernBERT-large shape, 5 variants of one binary alternating, 3 rounds: mma (the default, main's
# path: the mma.sync flash kernel after the rope_stage16 launch), wgmma (INFERA_CUDA_PACKED_WGMMA=1:
# the wgmma kernel, its tile shape chosen, RoPE inside), staged (the wgmma kernel after the
# rope_stage16 launch), v64 / v128 (wgmma, RoPE inside, the tile shape forced); then eager
# per-kernel profiles of mma and wgmma.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-300}
[ -d bin ] || tar xJf bin.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
B=$HERE/bin; R=$OUT/raw; mkdir -p $R/json
L=$OUT/bench.log
source "$HERE/../../scripts/device_run_lib.sh"  # left, step, verdict (run from .devcarry/NAME/)
REPO=$(cd $HERE/../.. && pwd)  # run from .devcarry/NAME/
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
A="--device cuda --config $REPO/bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 20 --attention-runs 10 --windowed-only"
for i in 1 2 3; do
  step "mma #$i" 40 $L $B/encoder_bench $A --out $R/json/enc_mma_$i.json
  step "wgmma #$i" 40 $L env INFERA_CUDA_PACKED_WGMMA=1 $B/encoder_bench $A --out $R/json/enc_wgmma_$i.json
  step "staged #$i" 40 $L env INFERA_CUDA_PACKED_WGMMA=1 INFERA_CUDA_PACKED_ROPE_INSIDE=0 $B/encoder_bench $A --out $R/json/enc_staged_$i.json
  step "v64 #$i" 40 $L env INFERA_CUDA_PACKED_WGMMA=1 INFERA_CUDA_FLASH_WGMMA_VECTORS=64 $B/encoder_bench $A --out $R/json/enc_v64_$i.json
  step "v128 #$i" 40 $L env INFERA_CUDA_PACKED_WGMMA=1 INFERA_CUDA_FLASH_WGMMA_VECTORS=128 $B/encoder_bench $A --out $R/json/enc_v128_$i.json
done
python3 $HERE/ratios.py $R/json mma wgmma staged v64 v128 | tee $OUT/ratios.txt >> $L
P="--device cuda --config $REPO/bench/configs/modernbert-large --batch 1x93 --batch 10x512 --batch 64x512 --runs 3 --attention-runs 0 --windowed-only --profile"
step "profile mma" 40 $R/profile_mma.log env INFERA_CUDA_PROFILE=1 $B/encoder_bench $P
step "profile wgmma" 40 $R/profile_wgmma.log env INFERA_CUDA_PROFILE=1 INFERA_CUDA_PACKED_WGMMA=1 $B/encoder_bench $P
echo "all done t=${SECONDS}s" | tee -a $L
tar czf $OUT/raw_bench.tgz -C $OUT raw && rm -rf $OUT/raw
