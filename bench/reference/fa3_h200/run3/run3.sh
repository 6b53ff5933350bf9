#!/bin/bash
# fa3 run 3: the wgmma kernel with the lean paged copies (per-thread constants hoisted, int32
# offsets, power-of-two blocks) and the rescale skipped when no row's max moved. Harness on both
# tile shapes, the model-level wgmma tests, step_bench A/B (3 rounds, one binary, the switch),
# ncu per-launch times of one warm step of each prefill case, memcheck of the harness targets.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-110}
tar xJf bin.tar.xz; tar xJf ../shared.tar.xz -C $HERE shared/models/qwen3-0.6b
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
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
bin/test_backend_ops --gtest_filter="${H}128" > $OUT/harness128.log 2>&1 &
step "harness attention wgmma (auto)" 40 $T bin/test_backend_ops --gtest_filter="$H"
wait; echo "== harness attention wgmma128" >> $T; cat $OUT/harness128.log >> $T
step "cuda backend wgmma tests" 30 $T bin/test_cuda_backend --gtest_filter='*Wgmma*'
if grep -q "FAILED\|Failure" $T; then echo "== tests failed: no benchmarks"; tail -60 $T; exit 1; fi
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 512 --decode-steps 8 --repeats 5"
for i in 1 2 3; do
  step "sb main #$i" 20 $B env INFERA_CUDA_FLASH_WGMMA=0 bin/step_bench $A
  step "sb wgmma #$i" 20 $B env INFERA_CUDA_FLASH_WGMMA=1 bin/step_bench $A
done
NA="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 64 --decode-steps 1 --repeats 1 --profile-step"
for cfg in "0 0" "1 64" "1 128"; do
  set -- $cfg
  step "ncu wgmma=$1 vectors=$2" 30 $N env INFERA_CUDA_FLASH_WGMMA=$1 INFERA_CUDA_FLASH_WGMMA_VECTORS=$2 ncu --clock-control none --profile-from-start off -k regex:attention_flash --metrics gpu__time_duration.sum --csv bin/step_bench $NA
done
step "memcheck wgmma harness" 30 $S compute-sanitizer --tool memcheck --error-exitcode 3 bin/test_backend_ops --gtest_filter="$H:${H}128"
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|worst NMSE" $T | tail -20
grep -E "^(==|rc )|^prefill.*tok/s" $B | tail -42
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
grep -E "ERROR SUMMARY|^==|^rc" $S
