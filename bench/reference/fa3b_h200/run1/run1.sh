#!/bin/bash
# fa3b run 1: the pipelined 64-vector wgmma loop (INFERA_CUDA_FLASH_WGMMA_PIPELINE=1). Harness on
# the new target + the existing wgmma targets (softmax_step was split in two) + the planted bug;
# model-level wgmma tests; step_bench A/B lead10 / mine default / mine pipelined, 3 rounds; ncu
# per launch; memcheck and racecheck (kernel filter wgmma) of the pipelined target.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-150}
tar xJf bin.tar.xz; tar xJf ../shared.tar.xz -C $HERE shared/models/qwen3-0.6b
export LD_LIBRARY_PATH=$HERE/../lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log; N=$OUT/ncu.log; S=$OUT/sanitizer.log
left() { echo $((DEADLINE - SECONDS)); }
step() {
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 5 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt 2>&1
H="*KvWriteAndPagedAttention/cuda_flash_wgmma"
timeout 40 bin/test_backend_ops_bug --gtest_filter="${H}_pipe" > $OUT/bug.log 2>&1 &
timeout 40 bin/test_backend_ops --gtest_filter="${H}" > $OUT/h_wgmma.log 2>&1 &
timeout 40 bin/test_backend_ops --gtest_filter="${H}128" > $OUT/h_wgmma128.log 2>&1 &
step "harness attention wgmma_pipe" 40 $T bin/test_backend_ops --gtest_filter="${H}_pipe"
wait
for f in h_wgmma h_wgmma128; do echo "== $f" >> $T; grep -E "worst NMSE|over the bound|FAILED|PASSED" $OUT/$f.log >> $T; done
echo "== planted bug (expect FAILED)" >> $T; grep -E "worst NMSE|over the bound|FAILED|PASSED" $OUT/bug.log | head -12 >> $T
step "cuda backend wgmma tests" 40 $T bin/test_cuda_backend --gtest_filter='*Wgmma*'
if grep -q "FAILED\|Failure" $OUT/h_wgmma.log $OUT/h_wgmma128.log $T; then echo "== tests failed"; fi
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 512 --decode-steps 8 --repeats 5"
for i in 1 2 3; do
  step "sb lead10 #$i" 20 $B bin/step_bench_lead10 $A
  step "sb mine #$i" 20 $B env INFERA_CUDA_FLASH_WGMMA_PIPELINE=0 bin/step_bench $A
  step "sb pipe #$i" 20 $B env INFERA_CUDA_FLASH_WGMMA_PIPELINE=1 bin/step_bench $A
done
NA="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 64 --decode-steps 1 --repeats 1 --profile-step"
for cfg in "0 0" "1 0" "0 64" "1 64"; do
  set -- $cfg
  step "ncu pipe=$1 vectors=$2" 30 $N env INFERA_CUDA_FLASH_WGMMA_PIPELINE=$1 INFERA_CUDA_FLASH_WGMMA_VECTORS=$2 ncu --clock-control none --profile-from-start off -k regex:attention_flash --metrics gpu__time_duration.sum --csv bin/step_bench $NA
done
step "memcheck wgmma_pipe harness" 30 $S compute-sanitizer --tool memcheck --error-exitcode 3 bin/test_backend_ops --gtest_filter="${H}_pipe"
step "racecheck wgmma_pipe harness" 45 $S compute-sanitizer --tool racecheck --kernel-name kns=wgmma --error-exitcode 3 bin/test_backend_ops --gtest_filter="${H}_pipe"
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|worst NMSE|NMSE .* against" $T | tail -40
grep -E "^(==|rc )|^prefill.*tok/s" $B | tail -60
python3 - $N <<'PY'
import sys, csv, io, statistics, collections
cfg=None; rows=collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    if line.startswith("== ncu"): cfg=line[7:].split(" (")[0]; continue
    if cfg and line.startswith('"') and not line.startswith('"ID"'):
        f=next(csv.reader(io.StringIO(line)))
        try: rows[cfg][(f[4].split("<")[0].split("::")[-1][:32], f[8])].append(float(f[-1].replace(",","")))
        except Exception: pass
for c,v in rows.items():
    for k,x in v.items(): print(c, k, f"median {statistics.median(x)/1000:.1f} us (n{len(x)})")
PY
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^==|^rc" $S | tail -12
