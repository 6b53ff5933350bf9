#!/bin/bash
# fa3 run 2: the wgmma prefill attention with both tile shapes (64 vectors + key halves split
# between the warpgroups; 128 vectors) and the block ids fetched a tile ahead. Correctness
# (harness on cuda_flash_wgmma / cuda_flash_wgmma128, the model-level wgmma tests, the Qwen3-shape
# shadow tests with the switch on), per-launch kernel times by ncu on one warm step of each prefill
# case (default kernels vs wgmma auto/64/128), one ncu detail of the 2048 launch, step_bench A/B
# (3 rounds, one binary, the switch), memcheck + racecheck of the harness targets, test_model.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-200}
tar xJf bin.tar.xz; tar xJf ../shared.tar.xz -C $HERE
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log; N=$OUT/ncu.log; S=$OUT/sanitizer.log; D=$OUT/ncu_detail.log
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
H="*KvWriteAndPagedAttention/cuda_flash_wgmma"
bin/test_backend_ops --gtest_filter="${H}128" > $OUT/harness128.log 2>&1 &
step "harness attention wgmma (auto: 64-vector split here)" 60 $T bin/test_backend_ops --gtest_filter="$H"
wait; echo "== harness attention wgmma128" >> $T; cat $OUT/harness128.log >> $T
step "cuda backend wgmma + shadow tests, switch on" 60 $T env INFERA_CUDA_FLASH_WGMMA=1 bin/test_cuda_backend --gtest_filter='*Wgmma*:*Shadow*'
if grep -q "FAILED\|Failure" $T; then echo "== tests failed: no benchmarks"; tail -80 $T; exit 1; fi
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 512 --decode-steps 8 --repeats 5"
for i in 1 2 3; do
  step "sb main #$i" 25 $B env INFERA_CUDA_FLASH_WGMMA=0 bin/step_bench $A
  step "sb wgmma #$i" 25 $B env INFERA_CUDA_FLASH_WGMMA=1 bin/step_bench $A
done
NA="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 64 --decode-steps 1 --repeats 1 --profile-step"
for cfg in "0 0" "1 0" "1 64" "1 128"; do
  set -- $cfg
  step "ncu wgmma=$1 vectors=$2" 40 $N env INFERA_CUDA_FLASH_WGMMA=$1 INFERA_CUDA_FLASH_WGMMA_VECTORS=$2 ncu --clock-control none --profile-from-start off -k regex:attention_flash --metrics gpu__time_duration.sum --csv bin/step_bench $NA
done
step "ncu detail wgmma 2048" 40 $D env INFERA_CUDA_FLASH_WGMMA=1 ncu --clock-control none --profile-from-start off -k regex:wgmma --launch-skip 13 --launch-count 1 --set full bin/step_bench --model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 2048 --batch 1 --context 64 --decode-steps 1 --repeats 1 --profile-step
step "memcheck wgmma harness" 40 $S compute-sanitizer --tool memcheck --error-exitcode 3 bin/test_backend_ops --gtest_filter="$H:${H}128"
step "racecheck wgmma harness" 60 $S compute-sanitizer --tool racecheck --error-exitcode 3 bin/test_backend_ops --gtest_filter="$H:${H}128"
step "model tests cuda, switch on" 30 $T env INFERA_TEST_DEVICE=cuda INFERA_CUDA_FLASH_WGMMA=1 bin/test_model
echo "== summary (t=${SECONDS}s)"
cat $OUT/sass_hgmma.txt
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|worst NMSE" $T | tail -30
grep -E "^(==|rc )|^prefill.*tok/s" $B | tail -40
python3 - $N <<'PY'
import sys, csv, io, statistics, collections
cfg=None; rows=collections.defaultdict(lambda: collections.defaultdict(lambda: collections.defaultdict(list)))
for line in open(sys.argv[1]):
    if line.startswith("== ncu"): cfg=line[7:].split(" (")[0]; continue
    if cfg and line.startswith('"') and not line.startswith('"ID"'):
        f=next(csv.reader(io.StringIO(line)))
        try: rows[cfg][(f[4].split("<")[0].split("::")[-1][:32], f[8])][f[12]].append(float(f[-1].replace(",","")))
        except Exception: pass
for c,v in rows.items():
    for k,m in v.items():
        print(c, k, " ".join(f"{n.split('__')[1][:18]}={statistics.median(x):.1f}(n{len(x)})" for n,x in m.items()))
PY
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|L2 Hit Rate|Block Limit" $D | head -30
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^==|^rc" $S
