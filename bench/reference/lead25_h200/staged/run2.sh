#!/bin/bash
# run2: are the TMA GEMMs faster in the decoder? (After run1 passed, on the same warm machine.)
# step_bench prefill 1x512, 1x2048, 8x512, 4x1024 and decode b64, b256 (context 512) in
# alternating rounds of the variants of common.sh: o (defaults), a (all three) and p (all three,
# ping-pong) ROUNDS times (default 3); g, q, r (each alone) in the first ROUNDS_EACH (default 1).
# Decision: each switch on by default (with glu_gemm_min_rows / residual_gemm_min_rows where it
# loses at decode sizes) only where it is faster in every round; else off, the numbers noted.
# run(command="DEADLINE=560 bash .devcarry/lead26/run2.sh", carry=[".devcarry/lead26"])
DEADLINE=${DEADLINE:-560}
source "$(dirname "$0")/common.sh"
ROUNDS=${ROUNDS:-3}; ROUNDS_EACH=${ROUNDS_EACH:-1}
P="--prefill 512,2048 --prefill-batch 8x512 --prefill-batch 4x1024 --batch 64,256 --context 512 --decode-steps 16 --repeats 12"
for r in $(seq 1 $ROUNDS); do
  VS="o a p"; [ $r -le $ROUNDS_EACH ] && VS="o g q r a p"
  for v in $VS; do
    step "step $v round $r" 45 $L env $(variant_env $v) $B/step_bench $A $P --json $R/json/${v}_$r.json
  done
done
python3 $REPO/bench/step_bench_ratios.py $R/json o,a,p,g,q,r 2>&1 | tee -a $L $T
finish
