#!/bin/bash
# run3: the encoder, and the tile widths. (After run2, on the same warm machine.)
#   1. encoder_bench ModernBERT-large 1x93, 50x93, 10x512, 64x512, alternating rounds (ROUNDS,
#      default 2) of o (defaults), g (GLU GEMM), r (residual GEMM), a (all; the q/k/v GEMM is
#      the decoder's) and p (all, ping-pong);
#   2. the tile widths forced at prefill (GLU 64 / 128, residual 128 / 256), one round.
# run(command="DEADLINE=480 bash .devcarry/lead26/run3.sh", carry=[".devcarry/lead26"])
DEADLINE=${DEADLINE:-480}
source "$(dirname "$0")/common.sh"
ROUNDS=${ROUNDS:-2}
E="$ENC --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 20 --attention-runs 0 --windowed-only"
for r in $(seq 1 $ROUNDS); do
  for v in o g r a p; do
    step "encoder $v round $r" 40 $L env $(variant_env $v) $B/encoder_bench $E --out $R/enc/${v}_$r.json
  done
done
python3 $REPO/bench/encoder_bench_ratios.py $R/enc o,a,p,g,r 2>&1 | tee -a $L $T
PT="--prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 16 --decode-steps 1 --repeats 12"
for v in to tg64 tg128 tr128 tr256; do
  case $v in
    to) X=$(variant_env o);;
    tg*) X="$(variant_env g) INFERA_CUDA_GLU_GEMM_TILE=${v#tg}";;
    tr*) X="$(variant_env r) INFERA_CUDA_RESIDUAL_GEMM_TILE=${v#tr}";;
  esac
  step "tile $v" 35 $L env $X $B/step_bench $A $PT --json $R/json/${v}_1.json
done
python3 $REPO/bench/step_bench_ratios.py $R/json to,tg64,tg128,tr128,tr256 2>&1 | tee -a $L $T
finish
