#!/bin/bash
# fa3 run 1: the wgmma prefill attention kernel (INFERA_CUDA_FLASH_WGMMA=1) on the H200:
# SASS check (HGMMA), op harness paged attention on cuda_flash_wgmma (+ cuda), kernel durations by
# ncu (1x2048, 8x512; default kernels vs wgmma), step_bench A/B in one binary alternating the
# switch (off = main's kernels), then memcheck/racecheck of the new harness target.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-230}
tar xJf bin.tar.xz; tar xJf ../shared.tar.xz -C $HERE
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
cuobjdump -sass bin/test_backend_ops | grep -oE "HGMMA[.A-Z0-9x]*" | sort | uniq -c > $OUT/sass_hgmma.txt 2>&1
cat $OUT/sass_hgmma.txt
H1="*KvWriteAndPagedAttention/cuda_flash_wgmma"; H2="*KvWriteAndPagedAttention/cuda"
bin/test_backend_ops --gtest_filter="$H2" > $OUT/harness_cuda.log 2>&1 &
step "harness attention wgmma" 60 $T bin/test_backend_ops --gtest_filter="$H1"
wait; tail -3 $OUT/harness_cuda.log >> $T
if ! grep -q "^rc 0 (harness attention wgmma" $T; then
  echo "== harness failed: no benchmarks"; tail -60 $T; exit 1; fi
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 512 --decode-steps 8 --repeats 5"
for i in 1; do
  step "sb main #$i" 25 $B env INFERA_CUDA_FLASH_WGMMA=0 bin/step_bench $A
  step "sb wgmma #$i" 25 $B env INFERA_CUDA_FLASH_WGMMA=1 bin/step_bench $A
done
NA="--model $M --dummy-weights --device cuda --kv-dtype bf16 --batch 1 --context 64 --decode-steps 1 --repeats 1"
for cfg in "0 --prefill 2048" "1 --prefill 2048" "0 --prefill-batch 8x512" "1 --prefill-batch 8x512"; do
  set -- $cfg
  step "ncu wgmma=$1 $2 $3" 40 $N env INFERA_CUDA_FLASH_WGMMA=$1 ncu --clock-control none -k regex:attention_flash --launch-count 56 --metrics gpu__time_duration.sum --csv bin/step_bench $NA $2 $3
done
step "memcheck wgmma harness" 60 $S compute-sanitizer --tool memcheck --error-exitcode 3 bin/test_backend_ops --gtest_filter="*KvWriteAndPagedAttention/cuda_flash_wgmma"
# step "racecheck wgmma harness" 60 $S compute-sanitizer --tool racecheck --error-exitcode 3 bin/test_backend_ops --gtest_filter="*KvWriteAndPagedAttention/cuda_flash_wgmma"
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|nmse|NMSE" $T | tail -30
grep -E "^(==|rc )|^prefill" $B | tail -40
python3 - $N <<'PY'
import sys, csv, io, statistics, re
cfg=None; rows={}
for line in open(sys.argv[1]):
    if line.startswith("== ncu"): cfg=line[3:].split(" (")[0]; rows[cfg]=[]; continue
    if cfg and line.startswith('"') and "gpu__time_duration" in line:
        f=next(csv.reader(io.StringIO(line)))
        try: rows[cfg].append((f[4] if len(f)>4 else "?", float(f[-1].replace(",",""))))
        except: pass
for c,v in rows.items():
    if v:
        d=[x for _,x in v]; print(f"{c}: {len(d)} launches, median {statistics.median(d):.1f}, sum {sum(d):.1f} (unit as ncu csv) kernel {v[0][0][:60]}")
PY
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^==|^rc" $S
