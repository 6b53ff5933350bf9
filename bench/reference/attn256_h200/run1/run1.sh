#!/bin/bash
# attn256 run 1: the tensor-core decode attention (INFERA_CUDA_DECODE_MMA, on by default in this
# binary). Correctness first (op harness on every CUDA target, each kernel shape on `cuda`, the
# planted bug, test_cuda_backend (its fixture tests skip: the fixtures do not fit the 64 MiB
# carry), memcheck + racecheck of the new kernel), then timings with nothing else on the GPU: a shape sweep (b64/b256), ncu of the
# decode attention old vs new, and step_bench against main's binary, alternating, 3 rounds.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-130}
tar xJf bin.tar.xz; tar xJf shared.tar.xz  # bin/, shared/models/qwen3-0.6b (config only)
export LD_LIBRARY_PATH=$HERE/lib:$HERE/bin:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
B=$HERE/bin
T=$OUT/tests.log; L=$OUT/bench.log; N=$OUT/ncu.log; S=$OUT/sanitizer.log
R=/tmp/raw; mkdir -p $R  # per-process logs, packed into $OUT/raw.tar.xz at the end
left() { echo $((DEADLINE - SECONDS)); }
step() {
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 5 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
verdict() {  # name log: gtest verdict lines of a log
  echo "== $1" >> $T; grep -E "^\[  (FAILED|PASSED)  \]|tests ran|Failure|over the bound|worst NMSE" $2 | grep -v "cpu" | tail -40 >> $T
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt 2>&1
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
H='*KvWriteAndPagedAttention/cuda*'
# --- correctness, in parallel (GPU shared; nothing here is timed)
for i in 0 1 2 3 4 5 6 7; do
  GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout 50 $B/test_backend_ops --gtest_filter="$H" > $R/shard_$i.log 2>&1 &
done
for c in 1 2 4 5 6; do  # config 3 = the default, run by the shards
  INFERA_CUDA_DECODE_MMA_CONFIG=$c timeout 50 $B/test_backend_ops --gtest_filter='*KvWriteAndPagedAttention/cuda' > $R/cfg_$c.log 2>&1 &
done
timeout 50 $B/test_backend_ops_bug --gtest_filter='*KvWriteAndPagedAttention/cuda' > $R/bug.log 2>&1 &
timeout 50 $B/test_cuda_backend > $R/cb.log 2>&1 &
timeout 50 compute-sanitizer --tool memcheck --kernel-name kns=attention_decode_mma --error-exitcode 3 $B/test_backend_ops --gtest_filter='*KvWriteAndPagedAttention/cuda' > $R/memcheck.log 2>&1 &
timeout 50 compute-sanitizer --tool racecheck --kernel-name kns=attention_decode_mma --error-exitcode 3 $B/test_backend_ops --gtest_filter='*KvWriteAndPagedAttention/cuda' > $R/racecheck.log 2>&1 &
wait
for i in 0 1 2 3 4 5 6 7; do verdict "harness shard $i" $R/shard_$i.log; done
for c in 1 2 4 5 6; do verdict "harness cuda, INFERA_CUDA_DECODE_MMA_CONFIG=$c" $R/cfg_$c.log; done
verdict "planted bug (expect FAILED)" $R/bug.log
verdict "test_cuda_backend" $R/cb.log; grep -E "^\[ +(OK|SKIPPED|FAILED) +\]" $R/cb.log >> $T
for f in memcheck racecheck; do echo "== $f" >> $S; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Invalid|hazard|PASSED|FAILED" $R/$f.log | head -20 >> $S; done
echo "correctness done t=${SECONDS}s" | tee -a $T
# --- timings: the kernel shape sweep (b64, b256)
SW="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512 --batch 64,256 --context 512 --decode-steps 16 --repeats 3"
for c in 3 2 6 1; do
  step "sweep cfg=$c" 20 $L env INFERA_CUDA_DECODE_MMA_CONFIG=$c $B/step_bench $SW
done
BEST=$(python3 - $L <<'PY'
import sys, re, math
cfg=None; r={}
for line in open(sys.argv[1]):
    m=re.match(r"== sweep cfg=(\d+)", line)
    if m: cfg=m.group(1); continue
    m=re.match(r"decode batch\s+(\d+) \(greedy ids to host\):.*?([\d.]+) tok/s", line)
    if m and cfg: r.setdefault(cfg,{})[m.group(1)]=float(m.group(2))
best=max(r, key=lambda c: math.log(r[c].get("64",1))+math.log(r[c].get("256",1)))
print(best)
PY
)
echo "best cfg $BEST" | tee -a $L
# --- end to end: main's binary vs this one (best shape), alternating, 3 rounds
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 5"
for i in 1 2 3; do
  step "ab main #$i" 25 $L $B/step_bench_main $A
  step "ab new #$i" 25 $L env INFERA_CUDA_DECODE_MMA_CONFIG=$BEST $B/step_bench $A
done
# --- ncu: the decode attention, old (staged) vs new, b64 and b256, 8 layers of one step
NA="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512 --context 512 --decode-steps 2 --repeats 1 --profile-step"
MET=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,smsp__issue_active.avg.pct_of_peak_sustained_active
for bsz in 64 256; do
  step "ncu old b$bsz" 25 $N env INFERA_CUDA_DECODE_MMA=0 ncu --clock-control none --profile-from-start off -k regex:attention_decode -c 4 --metrics $MET --csv --print-units base $B/step_bench $NA --batch $bsz
  step "ncu new b$bsz" 25 $N env INFERA_CUDA_DECODE_MMA_CONFIG=$BEST ncu --clock-control none --profile-from-start off -k regex:attention_decode -c 4 --metrics $MET --csv --print-units base $B/step_bench $NA --batch $bsz
done
# --- the same binary with the staged kernel (INFERA_CUDA_DECODE_MMA=0), if time is left
for i in 1; do
  step "ab staged #$i" 25 $L env INFERA_CUDA_DECODE_MMA=0 $B/step_bench $A
done
tar -C /tmp -cJf $OUT/raw.tar.xz raw
echo "== summary (t=${SECONDS}s)"
grep -E "^==|PASSED|FAILED|Failure|over the bound|done" $T | tail -70
cat $S
python3 - $N <<'PY'
import sys, csv, io, statistics, collections
cfg=None; rows=collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    if line.startswith("== ncu"): cfg=line[7:].split(" (")[0]; continue
    if cfg and line.startswith('"') and not line.startswith('"ID"'):
        f=next(csv.reader(io.StringIO(line)))
        try: rows[cfg][f[-3]].append(float(f[-1].replace(",","")))
        except Exception: pass
for c,v in rows.items():
    print(c, "  ".join(f"{k}={statistics.median(x):.4g}" for k,x in v.items()))
PY
python3 - $L <<'PY'
import sys, re, collections
tag=None; r=collections.defaultdict(dict)
for line in open(sys.argv[1]):
    m=re.match(r"== (sweep cfg=\d+|ab \w+ #\d)", line)
    if m: tag=m.group(1); continue
    m=re.match(r"decode batch\s+(\d+) \(greedy ids to host\): median step\s+([\d.]+) ms\s+(\d+) tok/s", line)
    if m and tag: r[tag][int(m.group(1))]=int(m.group(3))
for t,v in r.items(): print(t, v)
for i in (1,2,3):
    a=r.get(f"ab main #{i}",{}); b=r.get(f"ab new #{i}",{}); c=r.get(f"ab staged #{i}",{})
    print(f"round {i} new/main", {k: round(b[k]/a[k],3) for k in a if k in b}, " new/staged", {k: round(b[k]/c[k],3) for k in c if k in b})
PY
