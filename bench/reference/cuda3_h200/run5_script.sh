#!/bin/bash
# Session tooling (not part of the repo): cuda3 device run 5 = the final code (+ streaming, qk-norm registers): the whole GPU test
# set, compute-sanitizer memcheck + racecheck, same-binary A/B of step_bench, ncu kernel times.
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-380}
for t in bin.tar.xz shared.tar.xz; do
  tar xJf $t 2>/dev/null || python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall()" $t
done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
NCU=/usr/local/cuda/bin/ncu
T=$OUT/tests.log; B=$OUT/bench.log; S=$OUT/sanitizer.log; P=$OUT/ncu.log
left() { echo $((DEADLINE - SECONDS)); }
step() {  # step NAME SECONDS LOG cmd...
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 10 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee -a $T
M="--model shared/models/qwen3-0.6b --dummy-weights --device cuda --kv-dtype bf16"
SB="bin/step_bench $M --prefill 512,2048 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 5"
OLD="INFERA_CUDA_PDL=0 INFERA_CUDA_FLASH=0 INFERA_CUDA_DECODE_SPLIT_KEYS=128 INFERA_CUDA_DECODE_PIPELINE=0 INFERA_CUDA_STREAM=0"
step "op harness cuda+cuda_exact" 90 $T bin/test_backend_ops --gtest_filter='*/cuda:*/cuda_exact'
step "cuda backend tests" 25 $T bin/test_cuda_backend
for dev in cuda cuda-exact; do
  step "model tests $dev" 50 $T env INFERA_TEST_DEVICE=$dev bin/test_model --gtest_filter='Fixtures/*:*BatchParity*:*Qwen3Weights*:*ModernBertMicro*'
  step "engine tests $dev" 30 $T env INFERA_TEST_DEVICE=$dev bin/test_engine --gtest_filter='*GeneratorTest*:*ForwardArgmax*'
done
for i in 1 2; do
  step "bench old #$i" 30 $B env $OLD $SB --json $OUT/sb_old$i.json
  step "bench new #$i" 30 $B $SB --json $OUT/sb_new$i.json
done
step "bench new, STREAM=0" 30 $B env INFERA_CUDA_STREAM=0 $SB
step "ncu qk_norm prefill 2048" 30 $P $NCU --clock-control none --cache-control none -k regex:qk_norm --launch-skip 28 --launch-count 28 --metrics gpu__time_duration.sum --csv --page raw --log-file $OUT/ncu_qk.csv bin/step_bench $M --prefill 2048 --batch 1 --context 16 --decode-steps 1 --repeats 1
step "memcheck harness cuda (fused, attention) + cuda backend" 70 $S sh -c "compute-sanitizer --tool memcheck --error-exitcode 3 bin/test_backend_ops --gtest_filter='*FusedOps.*/cuda:*OpHarness.KvWriteAndPagedAttention/cuda' && compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 bin/test_cuda_backend"
step "racecheck harness cuda (attention, qk-norm)" 40 $S compute-sanitizer --tool racecheck --error-exitcode 3 bin/test_backend_ops --gtest_filter='*OpHarness.KvWriteAndPagedAttention/cuda:*FusedOps.*/cuda'
python3 - "$OUT" <<'PY' >> $B 2>&1
import json,sys,os
o=sys.argv[1]
def load(n):
    p=os.path.join(o,n)
    return json.load(open(p)) if os.path.exists(p) else None
print("== same-run A/B (new/old median tok/s)")
for i in (1,2):
    a,b=load(f"sb_old{i}.json"),load(f"sb_new{i}.json")
    if not a or not b: continue
    for pa,pb in zip(a["prefill"],b["prefill"]):
        print(f"pair {i} prefill {pa['prompt_tokens']}: old {pa['tokens_per_second']:.0f} new {pb['tokens_per_second']:.0f} x{pb['tokens_per_second']/pa['tokens_per_second']:.2f}")
    for da,db in zip(a["decode"],b["decode"]):
        ka=[k for k in da if isinstance(da[k],dict) and 'tokens_per_second' in da[k]]
        for k in ka:
            if 'greedy' not in k: continue
            x,y=da[k]['tokens_per_second'],db[k]['tokens_per_second']
            print(f"pair {i} decode b{da['batch']} {k}: old {x:.0f} new {y:.0f} x{y/x:.2f}")
PY
rm -f $OUT/sb_old2.json $OUT/sb_new2.json $OUT/sb_old3.json $OUT/sb_new3.json
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|prefill|decode batch.*greedy|^pair" $B | tail -60
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc " $S
grep -E "^(==|rc )" $P
grep -E "op harness\] cuda" $T | grep -E "attention|argmax|qk_norm|matmul" | head -12
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|Which is|tests ran" $T | tail -40
ls -la $OUT
