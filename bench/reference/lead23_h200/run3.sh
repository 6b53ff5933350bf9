#!/bin/bash
# Session 23, run 3 (and run 5, after the softmax left local memory): the TMA prefill attention
# with K and V stages handed back apart, 2 or 3
# stages (CudaOptions::flash_tma_stages).
#   1. harness paged attention on cuda_flash_tma and cuda_flash_tma3 (3 stages); the model-level
#      TMA tests (2 and 3 stages over a poisoned cache, graph replay);
#   2. step_bench prefill A/B: off (t0) / 2 stages (t1) / 3 stages (t3), 3 rounds;
#   3. ncu of the attention kernels at 1x2048 and 8x512, off / 2 / 3 stages.
# run(command="DEADLINE=400 bash .devcarry/lead23c/run3.sh", carry=[".devcarry/lead23c"]).
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-400}
ROUNDS=${ROUNDS:-3}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared CUDA_MODULE_LOADING=EAGER
B=$HERE/bin; R=$OUT/raw; mkdir -p $R/json
T=$OUT/tests.log; L=$OUT/bench.log
source "$HERE/../../scripts/device_run_lib.sh"
REPO=$(cd $HERE/../.. && pwd)
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "gpu: $GPU" | tee -a $T $L
timeout 100 $B/test_backend_ops --gtest_filter='*Paged*/cuda_flash_tma*' > $R/harness.log 2>&1
verdict "harness paged attention, cuda_flash_tma" $R/harness.log "NMSE|nmse"
for st in 2; do
  INFERA_CUDA_FLASH_TMA_STAGES=$st timeout 100 $B/test_cuda_backend --gtest_filter='CudaWgmmaAttention*Tma*:CudaWgmmaAttention*Graph*' > $R/wgmma$st.log 2>&1
  verdict "CudaWgmmaAttention TMA tests, stages env $st" $R/wgmma$st.log "NMSE"
done
A="--model $M --dummy-weights --device cuda --kv-dtype bf16"
for r in $(seq 1 $ROUNDS); do
  for v in t0 t1 t3; do
    case $v in t0) E="INFERA_CUDA_FLASH_TMA=0";; t1) E="INFERA_CUDA_FLASH_TMA=1";; t3) E="INFERA_CUDA_FLASH_TMA=1 INFERA_CUDA_FLASH_TMA_STAGES=3";; esac
    step "prefill $v round $r" 60 $L env $E $B/step_bench $A --prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 16 --decode-steps 4 --repeats 12 --json $R/json/${v}_$r.json
  done
done
python3 $REPO/bench/step_bench_ratios.py $R/json t0,t1,t3 2>&1 | tee -a $L
MET=gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
for v in t0 t1 t3; do
  case $v in t0) E="INFERA_CUDA_FLASH_TMA=0";; t1) E="INFERA_CUDA_FLASH_TMA=1";; t3) E="INFERA_CUDA_FLASH_TMA=1 INFERA_CUDA_FLASH_TMA_STAGES=3";; esac
  step "ncu $v 2048" 40 $L env $E $NCU --kernel-name regex:"attention_(tma|flash)_wgmma" --launch-count 4 --clock-control none --metrics $MET --csv --page raw --log-file $R/ncu_${v}_2048.csv $B/step_bench $A --prefill 2048 --batch 1 --context 16 --decode-steps 1 --repeats 1
  step "ncu $v 8x512" 40 $L env $E $NCU --kernel-name-base demangled --kernel-name regex:"attention_tma_wgmma_kernel|attention_flash_wgmma_kernel<__nv_bfloat16, 128, 0" --launch-count 4 --clock-control none --metrics $MET --csv --page raw --log-file $R/ncu_${v}_8x512.csv $B/step_bench $A --prefill 16 --prefill-batch 8x512 --batch 1 --context 16 --decode-steps 1 --repeats 1
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
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
