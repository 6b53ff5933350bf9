#!/bin/bash
# Session 23, run 2: the TMA prefill attention (attention_tma_wgmma.cu, CudaOptions::flash_tma).
#   1. op harness: paged attention on cuda_flash_tma (and cuda_flash_wgmma beside it);
#   2. test_cuda_backend CudaWgmmaAttention* (the model-level tests, a poisoned cache);
#   3. memcheck of the harness's TMA cases;
#   4. step_bench prefill A/B: TMA off (t0) / on (t1, default min rows) / on at every length (t2);
#   5. ncu: the attention kernels' times at 1x2048 and 8x512, both kernels.
# run(command="DEADLINE=420 bash .devcarry/lead23c/run2.sh", carry=[".devcarry/lead23c"]).
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-420}
ROUNDS=${ROUNDS:-3}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared CUDA_MODULE_LOADING=EAGER
B=$HERE/bin; R=$OUT/raw; mkdir -p $R/json
T=$OUT/tests.log; L=$OUT/bench.log
source "$HERE/../../scripts/device_run_lib.sh"
REPO=$(cd $HERE/../.. && pwd)
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "gpu: $GPU" | tee -a $T $L
timeout 120 $B/test_backend_ops --gtest_filter='*Paged*/cuda_flash_tma:*Paged*/cuda_flash_wgmma' > $R/harness.log 2>&1
verdict "harness paged attention, cuda_flash_tma + cuda_flash_wgmma" $R/harness.log "NMSE|nmse"
timeout 120 $B/test_cuda_backend --gtest_filter='CudaWgmmaAttention*' > $R/wgmma.log 2>&1
verdict "test_cuda_backend CudaWgmmaAttention*" $R/wgmma.log "NMSE"
timeout 120 $SAN --tool memcheck $B/test_backend_ops --gtest_filter='*Paged*/cuda_flash_tma' > $R/memcheck.log 2>&1
verdict "memcheck harness cuda_flash_tma" $R/memcheck.log
A="--model $M --dummy-weights --device cuda --kv-dtype bf16"
for r in $(seq 1 $ROUNDS); do
  for v in t0 t1 t2; do
    case $v in t0) E="INFERA_CUDA_FLASH_TMA=0";; t1) E="INFERA_CUDA_FLASH_TMA=1";; t2) E="INFERA_CUDA_FLASH_TMA=1 INFERA_CUDA_FLASH_TMA_MIN_ROWS=0";; esac
    step "prefill $v round $r" 60 $L env $E $B/step_bench $A --prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 16 --decode-steps 4 --repeats 12 --json $R/json/${v}_$r.json
  done
done
python3 $REPO/bench/step_bench_ratios.py $R/json t0,t1,t2 2>&1 | tee -a $L
for v in 0 1; do
  for p in "--prefill 2048" "--prefill-batch 8x512"; do
    n=$(echo $p | tr -d ' -' ); 
    step "ncu tma=$v $p" 60 $L env INFERA_CUDA_FLASH_TMA=$v $NCU --kernel-name regex:"attention_(tma|flash)_wgmma" --launch-count 6 --clock-control none --metrics gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active --csv --page raw --log-file $R/ncu_tma${v}_$n.csv $B/step_bench $A $p --batch 1 --context 16 --decode-steps 1 --repeats 1
  done
done
for f in $R/ncu_*.csv; do echo "== $f"; python3 - "$f" <<'PY'
import csv,sys
rows=[r for r in csv.reader(open(sys.argv[1])) if r]
h=None
for r in rows:
    if 'Kernel Name' in r: h=r; continue
    if h and len(r)==len(h) and r[0].isdigit():
        d=dict(zip(h,r)); print(d['Kernel Name'][:60], d.get('gpu__time_duration.sum'), d.get('sm__throughput.avg.pct_of_peak_sustained_elapsed'), d.get('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active'))
PY
done 2>&1 | tee -a $L
grep -E "prefill .*(tok/s)" $L | tail -40 >> $T
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
