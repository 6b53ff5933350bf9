#!/bin/bash
# run4: where the time goes, and the defaults table. (After run3, on the same warm machine.)
#   1. per-kernel device time (INFERA_CUDA_PROFILE=1, eager) of prefill 1x2048 / 8x512 and of
#      ModernBERT-large 1x93 / 64x512, o against VARIANT (default p): glu_gemm against
#      cublas_gemm_pair_bf16 + swiglu_bf16 / geglu_bf16, qkv_gemm against cublas_gemm_qkv +
#      qk_norm_rope_kv, residual_gemm against cublas_gemm_*_residual;
#   2. the defaults table (step_bench and encoder_bench) with DEFAULTS="<variant env>" (the
#      switches runs 2 and 3 found faster; none by default).
# run(command="VARIANT=p DEFAULTS='' DEADLINE=400 bash .devcarry/lead26/run4.sh", carry=[".devcarry/lead26"])
DEADLINE=${DEADLINE:-400}
source "$(dirname "$0")/common.sh"
for v in o ${VARIANT:-p}; do
  step "profile $v prefill" 50 $R/profile_$v.log env INFERA_CUDA_PROFILE=1 $(variant_env $v) $B/step_bench $A --prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 16 --decode-steps 1 --repeats 3
  step "profile $v encoder" 50 $R/profile_enc_$v.log env INFERA_CUDA_PROFILE=1 $(variant_env $v) $B/encoder_bench $ENC --batch 1x93 --batch 64x512 --runs 3 --attention-runs 0 --windowed-only --profile
  echo "== profile $v" >> $T
  grep -E "^  \[|profile of|gemm|glu|qk_norm|residual" $R/profile_$v.log $R/profile_enc_$v.log | head -80 >> $T
done
step "defaults table (${DEFAULTS:-none})" 90 $L env $DEFAULTS $B/step_bench $A --prefill 512,2048 --prefill-batch 8x512 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 12 --json $R/json/defaults.json
step "encoder defaults (${DEFAULTS:-none})" 60 $L env $DEFAULTS $B/encoder_bench $ENC --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 30 --attention-runs 0 --windowed-only --out $R/enc/defaults.json
grep -E "tok/s|forward .*median" $L | tail -30 >> $T
finish
