#!/bin/bash
# run3: the encoder and the kernels in place. (After run2, on the same warm machine.)
#   1. encoder_bench ModernBERT-large 1x93, 50x93, 10x512, 64x512, alternating rounds (ROUNDS,
#      default 2) of o (defaults), g (GLU GEMM), r (residual GEMM), a (all; the q/k/v GEMM is
#      the decoder's);
#   2. the tile widths forced at prefill (GLU 64 / 128, residual 128 / 256), one round;
#   3. per-kernel device time (INFERA_CUDA_PROFILE=1, eager) of prefill 1x2048 / 8x512 and of
#      ModernBERT-large 1x93 / 64x512, o against a: glu_gemm against cublas_gemm_pair_bf16 +
#      swiglu_bf16 / geglu_bf16, qkv_gemm against cublas_gemm_qkv + qk_norm_rope_kv,
#      residual_gemm against cublas_gemm_*_residual;
#   4. the defaults table (step_bench and encoder_bench) with DEFAULTS="<variant env>" (the
#      switches run2 found faster; none by default).
# run(command="DEFAULTS='' DEADLINE=560 bash .devcarry/lead26/run3.sh", carry=[".devcarry/lead26"])
DEADLINE=${DEADLINE:-560}
source "$(dirname "$0")/common.sh"
ROUNDS=${ROUNDS:-2}
E="$ENC --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 20 --attention-runs 0 --windowed-only"
for r in $(seq 1 $ROUNDS); do
  for v in o g r a; do
    step "encoder $v round $r" 40 $L env $(variant_env $v) $B/encoder_bench $E --out $R/enc/${v}_$r.json
  done
done
python3 $REPO/bench/encoder_bench_ratios.py $R/enc o,a,g,r 2>&1 | tee -a $L $T
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
for v in o a; do
  step "profile $v prefill" 50 $R/profile_$v.log env INFERA_CUDA_PROFILE=1 $(variant_env $v) $B/step_bench $A --prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 16 --decode-steps 1 --repeats 3
  step "profile $v encoder" 50 $R/profile_enc_$v.log env INFERA_CUDA_PROFILE=1 $(variant_env $v) $B/encoder_bench $ENC --batch 1x93 --batch 64x512 --runs 3 --attention-runs 0 --windowed-only --profile
  echo "== profile $v" >> $T
  grep -E "^  \[|profile of|gemm|glu|qk_norm|residual" $R/profile_$v.log $R/profile_enc_$v.log | head -80 >> $T
done
step "defaults table (${DEFAULTS:-none})" 90 $L env $DEFAULTS $B/step_bench $A --prefill 512,2048 --prefill-batch 8x512 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 12 --json $R/json/defaults.json
step "encoder defaults (${DEFAULTS:-none})" 60 $L env $DEFAULTS $B/encoder_bench $ENC --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 30 --attention-runs 0 --windowed-only --out $R/enc/defaults.json
grep -E "tok/s|forward .*median" $L | tail -30 >> $T
finish
